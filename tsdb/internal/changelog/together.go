package changelog

import (
	"context"
	"fmt"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
)

// A Want is a period of a log whose state StatesTogether returns.
type Want struct {
	Log    *Log
	Period uint64
}

// maxTogether is how many entities a query of StatesTogether reads at most: its filter
// compares the PartitionKey and each RowKey, and Azure takes 15 comparisons at most.
const maxTogether = 14

// StatesTogether returns the state of each want as its log's State with ctx returns it (a
// state known or a read under way serves it where it would serve State), but reads those
// it must in one query of their partition (maxTogether entities a query, the queries at
// once), where State reads each with a request of its own. The logs must have their
// entities in one partition of one table, as a database's raw and index logs do in its
// catalog: a read mark then reads the raw and index logs of every period of its range in
// one request.
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
	// Each query's reads, landed (their waiters served) whatever happens.
	errs := make(chan error, (len(reads)+maxTogether-1)/maxTogether)
	for lo := 0; lo < len(reads); lo += maxTogether {
		part := reads[lo:min(lo+maxTogether, len(reads))]
		go func() {
			ws := make([]Want, len(part))
			for j, pd := range part {
				ws[j] = wants[pd.i]
			}
			states, err := readTogether(ctx, ws)
			for j, pd := range part {
				w := wants[pd.i]
				w.Log.land(w.Period, pd.r, states[j], err)
				out[pd.i] = states[j]
			}
			errs <- err
		}()
	}
	var first error
	for lo := 0; lo < len(reads); lo += maxTogether {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	for _, pd := range waits {
		select {
		case <-pd.r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
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

// readTogether reads the entities of wants (at most maxTogether, of logs of one partition
// of one table) in one query: a period without an entity is generation 0.
func readTogether(ctx context.Context, wants []Want) ([]State, error) {
	states := make([]State, len(wants))
	first := wants[0].Log
	byKey := make(map[string][]int, len(wants))
	keys := make([]filter.Expr, 0, len(wants))
	for i, w := range wants {
		if w.Log.partition != first.partition {
			return states, fmt.Errorf("tsdb: change log: logs of partitions %q and %q read together", first.partition, w.Log.partition)
		}
		k := w.Log.key(w.Period)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, filter.Eq("RowKey", k))
		}
		byKey[k] = append(byKey[k], i)
	}
	q := pager.SubQuery{Filter: filter.And(filter.Eq("PartitionKey", first.partition), filter.Or(keys...)).String()}
	var e entity.Entity
	e.AllowStrings = true
	for page, err := range pager.Each(ctx, first.client, q, 0) {
		if azerr.IsTableGone(err) {
			return states, nil // no table: no entity
		}
		if err != nil {
			return states, fmt.Errorf("tsdb: change log: %w", err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return states, fmt.Errorf("tsdb: change log: %w", err)
			}
			s, err := decodeEntity(raw)
			if err != nil {
				return states, fmt.Errorf("tsdb: change log entity %s: %w", e.RowKey, err)
			}
			for _, i := range byKey[string(e.RowKey)] {
				states[i] = s
			}
		}
	}
	return states, nil
}
