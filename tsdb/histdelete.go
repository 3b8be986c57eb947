package tsdb

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/pager"
)

// histMaxConflicts bounds the attempts at a chunk or a partition that keeps changing.
const histMaxConflicts = 20

// deleteHistograms removes the histogram samples of series with from <= Time < to from
// every histogram table of the range. A series the histogram tables refuse has none.
func (db *DB) deleteHistograms(ctx context.Context, series string, from, to time.Time) error {
	if validateHistSeries(series) != nil {
		return nil
	}
	spans, err := db.spans(ctx, histKind, from, to)
	if err != nil {
		return err
	}
	for _, sp := range spans {
		lo, hi := histUnits(sp.from, sp.to)
		if lo >= hi {
			continue
		}
		err := deleteHistRange(ctx, db.service.NewClient(db.names.HistTable(sp.period)), series, lo, hi)
		if !db.readDone(histKind, sp.period, err) && err != nil {
			return fmt.Errorf("tsdb: delete histograms of %q: %w", series, err)
		}
	}
	return nil
}

// histClient is the part of *aztables.Client the histogram tables' maintenance uses.
type histClient interface {
	batch.Submitter
	GetEntity(ctx context.Context, partitionKey, rowKey string, options *aztables.GetEntityOptions) (aztables.GetEntityResponse, error)
	UpdateEntity(ctx context.Context, entity []byte, options *aztables.UpdateEntityOptions) (aztables.UpdateEntityResponse, error)
	DeleteEntity(ctx context.Context, partitionKey, rowKey string, options *aztables.DeleteEntityOptions) (aztables.DeleteEntityResponse, error)
}

// deleteHistRange deletes the samples of series in [lo, hi) of one table: the chunks inside
// are deleted (a transaction per partition and 100 chunks), the chunks the range cuts are
// rewritten without its samples, conditionally on their ETags. A compaction that commits
// meanwhile may merge chunks into one this pass did not list: passes go on until one
// changes nothing.
func deleteHistRange(ctx context.Context, client histClient, series string, lo, hi uint64) error {
	plan, err := histPlan([]string{series}, lo, hi, histKeySelect)
	if err != nil {
		return err
	}
	for range histMaxConflicts {
		changed, err := deleteHistPass(ctx, client, plan, lo, hi)
		if err != nil || !changed {
			return err
		}
	}
	return fmt.Errorf("the range still changed after %d passes", histMaxConflicts)
}

// deleteHistPass deletes or trims every chunk the plan lists once, and reports whether it
// changed any.
func deleteHistPass(ctx context.Context, client histClient, plan []pager.SubQuery, lo, hi uint64) (bool, error) {
	e := entity.Entity{AllowStrings: true}
	changed := false
	for i, q := range plan {
		for page, err := range pager.Each(ctx, client, q, i) {
			if err != nil {
				return false, err
			}
			inside := map[string][]string{} // by partition
			var order []string
			var edges []histChunk
			for _, raw := range page.Entities {
				if err := e.Decode(raw); err != nil {
					return false, err
				}
				c, err := decodeHistChunk(&e, false)
				if err != nil {
					return false, err
				}
				if c.first < lo || c.last >= hi {
					edges = append(edges, c)
					continue
				}
				if inside[c.pk] == nil {
					order = append(order, c.pk)
				}
				inside[c.pk] = append(inside[c.pk], c.rk)
			}
			for _, pk := range order {
				for rks := inside[pk]; len(rks) > 0; {
					n := min(len(rks), entity.MaxBatchOperations)
					if err := batch.DeleteRows(ctx, client, pk, rks[:n]); err != nil {
						return false, err
					}
					rks, changed = rks[n:], true
				}
			}
			for _, c := range edges {
				trimmed, err := trimHistChunk(ctx, client, c.pk, c.rk, lo, hi)
				if err != nil {
					return false, err
				}
				changed = changed || trimmed
			}
		}
	}
	return changed, nil
}

// trimHistChunk removes the samples in [lo, hi) from one chunk: a read, then a rewrite (or a
// delete, when nothing is left) conditional on the ETag read; on a conflict it starts
// again. It reports whether it removed any sample.
func trimHistChunk(ctx context.Context, client histClient, pk, rk string, lo, hi uint64) (bool, error) {
	e := entity.Entity{AllowStrings: true}
	for range histMaxConflicts {
		resp, err := client.GetEntity(ctx, pk, rk, nil)
		if isStatus(err, http.StatusNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if err := e.Decode(resp.Value); err != nil {
			return false, err
		}
		c, err := decodeHistChunk(&e, true)
		if err != nil {
			return false, err
		}
		var kept []histenc.Sample
		removed := 0
		if err := c.samples(0, ^uint64(0), func(s histenc.Sample) {
			if s.Unit >= lo && s.Unit < hi {
				removed++
			} else {
				kept = append(kept, s)
			}
		}); err != nil {
			return false, err
		}
		if removed == 0 {
			return false, nil
		}
		err = replaceHistChunk(ctx, client, pk, rk, resp.ETag, c.prio, kept)
		if batch.IsConflict(err) {
			continue // changed meanwhile: read it again
		}
		return err == nil, err
	}
	return false, fmt.Errorf("chunk PartitionKey %q RowKey %q: still changing after %d attempts", pk, rk, histMaxConflicts)
}

// replaceHistChunk puts the chunk pk/rk, as read with etag, to hold exactly samples, with
// its priority: a conditional delete when there are none, else one transaction that
// deletes it (conditionally) and writes the new chunk under its own keys (or a conditional
// replace when they are the same).
func replaceHistChunk(ctx context.Context, client histClient, pk, rk string, etag azcore.ETag, prio uint64, samples []histenc.Sample) error {
	if len(samples) == 0 {
		_, err := client.DeleteEntity(ctx, pk, rk, &aztables.DeleteEntityOptions{IfMatch: &etag})
		if isStatus(err, http.StatusNotFound) {
			return nil
		}
		return err
	}
	chunk := histenc.Append(nil, samples)
	newRK := histRowKey(samples[0].Unit, prio, chunk)
	body := histBody(pk, newRK, samples[len(samples)-1].Unit, chunk)
	if newRK == rk {
		_, err := client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		return err
	}
	return batch.Submit(ctx, client, pk, []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeDelete, Entity: batch.KeysBody(pk, rk), IfMatch: &etag},
		{ActionType: aztables.TransactionTypeInsertReplace, Entity: body},
	})
}
