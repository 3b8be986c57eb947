package staging

import (
	"strings"
	"testing"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// The staging log's entity of docs/format.md is where the Table keeps its log, and sorts
// before every arrival bucket's entity, but after none that Fold's queries select.
func TestStagingLogFormat(t *testing.T) {
	checkLogDoc(t, "staging-changes", LogPartition, StagingLogKey, 2)
	if bucket := PartitionKey(0, 0); !(LogPartition < bucket) || LogPartition >= "0" {
		t.Errorf("%q does not sort before every arrival bucket (%q) and PartitionKey 0", LogPartition, bucket)
	}
}

// The folds' log's entity of docs/format.md is where the Table keeps it, and sorts after
// every arrival bucket's entity, out of the range Fold's queries select.
func TestFoldsLogFormat(t *testing.T) {
	checkLogDoc(t, "staging-folds", FoldsPartition, FoldsBegunKey, 1)
	if bucket := PartitionKey(999_999_999_999, 0xff); !(FoldsPartition > bucket) || !strings.Contains(BucketsBefore(999_999_999_999), "PartitionKey lt '999999999999'") {
		t.Errorf("%q does not sort after every arrival bucket (%q), or Fold's queries reach it", FoldsPartition, bucket)
	}
}

// logAfter lets a raw log read after the read began go with a listing only when the
// refreshes since one that completed by then found the folds' log standing still.
func TestLogAfter(t *testing.T) {
	for _, c := range []struct {
		listed, quiet, began, want uint64
	}{
		{listed: 9, quiet: 4, began: 6, want: 6}, // quiet since a listing before the read: its own count
		{listed: 9, quiet: 6, began: 6, want: 6}, // the listing at quiet completed as the read began
		{listed: 9, quiet: 7, began: 6, want: 9}, // the folds' log moved after the read began: after the listing
		{listed: 9, quiet: 0, began: 6, want: 9}, // nothing known of the folds' log
		{listed: 9, quiet: 4, began: 0, want: 9}, // a read that did not begin
		{listed: 5, quiet: 4, began: 6, want: 5}, // a listing before the read (never later than it)
	} {
		if got := logAfter(c.listed, c.quiet, c.began); got != c.want {
			t.Errorf("logAfter(%d, %d, %d) = %d, want %d", c.listed, c.quiet, c.began, got, c.want)
		}
	}
}

// checkLogDoc checks that docs/format.md's golden name is a log's entity of keys pk/rk at
// generation gen.
func checkLogDoc(t *testing.T, name, pk, rk string, gen uint64) {
	t.Helper()
	doc := formatdoc.JSON(t, name)
	var e entity.Entity
	e.AllowStrings = true
	if err := e.Decode(doc); err != nil {
		t.Fatal(err)
	}
	if string(e.PartitionKey) != pk || string(e.RowKey) != rk {
		t.Errorf("the document's keys %s/%s, the Table's %s/%s", e.PartitionKey, e.RowKey, pk, rk)
	}
	if s, err := changelog.DecodeState(doc); err != nil || s.Gen() != gen {
		t.Errorf("decoded generation %d, %v", s.Gen(), err)
	}
}

// timeKeyMilli reads back the time keys of both kinds.
func TestTimeKeyMilli(t *testing.T) {
	for _, ms := range []int64{-5, 0, 1716422521000} {
		for _, key := range []string{TimeKey(ms), HistTimeKey(ms)} {
			if got, err := timeKeyMilli(key); err != nil || got != ms {
				t.Errorf("timeKeyMilli(%q) = %d, %v; want %d", key, got, err, ms)
			}
		}
	}
	for _, bad := range []string{"", "8000", "h", "zz00000000000000"} {
		if _, err := timeKeyMilli(bad); err == nil {
			t.Errorf("timeKeyMilli(%q): no error", bad)
		}
	}
}
