package changelog

import (
	"context"
	"errors"
)

// ErrNotKnown is a speculative read's (Speculative) where it needs a period's state this
// process has not read: the read is then made as any other.
var ErrNotKnown = errors.New("tsdb: a speculative read needs what was not read yet")

// speculativeKey is the context key of Speculative.
type speculativeKey struct{}

// Speculative returns a context whose States take the state last read of a period, read
// after whatever count or epoch, without a request and without waiting for one under way,
// and fail with ErrNotKnown where none was read: the read of a query that runs beside the
// refresh which then says whether what it took still stands (Changes; tsdb's
// DB.Speculate). Its answer is a read's only once that refresh found nothing changed.
func Speculative(ctx context.Context) context.Context {
	return context.WithValue(ctx, speculativeKey{}, true)
}

// IsSpeculative reports whether ctx is of Speculative.
func IsSpeculative(ctx context.Context) bool { return ctx.Value(speculativeKey{}) != nil }

// Changes counts the states this process read of c that differ from the one it knew of
// their period (or of a period it knew none of): while it stands, the states known are
// those a read after them would find, as far as this process has read.
func (c *Log) Changes() uint64 { return c.changes.Load() }

// speculative returns period p's state last read for a context of Speculative, or
// ErrNotKnown. c.mu is held.
func (c *Log) speculative(p uint64) (State, error) {
	if snap, ok := c.known[p]; ok {
		return snap.state, nil
	}
	return State{}, ErrNotKnown
}
