package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/pager"
)

// Delete removes the points with from <= Time < to. It streams: the keys of the range are
// listed a page at a time, and each page's entities are deleted (in transactions of one
// partition) before the next page is used, so memory holds a page or two whatever the
// range's size. An entity wholly inside the range is deleted; one cut by an edge is
// rewritten without the deleted points, conditionally on its ETag and again on a conflict,
// so a concurrent write to the rest of it is never lost.
func (s *Store) Delete(ctx context.Context, series string, from, to time.Time) error {
	lo, hi, err := s.seriesRange(series, from, to)
	if err != nil {
		return err
	}
	if lo >= hi {
		return nil
	}
	wrap := func(err error) error { return s.errorf("delete %q: %w", series, err) }
	plan, err := s.plan([]string{series}, lo, hi, "PartitionKey,RowKey")
	if err != nil {
		return wrap(err)
	}
	var e entity.Entity
	// Pages fetches the next page while this one is deleted: listing resumes after the last
	// key listed, so deleting what was listed does not disturb it.
	for page, err := range pager.Pages(ctx, s.client, plan, 0, pager.Continuation{}, 1) {
		if err != nil {
			return wrap(err)
		}
		var jobs []deleteJob
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return wrap(err)
			}
			first, last, err := s.layout.Span(e.PartitionKey, e.RowKey)
			if err != nil {
				return wrap(err)
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
		errs := batch.Run(ctx, s.concurrency, len(jobs), func(ctx context.Context, i int) error {
			if jobs[i].edge {
				return s.trim(ctx, jobs[i].pk, jobs[i].rks[0], lo, hi)
			}
			return batch.DeleteRows(ctx, s.client, jobs[i].pk, jobs[i].rks)
		})
		if err := errors.Join(errs...); err != nil {
			return wrap(err)
		}
	}
	return nil
}

// deleteJob is a transaction of deletes in one partition, or one entity to trim.
type deleteJob struct {
	pk   string
	rks  []string
	edge bool
}

// maxConflicts bounds the retries of a rewrite that keeps losing to concurrent writers.
const maxConflicts = 20

// trim removes the points in [lo, hi) from one entity: a read, then a replace (or a delete,
// if nothing is left) conditional on the ETag read; on a conflict it starts again.
func (s *Store) trim(ctx context.Context, pk, rk string, lo, hi uint64) error {
	for range maxConflicts {
		resp, err := s.client.GetEntity(ctx, pk, rk, nil)
		if isStatus(err, http.StatusNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var e entity.Entity
		if err := e.Decode(resp.Value); err != nil {
			return err
		}
		var units []uint64
		var values []float64
		removed := 0
		err = s.layout.Points(&e, func(t uint64, v float64) {
			if t >= lo && t < hi {
				removed++
				return
			}
			units, values = append(units, t), append(values, v)
		})
		if err != nil {
			return err
		}
		if removed == 0 {
			return nil
		}
		etag := resp.ETag
		if len(units) == 0 {
			_, err = s.client.DeleteEntity(ctx, pk, rk, &aztables.DeleteEntityOptions{IfMatch: &etag})
			if isStatus(err, http.StatusNotFound) {
				return nil
			}
		} else {
			body := s.layout.Encode(pk, rk, units, values)
			_, err = s.client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		}
		if isStatus(err, http.StatusPreconditionFailed) || isStatus(err, http.StatusNotFound) {
			continue // a concurrent write changed the entity: read it again
		}
		return err
	}
	return fmt.Errorf("entity PartitionKey %q RowKey %q: still changing after %d attempts", pk, rk, maxConflicts)
}

func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}
