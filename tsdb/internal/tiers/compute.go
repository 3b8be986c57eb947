package tiers

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// ComputeLimit bounds how many goroutines compute rollups at once: decode the blocks they
// read, splice the new windows in and encode the blocks they write. A batched Rollup
// wrote 32 series at once, each of them mostly waiting for the account; but decoding a
// day's block of the minute tier to splice a minute in is CPU alone, and a server rolling
// up four tenants every minute (the soak) ran 128 of those at once, so that the queries
// in flight got a small share of the machine's cores for as long as the rollup ran, and
// waited for it. Bounded to half the process's cores, a rollup leaves the other half to
// the queries and takes longer only when those need them; the writes still overlap.
//
// It is safe for concurrent use.
type ComputeLimit struct {
	slots       chan struct{}
	busy        atomic.Int64
	peak        atomic.Int64
	callers     atomic.Int64 // in do: waiting for a slot or running
	peakCallers atomic.Int64
}

// NewComputeLimit returns a limit of n computations at once (at least 1).
func NewComputeLimit(n int) *ComputeLimit {
	return &ComputeLimit{slots: make(chan struct{}, max(n, 1))}
}

// defaultCompute is the limit of the Tiers whose Config names none: one for the process,
// as the cores it bounds are the process's.
var defaultCompute = sync.OnceValue(func() *ComputeLimit {
	return NewComputeLimit(runtime.GOMAXPROCS(0) / 2)
})

// do runs f once a slot is free, or returns ctx's error.
func (l *ComputeLimit) do(ctx context.Context, f func() error) error {
	raise(&l.peakCallers, l.callers.Add(1))
	defer l.callers.Add(-1)
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	raise(&l.peak, l.busy.Add(1))
	defer func() {
		l.busy.Add(-1)
		<-l.slots
	}()
	return f()
}

// raise sets peak to n if n is more.
func raise(peak *atomic.Int64, n int64) {
	for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
	}
}

// Peak is the most computations that ran at once.
func (l *ComputeLimit) Peak() int { return int(l.peak.Load()) }

// PeakCallers is the most computations that were waiting for a slot or running at once:
// the goroutines the limit held.
func (l *ComputeLimit) PeakCallers() int { return int(l.peakCallers.Load()) }

// Slots is how many computations may run at once.
func (l *ComputeLimit) Slots() int { return cap(l.slots) }
