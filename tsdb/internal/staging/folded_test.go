package staging

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// A Fold's receipt names the entities its rounds read, at the ETags read, and the buckets
// they are of; a Fold whose rounds read different entities or ETags (a Delete between two
// rounds) has none.
func TestReceiptOf(t *testing.T) {
	horizon := uint64(1716427800)
	round := map[[2]string]string{
		{"001716426600-00", "a"}: `W/"1"`,
		{"001716427200-80", "b"}: `W/"2"`,
	}
	r := receiptOf([]map[[2]string]string{round, round}, horizon)
	want := changelog.ReceiptDigest([]changelog.ReceiptEntity{
		{PartitionKey: "001716427200-80", RowKey: "b", ETag: `W/"2"`}, {PartitionKey: "001716426600-00", RowKey: "a", ETag: `W/"1"`}})
	if r == nil || r.From != 1716426600 || r.Horizon != horizon || r.Count != 2 || r.Digest != want {
		t.Errorf("receipt %+v", r)
	}
	other := map[[2]string]string{{"001716426600-00", "a"}: `W/"1"`, {"001716427200-80", "b"}: `W/"3"`}
	if r := receiptOf([]map[[2]string]string{round, other}, horizon); r != nil {
		t.Errorf("rounds at other ETags: %+v", r)
	}
	fewer := map[[2]string]string{{"001716426600-00", "a"}: `W/"1"`}
	if r := receiptOf([]map[[2]string]string{round, fewer}, horizon); r != nil {
		t.Errorf("rounds of other entities: %+v", r)
	}
	if r := receiptOf([]map[[2]string]string{{}}, horizon); r != nil {
		t.Errorf("nothing read: %+v", r)
	}
}

// A receipt is matched against the entities a Table's listings knew, listed now or
// departed since: those of its buckets, when they are as many and their digest is its.
func TestReceiptEntities(t *testing.T) {
	st := &Table{}
	now := time.Now()
	was := map[[2]string]listedProps{
		{"001716426600-00", "a"}: {etag: `W/"1"`},
		{"001716426600-00", "b"}: {etag: `W/"2"`},
		{"001716427200-00", "c"}: {etag: `W/"3"`}, // a later bucket
	}
	st.listing.byKey = map[[2]string]listedProps{
		{"001716427200-00", "c"}: {etag: `W/"3"`},
		{"001716426600-00", "b"}: {etag: `W/"4"`}, // rewritten (a Delete)
	}
	st.listing.depart(was, st.listing.byKey, now)
	if len(st.listing.departed) != 2 {
		t.Fatalf("departed %v", st.listing.departed)
	}
	digest := func(es ...changelog.ReceiptEntity) [16]byte { return changelog.ReceiptDigest(es) }
	a := changelog.ReceiptEntity{PartitionKey: "001716426600-00", RowKey: "a", ETag: `W/"1"`}
	b2 := changelog.ReceiptEntity{PartitionKey: "001716426600-00", RowKey: "b", ETag: `W/"2"`}
	b4 := changelog.ReceiptEntity{PartitionKey: "001716426600-00", RowKey: "b", ETag: `W/"4"`}
	// The bucket of 01:10 holds a, b as departed and b as listed now: three entities.
	for _, c := range []struct {
		r  changelog.Receipt
		ok bool
	}{
		{changelog.Receipt{From: 1716426600, Horizon: 1716427200, Count: 3, Digest: digest(a, b2, b4)}, true},
		{changelog.Receipt{From: 1716426600, Horizon: 1716427200, Count: 2, Digest: digest(a, b2)}, false},
		{changelog.Receipt{From: 1716426600, Horizon: 1716427200, Count: 3, Digest: digest(a, b2, b2)}, false},
		{changelog.Receipt{From: 1716427200, Horizon: 1716427800, Count: 1,
			Digest: digest(changelog.ReceiptEntity{PartitionKey: "001716427200-00", RowKey: "c", ETag: `W/"3"`})}, true},
	} {
		set, ok := st.receiptEntities(c.r)
		if ok != c.ok || (ok && uint64(len(set)) != c.r.Count) {
			t.Errorf("receipt %+v: %v, %v", c.r, set, ok)
		}
	}
	// Departed entities are forgotten after departedFor.
	st.listing.depart(st.listing.byKey, st.listing.byKey, now.Add(departedFor+time.Second))
	if len(st.listing.departed) != 0 {
		t.Errorf("still departed: %v", st.listing.departed)
	}
}
