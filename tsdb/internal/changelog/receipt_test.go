package changelog

import (
	"context"
	"crypto/sha256"
	"slices"
	"testing"
	"testing/synctest"
)

// A Fold's change waiting for the update under way keeps its receipt while it waits
// alone, and loses it once another change of this process joins it: the joined range is
// no Fold's alone.
func TestRecordJoinedDropsReceipt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const p = 1716422400
		c := &Log{waiting: map[uint64]*pendingChange{p: nil}} // an update under way
		ctx := context.Background()
		receipt := &Receipt{From: 600, Horizon: 1200, Count: 3, Digest: [16]byte{1}}
		go func() { _ = c.recordJoined(ctx, p, Range{From: 10, To: 20}, receipt) }()
		synctest.Wait()
		c.mu.Lock()
		w := c.waiting[p]
		c.mu.Unlock()
		if w == nil || w.receipt == nil || *w.receipt != *receipt {
			t.Fatalf("waiting alone: %+v", w)
		}
		go func() { _ = c.recordJoined(ctx, p, Range{From: 30, To: 40}, nil) }()
		synctest.Wait()
		c.mu.Lock()
		if w.receipt != nil || w.r != (Range{From: 10, To: 40}) {
			t.Errorf("joined: receipt %v, range %v", w.receipt, w.r)
		}
		c.mu.Unlock()
		close(w.done) // the update made: the callers return
		synctest.Wait()
	})
}

// Folds gives the receipts of the changes after a generation that overlap a range, and
// says false when one of them has none, or when the log no longer records them all.
func TestFolds(t *testing.T) {
	a := Receipt{From: 0, Horizon: 600, Count: 1, Digest: [16]byte{1}}
	b := Receipt{From: 600, Horizon: 1200, Count: 2, Digest: [16]byte{2}}
	s := State{gen: 10,
		ranges:   []Range{{From: 50, To: 60}, {From: 200, To: 300}, {From: 120, To: 121}},
		receipts: []genReceipt{{gen: 8, Receipt: a}, {gen: 10, Receipt: b}}}
	for _, c := range []struct {
		gen      uint64
		from, to int64
		want     []Receipt
		ok       bool
	}{
		{10, 0, 1000, nil, true},
		{9, 0, 1000, []Receipt{b}, true},
		{9, 0, 100, nil, true},            // the change is after the range
		{8, 0, 1000, nil, false},          // generation 9's change has no receipt
		{8, 100, 150, []Receipt{b}, true}, // and does not overlap
		{7, 0, 100, []Receipt{a}, true},
		{7, 0, 1000, nil, false},
		{6, 0, 1000, nil, false},  // no longer recorded
		{11, 0, 1000, nil, false}, // the log went back
	} {
		got, ok := s.Folds(c.gen, c.from, c.to)
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("Folds(%d, %d, %d) = %v, %v; want %v, %v", c.gen, c.from, c.to, got, ok, c.want, c.ok)
		}
	}
}

// The digest of a set is its entities' keys and ETags, sorted, each followed by a zero
// byte, whatever order they come in.
func TestReceiptDigest(t *testing.T) {
	set := []ReceiptEntity{{"000000000600-00", "b", `W/"2"`}, {"000000000000-00", "a", `W/"1"`}}
	sum := sha256.Sum256([]byte("000000000000-00\x00a\x00W/\"1\"\x00000000000600-00\x00b\x00W/\"2\"\x00"))
	if got := ReceiptDigest(set); got != [16]byte(sum[:16]) {
		t.Errorf("digest %x, want %x", got, sum[:16])
	}
	if ReceiptDigest(set) != ReceiptDigest([]ReceiptEntity{set[1], set[0]}) {
		t.Error("the order matters")
	}
	set[0].ETag = `W/"3"`
	if ReceiptDigest(set) == [16]byte(sum[:16]) {
		t.Error("the ETag does not count")
	}
}
