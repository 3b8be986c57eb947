package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/pager"
)

// Delete removes the points with from <= Time < to (see DeleteRange).
func (s *Store) Delete(ctx context.Context, series string, from, to time.Time) error {
	lo, hi, err := s.seriesRange(series, from, to)
	if err != nil {
		return err
	}
	if lo >= hi {
		return nil
	}
	plan, err := s.plan([]string{series}, lo, hi, s.layout.KeySelect())
	if err == nil {
		_, overlapping := s.layout.(Overlapping)
		err = DeleteRange[float64](ctx, s.client, s.layout, plan, lo, hi, overlapping, s.concurrency)
	}
	if err != nil {
		return s.errorf("delete %q: %w", series, err)
	}
	return nil
}

// Rewriter is what a delete needs of a layout whose entities hold values of type V (float64
// for the layouts' points): where an entity's values are, and how to write it again
// holding fewer.
type Rewriter[V any] interface {
	// Span returns bounds of the units an entity holds, from an entity read with its keys.
	Span(e *entity.Entity) (first, last uint64, err error)
	// Points calls yield with each value of a decoded entity, in time order.
	Points(e *entity.Entity, yield func(t uint64, v V)) error
	// Encode returns the entity that replaces the one with these keys when it is rewritten
	// to hold exactly these values: its RowKey (the same, or a new one in the same
	// partition) and its body.
	Encode(partitionKey, rowKey string, units []uint64, values []V) (string, []byte)
}

// DeleteRange removes the values in [lo, hi) units from the entities plan lists (each read
// with its keys and what Span needs). It streams: the keys are listed a page at a time,
// and each page's entities are deleted (in transactions of one partition, concurrency at
// once) before the next page is used, so memory holds a page or two whatever the range's
// size. An entity wholly inside the range is deleted; one cut by an edge is rewritten
// without the deleted values, conditionally on its ETag and again on a conflict, so a
// concurrent write to the rest of it is never lost. With overlapping (entities that may
// hold the same times: chunks), string properties are decoded, and passes go on until one
// changes nothing: a concurrent compaction may merge entities into one that a pass did not
// list. Every layout's Delete and tsdb's histogram tables' go through it.
func DeleteRange[V any](ctx context.Context, client Client, l Rewriter[V], plan []pager.SubQuery, lo, hi uint64, overlapping bool, concurrency int) error {
	d := deleter[V]{client: client, layout: l, overlapping: overlapping, concurrency: concurrency}
	for pass := 1; ; pass++ {
		changed, err := d.pass(ctx, plan, lo, hi)
		if err != nil {
			return err
		}
		if !overlapping || !changed {
			return nil
		}
		if pass == maxConflicts {
			return fmt.Errorf("the range still changed after %d passes", pass)
		}
	}
}

// deleter is the state of one DeleteRange.
type deleter[V any] struct {
	client      Client
	layout      Rewriter[V]
	overlapping bool
	concurrency int
}

// pass deletes or trims every entity the plan lists once, and reports whether it changed
// any.
func (d deleter[V]) pass(ctx context.Context, plan []pager.SubQuery, lo, hi uint64) (bool, error) {
	e := entity.Entity{AllowStrings: d.overlapping}
	changed := false
	// Pages fetches the next page while this one is deleted: listing resumes after the last
	// key listed, so deleting what was listed does not disturb it.
	for page, err := range pager.Pages(ctx, d.client, plan, 0, pager.Continuation{}, 1) {
		if err != nil {
			return false, err
		}
		var jobs []deleteJob
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return false, err
			}
			first, last, err := d.layout.Span(&e)
			if err != nil {
				return false, err
			}
			pk, rk := string(e.PartitionKey), string(e.RowKey)
			if first < lo || last >= hi {
				jobs = append(jobs, deleteJob{pk: pk, rks: []string{rk}, edge: true})
				continue
			}
			if n := len(jobs); n > 0 && !jobs[n-1].edge && jobs[n-1].pk == pk && len(jobs[n-1].rks) < entity.MaxBatchOperations {
				jobs[n-1].rks = append(jobs[n-1].rks, rk)
				continue
			}
			jobs = append(jobs, deleteJob{pk: pk, rks: []string{rk}})
		}
		trimmed := make([]bool, len(jobs))
		errs := batch.Run(ctx, d.concurrency, len(jobs), func(ctx context.Context, i int) (err error) {
			if jobs[i].edge {
				trimmed[i], err = d.trim(ctx, jobs[i].pk, jobs[i].rks[0], lo, hi)
				return err
			}
			return batch.DeleteRows(ctx, d.client, jobs[i].pk, jobs[i].rks)
		})
		if err := errors.Join(errs...); err != nil {
			return false, err
		}
		for i, j := range jobs {
			changed = changed || !j.edge || trimmed[i]
		}
	}
	return changed, nil
}

