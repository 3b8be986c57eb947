package reqlimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A Tally counts the account requests of one operation (a query): those a Transport sent
// with a context WithTally marked, whichever goroutine of the operation sent them. It is
// what a slow query's log line says of the account: whether the query waited for a slot
// of the server's bound (its own fan-out, or other queries and the background ahead of
// it), or for the account's answers, and how much it read. It is safe for concurrent use.
type Tally struct {
	requests atomic.Int64
	received atomic.Int64 // bytes of the bodies read
	waited   atomic.Int64 // nanoseconds from Do to the slot, summed over requests
	held     atomic.Int64 // nanoseconds from the slot to the body's end, summed over requests
	joined   atomic.Int64 // nanoseconds waited for reads other operations had under way
	budget   atomic.Int64 // nanoseconds waited for room in a read budget
	queued   atomic.Int64 // nanoseconds waited for a slot of the query engine

	mu      sync.Mutex
	slowest slowestRequest
}

// slowestRequest is the request of a Tally that held its slot longest: which of a slow
// query's requests the account kept waiting (a change log's point read behind a fold's
// pages, or a staging fetch of its own).
type slowestRequest struct {
	kind string // answerKind: the method and the table, its digits left out
	held time.Duration
}

// TallyCounts are a Tally's counts at one moment. Waited and Held are sums over the
// requests, which may overlap: a query's requests in parallel add more than the time
// it took.
type TallyCounts struct {
	Requests, ReceivedBytes int64
	Waited, Held            time.Duration
	// Slowest is the longest any one request held its slot, SlowestKind its method and
	// table (the table's digits left out: "GET tenantm" is a catalog's point read).
	Slowest     time.Duration
	SlowestKind string
	// Joined is the time the operation waited for reads that other operations had under
	// way and it joined (their requests count in their Tally), Budget the time it waited
	// for room in a read budget (the staging reads' memory), Queued the time it waited
	// for a slot of the query engine's concurrency: waits in the process that are neither
	// the account's nor its CPU's. Sums, as Waited.
	Joined, Budget, Queued time.Duration
}

// Counts returns the counts so far.
func (t *Tally) Counts() TallyCounts {
	t.mu.Lock()
	slowest := t.slowest
	t.mu.Unlock()
	return TallyCounts{Requests: t.requests.Load(), ReceivedBytes: t.received.Load(),
		Waited: time.Duration(t.waited.Load()), Held: time.Duration(t.held.Load()),
		Slowest: slowest.held, SlowestKind: slowest.kind,
		Joined: time.Duration(t.joined.Load()), Budget: time.Duration(t.budget.Load()),
		Queued: time.Duration(t.queued.Load())}
}

// TallyJoined counts, in the Tally of ctx if any, the time since began that the operation
// waited for a read another operation had under way (a shared fetch, a change log's read,
// a listing's refresh). Call it with defer at the wait: defer TallyJoined(ctx, time.Now()).
func TallyJoined(ctx context.Context, began time.Time) {
	if t := tallyOf(ctx); t != nil {
		t.joined.Add(int64(time.Since(began)))
	}
}

// TallyQueued counts, in the Tally of ctx if any, the time since began that the operation
// waited for a slot of the query engine's concurrency.
func TallyQueued(ctx context.Context, began time.Time) {
	if t := tallyOf(ctx); t != nil {
		t.queued.Add(int64(time.Since(began)))
	}
}

// TallyBudget counts, in the Tally of ctx if any, the time since began that the operation
// waited for room in a read budget.
func TallyBudget(ctx context.Context, began time.Time) {
	if t := tallyOf(ctx); t != nil {
		t.budget.Add(int64(time.Since(began)))
	}
}

type tallyKey struct{}

// WithTally returns ctx with a new Tally, which counts the requests sent with ctx or a
// context derived from it. A Tally of ctx already is replaced for the derived one.
func WithTally(ctx context.Context) (context.Context, *Tally) {
	t := &Tally{}
	return context.WithValue(ctx, tallyKey{}, t), t
}

// tallyOf is ctx's Tally, nil if none.
func tallyOf(ctx context.Context) *Tally {
	t, _ := ctx.Value(tallyKey{}).(*Tally)
	return t
}

// slotTaken records a request that waited for its slot for waited.
func (t *Tally) slotTaken(waited time.Duration) {
	if t == nil {
		return
	}
	t.requests.Add(1)
	t.waited.Add(int64(waited))
}

// released records a request of kind (answerKind, called only for a Tally) that held its
// slot for held and read received bytes.
func (t *Tally) released(kind func() string, held time.Duration, received int64) {
	if t == nil {
		return
	}
	t.held.Add(int64(held))
	t.received.Add(received)
	t.mu.Lock()
	defer t.mu.Unlock()
	if held > t.slowest.held || t.slowest.kind == "" {
		t.slowest = slowestRequest{kind: kind(), held: held}
	}
}
