package reqlimit

import (
	"net/http"
	"strings"
	"time"
)

// Background work yields to the account's latency too, not only to this process's queries.
// Several servers on one database each bound their own background requests, and their
// shares add up at the account: in the soak with three servers (docs/soak.md, run 114), two
// servers' rollups, each within its busy share, made the third server's queries wait on
// their point reads of the change logs, and the 1h panels' p99 failed where one server
// alone met it (run 113). A server cannot see the others' requests, but it sees what they
// cost: its own point reads, the requests whose own work at the account is least, wait
// behind everything queued there, whichever server sent it.
//
// So the background share has a cap, set as TCP sets its window (additive increase,
// multiplicative decrease), once a LatencyWindow: a window in which more than a tenth of
// the point reads (of any class) took more than SlowMargin over the fastest of late halves
// the cap, at least one slot; any other window, or one with no point reads, adds a slot,
// up to the idle share. The fastest of late is the least a point read took in this
// FloorPeriod or the one before: what the account takes when nothing waits, whatever the
// distance to it.

// LatencyWindow is the period over which point reads are counted before the cap changes.
const LatencyWindow = time.Second

// SlowMargin is how much longer than the fastest point read of late one may take before it
// counts as slow: behind a fold's transaction of 100 entities, or a rollup's of a few
// tier blocks, on Azurite's one thread.
const SlowMargin = 50 * time.Millisecond

// FloorPeriod is how long the fastest point read is kept as the floor (and for one period
// more): the account's latency without a queue, which a move or a new route may change.
const FloorPeriod = 5 * time.Minute

// latencyCap is the background share's cap from the account's point reads. Its methods
// are called with Transport.mu held.
type latencyCap struct {
	limit int64 // what the cap grows to: the idle background share
	cap   int64

	began       time.Time // when the window being counted began (zero: none yet)
	reads, slow int

	// floor is the fastest point read since floorBegan, lastFloor of the period before
	// (zero: none).
	floor, lastFloor time.Duration
	floorBegan       time.Time

	// reads and slow point reads, and the windows that halved the cap, since the start.
	totalReads, totalSlow, halved int64
}

func newLatencyCap(limit int64) latencyCap { return latencyCap{limit: limit, cap: limit} }

// threshold is how long a point read may take before it counts as slow: the floor and
// SlowMargin. Before the first point read there is no floor, and none is slow.
func (c *latencyCap) threshold() (time.Duration, bool) {
	f := c.floor
	if c.lastFloor > 0 && (f == 0 || c.lastFloor < f) {
		f = c.lastFloor
	}
	return f + SlowMargin, f > 0
}

// observe counts a point read that took took and ended at now; it reports whether the cap
// changed.
func (c *latencyCap) observe(took time.Duration, now time.Time) bool {
	changed := c.advance(now)
	c.reads++
	c.totalReads++
	if threshold, ok := c.threshold(); ok && took > threshold {
		c.slow++
		c.totalSlow++
	}
	if c.floor == 0 || took < c.floor {
		c.floor = max(took, 1)
	}
	return changed
}

// advance ends the windows that ended by now, and the floor's period: the first window
// halves the cap if more than a tenth of its point reads were slow, and each other adds a
// slot. It reports whether the cap changed.
func (c *latencyCap) advance(now time.Time) bool {
	if c.began.IsZero() {
		c.began, c.floorBegan = now, now
		return false
	}
	if now.Sub(c.floorBegan) >= FloorPeriod {
		c.lastFloor, c.floor, c.floorBegan = c.floor, 0, now
	}
	ended := int64(now.Sub(c.began) / LatencyWindow)
	if ended <= 0 {
		return false
	}
	old := c.cap
	grow := ended
	if c.reads > 0 && c.slow*10 > c.reads {
		c.cap = max(c.cap/2, 1)
		c.halved++
		grow--
	}
	c.cap = min(c.cap+grow, c.limit)
	c.began = c.began.Add(time.Duration(ended) * LatencyWindow)
	c.reads, c.slow = 0, 0
	return c.cap != old
}

// isPointRead reports whether req reads one entity by its keys: a GET of
// Table(PartitionKey='…',RowKey='…').
func isPointRead(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	name := req.URL.Path[strings.LastIndexByte(req.URL.Path, '/')+1:]
	return strings.Contains(name, "(PartitionKey=")
}

// LatencyStats are what the background share's cap has seen of the account's latency.
type LatencyStats struct {
	// Cap is the slots the background share may hold now, whatever the queries.
	Cap int64
	// PointReads counts the point reads since the Transport was made, SlowPointReads
	// those of them over the floor and SlowMargin.
	PointReads, SlowPointReads int64
	// Halvings counts the windows that halved the cap.
	Halvings int64
	// Floor is the fastest point read of late (zero: none yet).
	Floor time.Duration
}

// Latency returns what the background share's cap has seen.
func (t *Transport) Latency() LatencyStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &t.latency
	s := LatencyStats{Cap: c.cap, PointReads: c.totalReads, SlowPointReads: c.totalSlow, Halvings: c.halved}
	if threshold, ok := c.threshold(); ok {
		s.Floor = threshold - SlowMargin
	}
	return s
}

// pointReadDone counts a point read that held its slot for took.
func (t *Transport) pointReadDone(took time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.latency.observe(took, time.Now()) {
		t.resizeBackgroundLocked()
	}
}

// backgroundBegins ends the windows that ended before a background request takes its
// share: a process with no point reads grows its cap back by time alone.
func (t *Transport) backgroundBegins() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.latency.advance(time.Now()) {
		t.resizeBackgroundLocked()
	}
}

// resizeBackgroundLocked sizes the background share: its busy or idle size, at most the
// cap. Called with mu held.
func (t *Transport) resizeBackgroundLocked() {
	size := t.idleBackground
	if t.busy {
		size = t.busyBackground
	}
	t.background.Resize(min(size, t.latency.cap))
}
