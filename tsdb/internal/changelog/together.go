package changelog

import (
	"context"
	"time"

	"github.com/seed71701133/tablets/internal/reqlimit"
)

// A Want is a period of a log whose state StatesTogether returns.
type Want struct {
	Log    *Log
	Period uint64
}

// maxTogether is how many point reads StatesTogether has under way at once.
const maxTogether = 16

// StatesTogether returns the state of each want as its log's State with ctx returns it (a
// state known or a read under way serves it where it would serve State), but reads those
// it must at once (maxTogether at a time), where States one after the other would wait for
// each: a read mark reads the raw and index logs of every period of its range in the time
// of one request.
//
// Each is a point read of its own. One query of the logs' partition would be one request
// instead of a few, but on Azurite a query scans every entity of its table, and a
// database's logs share the catalog with its label-set registry (an entity a series): in
// the soak (docs/soak.md, run 60) such a query took 20 to 24 ms of Azurite's one thread,
// a point read 0.1 ms, and the queries of the logs were 30% of its time. On Azure both are
// a transaction, and a point read is the cheapest there is.
func StatesTogether(ctx context.Context, wants []Want) ([]State, error) {
	out := make([]State, len(wants))
	type pending struct {
		i int
		r *stateRead
	}
	var waits, reads []pending
	for i, w := range wants {
		c, p := w.Log, w.Period
		need, now := c.need(ctx)
		c.mu.Lock()
		if IsSpeculative(ctx) {
			s, err := c.speculative(p)
			c.mu.Unlock()
			if err != nil {
				return nil, err
			}
			out[i] = s
			continue
		}
		if snap, ok := c.known[p]; ok && snap.afterSeq >= need {
			out[i] = snap.state
			c.mu.Unlock()
			continue
		}
		if r, ok := c.inFlight[p]; ok && r.afterSeq >= need {
			waits = append(waits, pending{i, r})
			c.mu.Unlock()
			continue
		}
		r := &stateRead{afterSeq: now(), done: make(chan struct{})}
		if old, ok := c.inFlight[p]; !ok || old.afterSeq <= r.afterSeq {
			c.inFlight[p] = r
		}
		c.mu.Unlock()
		reads = append(reads, pending{i, r})
	}
	// Each read landed (its waiters served) whatever happens.
	errs := make(chan error, len(reads))
	slots := make(chan struct{}, maxTogether)
	for _, pd := range reads {
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			w := wants[pd.i]
			s, _, _, err := w.Log.read(ctx, w.Period)
			w.Log.land(w.Period, pd.r, s, err)
			out[pd.i] = s
			errs <- err
		}()
	}
	var first error
	for range reads {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	joined := time.Now()
	for _, pd := range waits {
		select {
		case <-pd.r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		reqlimit.TallyJoined(ctx, joined)
		joined = time.Now()
		if pd.r.err != nil {
			// The read it waited for failed (its caller's context, perhaps): its own.
			w := wants[pd.i]
			s, err := w.Log.State(ctx, w.Period)
			if err != nil {
				return nil, err
			}
			out[pd.i] = s
			continue
		}
		out[pd.i] = pd.r.state
	}
	return out, nil
}

// need returns what a state must have been read after for State with ctx to take it (the
// count of Log.after, or the epoch), and the count a read begun now is after: as State
// decides. A Log without after, outside a read that began, takes no state it did not read.
func (c *Log) need(ctx context.Context) (uint64, func() uint64) {
	nextEpoch := func() uint64 { return epoch.Add(1) }
	if c.after == nil {
		began, ok := ctx.Value(beganKey{}).(uint64)
		if !ok {
			return ^uint64(0), nextEpoch
		}
		return began + 1, nextEpoch
	}
	seq, ok := ctx.Value(afterKey{}).(uint64)
	if !ok {
		seq = c.after()
	}
	return seq, func() uint64 { return max(seq, c.after()) }
}
