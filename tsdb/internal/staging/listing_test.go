package staging

import (
	"testing"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// The staging log's entity of docs/format.md is where the Table keeps its log, and sorts
// before every arrival bucket's entity, but after none that Fold's queries select.
func TestStagingLogFormat(t *testing.T) {
	doc := formatdoc.JSON(t, "staging-changes")
	var e entity.Entity
	e.AllowStrings = true
	if err := e.Decode(doc); err != nil {
		t.Fatal(err)
	}
	if string(e.PartitionKey) != LogPartition || string(e.RowKey) != StagingLogKey {
		t.Errorf("the document's keys %s/%s, the Table's %s/%s", e.PartitionKey, e.RowKey, LogPartition, StagingLogKey)
	}
	if s, err := changelog.DecodeState(doc); err != nil || s.Gen() != 2 {
		t.Errorf("decoded generation %d, %v", s.Gen(), err)
	}
	if bucket := PartitionKey(0, 0); !(LogPartition < bucket) || LogPartition >= "0" {
		t.Errorf("%q does not sort before every arrival bucket (%q) and PartitionKey 0", LogPartition, bucket)
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
