package staging

import (
	"testing"
	"time"
)

// A Fold on time (every key listed of the bucket that ended at its horizon) spreads each
// round's writes over its share of the pace; one that catches up (a key of an older
// bucket: a backlog, or a late write into a bucket folded before) and one without a pace
// do not wait.
func TestFoldRoundSpan(t *testing.T) {
	const horizon = 1_741_597_800 // 09:10, the end of the bucket of 09:00
	due := uint64(horizon) - uint64(Bucket/time.Second)
	older := due - uint64(Bucket/time.Second)
	paced := &Folder{pace: 90 * time.Second}
	onTime := map[string][]string{PartitionKey(due, 0): {"a"}, PartitionKey(due, 0x80): {"b"}}
	for _, c := range []struct {
		name   string
		f      *Folder
		keys   map[string][]string
		rounds int
		want   time.Duration
	}{
		{"on time", paced, onTime, 1, 90 * time.Second},
		{"on time, three rounds", paced, onTime, 3, 30 * time.Second},
		{"catching up", paced, map[string][]string{PartitionKey(older, 0): {"a"}, PartitionKey(due, 0): {"b"}}, 1, 0},
		{"a late write into a bucket folded before", paced, map[string][]string{PartitionKey(older, 0x40): {"a"}}, 1, 0},
		{"no pace", &Folder{}, onTime, 1, 0},
	} {
		if got := c.f.roundSpan(c.keys, horizon, c.rounds); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