// deleteJob is a transaction of deletes in one partition, or one entity to trim.
type deleteJob struct {
	pk   string
	rks  []string
	edge bool
}

// maxConflicts bounds the retries of a rewrite that keeps losing to concurrent writers.
const maxConflicts = 20

// conflictBackoff waits before attempt (0: not at all) a random time up to 1 ms doubled each
// attempt, at most 100 ms: a rewrite that lost to busy writers retried at once tends to lose
// again to the same burst.
func conflictBackoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	limit := min(time.Millisecond<<min(attempt-1, 20), 100*time.Millisecond)
	t := time.NewTimer(rand.N(limit) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// trim removes the values in [lo, hi) from one entity: a read, then a replace (or a delete,
// if nothing is left) conditional on the ETag read; on a conflict it starts again. It
// reports whether it removed any value.
func (d deleter[V]) trim(ctx context.Context, pk, rk string, lo, hi uint64) (bool, error) {
	for attempt := range maxConflicts {
		if err := conflictBackoff(ctx, attempt); err != nil {
			return false, err
		}
		resp, err := d.client.GetEntity(ctx, pk, rk, nil)
		if isStatus(err, http.StatusNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		e := entity.Entity{AllowStrings: d.overlapping}
		if err := e.Decode(resp.Value); err != nil {
			return false, err
		}
		var units []uint64
		var values []V
		removed := 0
		err = d.layout.Points(&e, func(t uint64, v V) {
			if t >= lo && t < hi {
				removed++
				return
			}
			units, values = append(units, t), append(values, v)
		})
		if err != nil {
			return false, err
		}
		if removed == 0 {
			return false, nil
		}
		err = d.replace(ctx, pk, rk, resp.ETag, units, values)
		if batch.IsConflict(err) {
			continue // a concurrent write changed the entity: read it again
		}
		return err == nil, err
	}
	return false, fmt.Errorf("entity PartitionKey %q RowKey %q: still changing after %d attempts", pk, rk, maxConflicts)
}

// replace puts the entity pk/rk, as read with etag, to hold exactly these values: a delete
// if there are none, a conditional replace under the same keys, or, when the layout files
// the rewritten entity under a new RowKey, one transaction that deletes the old one
// (conditionally) and writes the new.
func (d deleter[V]) replace(ctx context.Context, pk, rk string, etag azcore.ETag, units []uint64, values []V) error {
	if len(units) == 0 {
		_, err := d.client.DeleteEntity(ctx, pk, rk, &aztables.DeleteEntityOptions{IfMatch: &etag})
		if isStatus(err, http.StatusNotFound) {
			return nil
		}
		return err
	}
	newRK, body := d.layout.Encode(pk, rk, units, values)
	if newRK == rk {
		_, err := d.client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		return err
	}
	return batch.Submit(ctx, d.client, pk, []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeDelete, Entity: batch.KeysBody(pk, rk), IfMatch: &etag},
		{ActionType: aztables.TransactionTypeInsertReplace, Entity: body},
	})
}

func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}
