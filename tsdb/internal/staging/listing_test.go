package staging

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
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

// The logs' mark of docs/format.md is the entity MarkLogs writes, in the folds' log's
// partition (which every listing reads, and Fold's queries never select).
func TestLogsMarkFormat(t *testing.T) {
	doc := formatdoc.JSON(t, "staging-logs-mark")
	var r [16]byte
	for i := range r {
		r[i] = byte(0x0f + i*0x11)
	}
	if body := logsMarkBody(r); !bytes.Equal(bytes.TrimSpace(doc), body) {
		t.Errorf("the document's entity\n%s\nMarkLogs'\n%s", doc, body)
	}
	if !strings.Contains(listingSelect, ","+logsMarkProp) {
		t.Errorf("the listing's $select %q lacks the mark's value %s", listingSelect, logsMarkProp)
	}
}

// logAfter lets a raw log read after the read began go with a listing only when the
// refreshes since one that completed by then found the folds' log standing still, and
// one read after an earlier listing when they found the logs' mark as it was since.
func TestLogAfter(t *testing.T) {
	for _, c := range []struct {
		listed, quiet, began, mark, want uint64
	}{
		{listed: 9, quiet: 4, began: 6, want: 6}, // quiet since a listing before the read: its own count
		{listed: 9, quiet: 6, began: 6, want: 6}, // the listing at quiet completed as the read began
		{listed: 9, quiet: 7, began: 6, want: 9}, // the folds' log moved after the read began: after the listing
		{listed: 9, quiet: 0, began: 6, want: 9}, // nothing known of the folds' log
		{listed: 9, quiet: 4, began: 0, want: 9}, // a read that did not begin
		{listed: 5, quiet: 4, began: 6, want: 5}, // a listing before the read (never later than it)
		// The logs' mark as it was since the listing at mark, and the folds' log since
		// quiet: a state read after both.
		{listed: 9, quiet: 4, began: 6, mark: 2, want: 4},
		{listed: 9, quiet: 2, began: 6, mark: 3, want: 3},
		{listed: 9, quiet: 2, began: 0, mark: 3, want: 3}, // a read that did not begin (a Select alone's)
		{listed: 9, quiet: 0, began: 0, mark: 3, want: 9}, // nothing known of the folds' log
		{listed: 9, quiet: 4, began: 6, mark: 9, want: 6}, // the mark moved at the last listing
		{listed: 9, quiet: 7, began: 6, mark: 8, want: 8},
		{listed: 9, quiet: 9, began: 6, mark: 2, want: 9}, // the folds' log moved at the last listing
	} {
		if got := logAfter(c.listed, c.quiet, c.began, c.mark); got != c.want {
			t.Errorf("logAfter(%d, %d, %d, %d) = %d, want %d", c.listed, c.quiet, c.began, c.mark, got, c.want)
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

// The folds' entities as docs/format.md documents them: the body a Fold writes, and what a
// Fold after it reads back; another version, or a list that does not decode, is not relied
// on.
func TestFoldEntitiesFormat(t *testing.T) {
	etags := map[[2]string]string{
		{"001716426600-00", "17d1c2e3f4a5b6c7-0a1b2c3d-0000"}: `W/"datetime'2024-05-23T01%3A09%3A59.5Z'"`,
		{"001716427200-00", "17d1c2e7a0b1c2d3-0a1b2c3d-0000"}: `W/"datetime'2024-05-23T01%3A19%3A59.5Z'"`,
	}
	body, err := foldEntitiesBody(1716427800, etags)
	if err != nil {
		t.Fatal(err)
	}
	doc := formatdoc.JSON(t, "staging-fold-entities")
	if !bytes.Equal(bytes.TrimSpace(doc), body) {
		t.Errorf("the document's entity\n%s\nthe Fold's\n%s", doc, body)
	}
	h, got, err := parseFoldEntities(doc)
	if err != nil || h != "1716427800" || !maps.Equal(got, etags) {
		t.Errorf("read back horizon %q, %v, %v; want %v", h, got, err, etags)
	}
	other := bytes.Replace(doc, []byte(`"V":1`), []byte(`"V":2`), 1)
	if _, got, err := parseFoldEntities(other); err != nil || got != nil {
		t.Errorf("another version: %v, %v; want nothing relied on", got, err)
	}
	bad := bytes.Replace(doc, []byte(`"E0":"Dz`), []byte(`"E0":"/z`), 1)
	if _, _, err := parseFoldEntities(bad); err == nil {
		t.Errorf("a malformed list decoded")
	}
	// A list over ten parts is left out: a Fold after it folds as before.
	many := map[[2]string]string{}
	for i := range 20_000 {
		many[[2]string{"001716426600-00", fmt.Sprintf("%016x-0a1b2c3d-0000", i)}] = `W/"datetime'2024-05-23T01%3A09%3A59.5Z'"`
	}
	body, err = foldEntitiesBody(1716427800, many)
	if _, got, perr := parseFoldEntities(body); err != nil || perr != nil || got != nil || len(body) > 1<<20 {
		t.Errorf("a list of 20,000 entities: %d bytes, %d read back, %v, %v", len(body), len(got), err, perr)
	}
}

// A record of the folds' entities from the account never panics a Fold: it decodes, or is
// an error, or is not relied on; and a list encoded decodes to itself.
func FuzzFoldEntities(f *testing.F) {
	f.Add(formatdoc.JSON(f, "staging-fold-entities"), "k", "r", "e")
	f.Add([]byte(`{"V":1,"H":"1","E0":"AQ=="}`), "", "", "")
	f.Fuzz(func(t *testing.T, body []byte, pk, rk, etag string) {
		_, _, _ = parseFoldEntities(body)
		_, _ = decodeFoldEntities(body)
		want := map[[2]string]string{{pk, rk}: etag}
		got, err := decodeFoldEntities(encodeFoldEntities(want))
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("%q: read back %v, %v", want, got, err)
		}
	})
}

// The refreshes that find the logs' mark as the one at markFrom did keep markFrom (and
// vouch for the logs' states); one that finds it changed, lists the table whole, or finds
// no table begins again at its own count (none for no table).
func TestMarkFound(t *testing.T) {
	st := &Table{}
	l := &st.listing
	step := func(incremental bool, f listFound) uint64 {
		l.doneReads++
		st.markFound(incremental, f, changelog.Stamp())
		return l.markFrom
	}
	if got := step(false, listFound{mark: "a"}); got != 1 {
		t.Errorf("a whole listing: markFrom %d, want its own count 1", got)
	}
	if got := step(true, listFound{mark: "a"}); got != 1 {
		t.Errorf("the mark as it was: markFrom %d, want 1", got)
	}
	if got := step(true, listFound{mark: "b"}); got != 3 {
		t.Errorf("the mark changed: markFrom %d, want 3", got)
	}
	if got := step(false, listFound{mark: "b"}); got != 4 {
		t.Errorf("listed whole again (at least every listingRenewal): markFrom %d, want 4", got)
	}
	if got := step(true, listFound{gone: true}); got != 0 {
		t.Errorf("no table: markFrom %d, want 0", got)
	}
	if got := step(true, listFound{}); got != 6 {
		t.Errorf("after no table, none known: markFrom %d, want 6", got)
	}
	if got := step(true, listFound{}); got != 6 {
		t.Errorf("no mark yet, as before: markFrom %d, want 6", got)
	}
}

// The entities a listing selects through its order by U are those a scan of every entity
// selects, for the filters of reads of either kind, of some series or all, and a filter
// with no bound on U; and after the listing changed.
func TestListingSelectedByLast(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	l := &entityListing{byKey: map[[2]string]listedProps{}}
	addEntities := func(n int) {
		for range n {
			first := int64(rng.IntN(3600_000))
			last := first + int64(rng.IntN(600_000))
			p := listedProps{etag: fmt.Sprint(rng.Uint64()), first: TimeKey(first), last: TimeKey(last),
				lo: fmt.Sprintf("%02x", rng.IntN(128)), hi: fmt.Sprintf("%02x", 128+rng.IntN(128))}
			if rng.IntN(4) == 0 { // a histogram entity
				p.first, p.last = HistTimeKey(first), HistTimeKey(last)
			}
			l.byKey[[2]string{PartitionKey(uint64(first/600_000*600), 0), fmt.Sprint(rng.Uint64())}] = p
		}
	}
	keys := func(les []listedEntity) []string {
		out := make([]string, len(les))
		for i, le := range les {
			out[i] = le.pk + "/" + le.rk
		}
		slices.Sort(out)
		return out
	}
	scan := func(f filter.Expr) []string {
		var out []string
		for k, p := range l.byKey {
			if p.eval(f) {
				out = append(out, k[0]+"/"+k[1])
			}
		}
		slices.Sort(out)
		return out
	}
	addEntities(500)
	for round := range 3 {
		for range 200 {
			from := time.UnixMilli(int64(rng.IntN(4200_000)))
			to := from.Add(time.Duration(rng.IntN(3600_000)) * time.Millisecond)
			var series []string
			if rng.IntN(2) == 0 {
				series = []string{fmt.Sprint(rng.IntN(1000))}
			}
			kinds := []Kinds{Floats, Hists, Both}[rng.IntN(3)]
			f, _ := queryParts(series, from, to, kinds)
			if got, want := keys(l.selected(f)), scan(f); !slices.Equal(got, want) {
				t.Fatalf("round %d, [%v, %v) %v kinds %d: %d selected, a scan %d", round, from, to, series, kinds, len(got), len(want))
			}
		}
		unbounded := filter.Lt(FirstProp, TimeKey(1800_000))
		if got, want := keys(l.selected(unbounded)), scan(unbounded); !slices.Equal(got, want) {
			t.Fatalf("round %d, no bound on U: %d selected, a scan %d", round, len(got), len(want))
		}
		addEntities(50) // an incremental listing's (Table.refreshListing drops byLast)
		l.byLast = nil
	}
}
