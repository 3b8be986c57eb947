package tsdb

import (
	"context"
	"fmt"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/gate"
)

// ReadBudget bounds the memory that reads of staging tables hold at once, in bytes of the
// pages' JSON. A page of a staging read is the largest transient of a query: up to
// stagePageBytes (8 MiB) of JSON, held twice over (the body and its entities) while it is
// decoded, and a query's groups read them concurrently. Each page takes that size from the
// budget before it is requested and gives it back once decoded, before anything of it is
// yielded, so a reader never waits for the budget while it holds some. Readers wait in
// arrival order. A budget smaller than a page admits one page at a time.
//
// One budget may be shared by many DBs (Options.StagingReadBudget): a server's tenants
// share one, so their queries together hold a bounded amount. It is safe for concurrent
// use.
type ReadBudget struct {
	g *gate.Gate
}

// NewReadBudget returns a budget of bytes, which must be positive (else the error wraps
// tablets.ErrInvalidOptions).
func NewReadBudget(bytes int64) (*ReadBudget, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("tsdb: %w: staging read budget of %d bytes: must be positive", tablets.ErrInvalidOptions, bytes)
	}
	return &ReadBudget{g: gate.New(bytes)}, nil
}

// InUse is the bytes taken now and the number of pages waiting for room.
func (b *ReadBudget) InUse() (bytes int64, waiting int) { return b.g.State() }

// take takes n bytes (at most the whole budget) until ctx ends, and returns the function
// that gives them back. A nil budget admits everything.
func (b *ReadBudget) take(ctx context.Context, n int64) (func(), error) {
	if b == nil {
		return func() {}, nil
	}
	got, err := b.g.Acquire(ctx, n)
	if err != nil {
		return nil, err
	}
	return func() { b.g.Release(got) }, nil
}
