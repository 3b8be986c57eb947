package remote

import (
	"context"

	"github.com/seed71701133/tablets/internal/gate"
)

// gateOf bounds the samples in flight and the reads served at once: a FIFO weighted
// semaphore (package server/internal/gate). Its callers never ask more than its size.
type gateOf struct{ g *gate.Gate }

func newGate(size int64) *gateOf { return &gateOf{gate.New(size)} }

// acquire takes n (at most size) units, waiting for them until ctx ends.
func (g *gateOf) acquire(ctx context.Context, n int64) error {
	_, err := g.g.Acquire(ctx, n)
	return err
}

// release returns n units.
func (g *gateOf) release(n int64) { g.g.Release(n) }

// state returns the units in use and the number of waiters.
func (g *gateOf) state() (used int64, waiting int) { return g.g.State() }
