package tiers

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
)

// The tier block of docs/format.md's worked examples (package tsdb's TestFormatDoc has the
// others): a block of the minute tier of the example's series whose window 2 holds two
// points, and its stale flag.
func TestBlockFormatDoc(t *testing.T) {
	key := labels.Key(labels.FromStrings("job", "api", "__name__", "up"))
	start := uint64(time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC).Unix())
	ws := time.Unix(int64(start), 0).UTC().Add(2 * time.Minute)
	w := newWindow(ws, 0)
	w.add(ws.Add(time.Second), 2.5)
	w.add(ws.Add(30*time.Second), 4)
	b := &block{start: start, rolled: float64(start + 3600)}
	b.windows[2] = w
	if body := appendBlock(nil, key, time.Minute, b); string(body) != string(formatdoc.JSON(t, "block")) {
		t.Errorf("block %s", body)
	}
	if body := appendStale(key, start); string(body) != string(formatdoc.JSON(t, "block-stale")) {
		t.Errorf("stale flag %s", body)
	}
}
