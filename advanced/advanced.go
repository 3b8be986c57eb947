package advanced

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/rounding"
)

// Options configure a Store. The zero value of each field means its default.
type Options struct {
	// PartitionFactor is the time span of one partition; a multiple of RowFactor. Default 1h.
	PartitionFactor time.Duration
	// RowFactor is the time span of one row (entity); a multiple of Resolution, and at most
	// 252 resolutions (one property per slot). Default 4m.
	RowFactor time.Duration
	// Resolution is the time resolution: a written time truncates to a multiple of it (from
	// the Unix epoch), and a row has RowFactor/Resolution slots. Default 1s.
	Resolution time.Duration
	// Concurrency is the number of requests a call has in flight at once (partitions written,
	// sub-queries read). Default 8.
	Concurrency int
}

// Defaults.
const (
	DefaultPartitionFactor = time.Hour
	DefaultRowFactor       = 4 * time.Minute
	DefaultResolution      = time.Second
	DefaultConcurrency     = 8
)

// Store is the advanced layout. It is safe for concurrent use.
type Store struct {
	client *aztables.Client
	opts   Options
	layout layout
	reader pager.Reader
}

var _ tablets.Store = (*Store)(nil)

// New returns a store on client's table (which must exist: see tablets.EnsureTable). nil
// options mean the defaults; invalid options give an error wrapping tablets.ErrInvalidOptions.
func New(client *aztables.Client, opts *Options) (*Store, error) {
	invalid := func(format string, args ...any) (*Store, error) {
		return nil, fmt.Errorf("advanced: %w: "+format, append([]any{tablets.ErrInvalidOptions}, args...)...)
	}
	if client == nil {
		return invalid("nil client")
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	defaults := []struct {
		v *time.Duration
		d time.Duration
	}{{&o.PartitionFactor, DefaultPartitionFactor}, {&o.RowFactor, DefaultRowFactor}, {&o.Resolution, DefaultResolution}}
	for _, f := range defaults {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	switch {
	case o.PartitionFactor < 0 || o.RowFactor < 0 || o.Resolution < 0:
		return invalid("factors must be positive (PartitionFactor %v, RowFactor %v, Resolution %v)", o.PartitionFactor, o.RowFactor, o.Resolution)
	case o.Concurrency < 0:
		return invalid("Concurrency %d is negative", o.Concurrency)
	case o.RowFactor%o.Resolution != 0:
		return invalid("RowFactor %v is not a multiple of Resolution %v", o.RowFactor, o.Resolution)
	case o.RowFactor/o.Resolution > entity.MaxUserProperties:
		return invalid("RowFactor/Resolution = %d slots a row, over Azure's %d properties an entity", o.RowFactor/o.Resolution, entity.MaxUserProperties)
	case o.PartitionFactor%o.RowFactor != 0:
		return invalid("PartitionFactor %v is not a multiple of RowFactor %v", o.PartitionFactor, o.RowFactor)
	}
	format, err := rounding.NewKeyFormat(o.Resolution)
	if err != nil {
		return nil, fmt.Errorf("advanced: %w", err)
	}
	l := layout{
		format:    format,
		rowUnits:  uint64(o.RowFactor / o.Resolution),
		partUnits: uint64(o.PartitionFactor / o.Resolution),
		limits:    filter.Limits{MaxComparisons: entity.MaxFilterComparisons, MaxLength: filter.DefaultMaxLength},
	}
	s := &Store{client: client, opts: o, layout: l}
	s.reader = pager.Reader{Client: client, Layout: l, Concurrency: o.Concurrency, Limits: l.limits}
	return s, nil
}

// Options returns the store's options with defaults filled in.
func (s *Store) Options() Options { return s.opts }

// row is the points bound for one entity, as indexes into the Write arguments by slot.
type row struct {
	partition uint64
	start     uint64
	slots     []slotPoint
}

type slotPoint struct {
	slot  int
	point int // index into the arguments
}

// Write upserts points of one series: each row becomes one merge of its slots, rows of one
// partition go in transactions of up to 100, partitions are written concurrently.
func (s *Store) Write(ctx context.Context, series string, points ...tablets.Point) error {
	if err := s.layout.ValidateSeries(series); err != nil {
		return err
	}
	l := s.layout
	units, err := batch.Units(l.format, points)
	if err != nil {
		return fmt.Errorf("advanced: write %q: %w", series, err)
	}
	var rows []row
	for _, idx := range batch.LastWins(units) {
		u := units[idx]
		start := u / l.rowUnits * l.rowUnits
		if len(rows) == 0 || rows[len(rows)-1].start != start {
			rows = append(rows, row{partition: u / l.partUnits * l.partUnits, start: start})
		}
		r := &rows[len(rows)-1]
		r.slots = append(r.slots, slotPoint{slot: int(u - start), point: idx})
	}
	escaped := escapeSeries(series)
	bodies := make([][]byte, len(rows))
	for i, r := range rows {
		b := make([]byte, 0, 64+len(escaped)+24*len(r.slots))
		b = entity.AppendKeys(b, l.partitionKey(escaped, r.partition), l.key(r.start))
		for _, sp := range r.slots {
			b = entity.AppendSlot(b, sp.slot, points[sp.point].Value)
		}
		bodies[i] = entity.AppendEnd(b)
	}
	// Transactions: runs of rows of one partition, under the batch limits.
	type txn struct{ from, to int }
	var txns []txn
	for from := 0; from < len(rows); {
		to := from
		for to < len(rows) && rows[to].partition == rows[from].partition {
			to++
		}
		start := from
		for _, end := range entity.Batches(to-from, func(i int) int { return len(bodies[from+i]) + 2*len(escaped) }) {
			txns = append(txns, txn{start, from + end})
			start = from + end
		}
		from = to
	}
	errs := batch.Run(ctx, s.opts.Concurrency, len(txns), func(ctx context.Context, t int) error {
		actions := make([]aztables.TransactionAction, 0, txns[t].to-txns[t].from)
		for _, body := range bodies[txns[t].from:txns[t].to] {
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertMerge, Entity: body})
		}
		return batch.Submit(ctx, s.client, l.partitionKey(escaped, rows[txns[t].from].partition), actions)
	})
	// Every argument whose row was in a failed transaction may not be stored.
	lostRows := map[uint64]bool{}
	for t, err := range errs {
		if err != nil {
			for _, r := range rows[txns[t].from:txns[t].to] {
				lostRows[r.start] = true
			}
		}
	}
	lost := func(i int) bool { return lostRows[units[i]/l.rowUnits*l.rowUnits] }
	if err := batch.WriteError(series, points, errs, lost); err != nil {
		return fmt.Errorf("advanced: %w", err)
	}
	return nil
}

// Query yields the points with from <= Time < to, oldest first.
func (s *Store) Query(ctx context.Context, series string, from, to time.Time) iter.Seq2[tablets.Point, error] {
	return s.reader.Query(ctx, series, from, to)
}

// QueryPage returns at most limit points of [from, to) from token ("" to start). Tokens
// resume inside a row.
func (s *Store) QueryPage(ctx context.Context, series string, from, to time.Time, limit int, token string) (tablets.Page, error) {
	return s.reader.QueryPage(ctx, series, from, to, limit, token)
}

// QueryMany yields the points of every named series in [from, to).
func (s *Store) QueryMany(ctx context.Context, series []string, from, to time.Time) iter.Seq2[tablets.SeriesPoint, error] {
	return s.reader.QueryMany(ctx, series, from, to)
}

// Latest returns the n newest points of the series, newest first.
func (s *Store) Latest(ctx context.Context, series string, n int) ([]tablets.Point, error) {
	return s.reader.Latest(ctx, series, n)
}

// Delete removes the points with from <= Time < to. Rows wholly inside the range are
// deleted in transactions; a row cut by an edge of the range is rewritten without the
// deleted slots, conditionally on its ETag and retried on a conflict, so a concurrent write
// to the rest of that row is never lost.
func (s *Store) Delete(ctx context.Context, series string, from, to time.Time) error {
	lo, hi, err := s.reader.SeriesRange(series, from, to)
	if err != nil {
		return err
	}
	if lo >= hi {
		return nil
	}
	wrap := func(err error) error { return fmt.Errorf("advanced: delete %q: %w", series, err) }
	l := s.layout
	// At most six comparisons: one filter.
	plan := []pager.SubQuery{{Filter: filter.Or(l.Clauses(series, lo, hi)...).String(), Select: "PartitionKey,RowKey"}}
	whole := map[string][]string{} // PartitionKey -> RowKeys of rows wholly inside
	var partitions []string
	var edges [][2]string
	var e entity.Entity
	for page, err := range pager.Pages(ctx, s.client, plan, 0, pager.Continuation{}, s.opts.Concurrency) {
		if err != nil {
			return wrap(err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return wrap(err)
			}
			start, err := l.format.ParseUnitsBytes(e.RowKey)
			if err != nil {
				return wrap(fmt.Errorf("entity PartitionKey %q RowKey %q: %w", e.PartitionKey, e.RowKey, err))
			}
			pk, rk := string(e.PartitionKey), string(e.RowKey)
			if start >= lo && start+l.rowUnits <= hi {
				if _, ok := whole[pk]; !ok {
					partitions = append(partitions, pk)
				}
				whole[pk] = append(whole[pk], rk)
			} else {
				edges = append(edges, [2]string{pk, rk})
			}
		}
	}
	type job struct {
		pk   string
		rks  []string
		edge bool
	}
	var jobs []job
	for _, pk := range partitions {
		rks := whole[pk]
		for len(rks) > 0 {
			n := min(len(rks), entity.MaxBatchOperations)
			jobs = append(jobs, job{pk: pk, rks: rks[:n]})
			rks = rks[n:]
		}
	}
	for _, edge := range edges {
		jobs = append(jobs, job{pk: edge[0], rks: []string{edge[1]}, edge: true})
	}
	errs := batch.Run(ctx, s.opts.Concurrency, len(jobs), func(ctx context.Context, i int) error {
		if jobs[i].edge {
			return s.trimRow(ctx, jobs[i].pk, jobs[i].rks[0], lo, hi)
		}
		return batch.DeleteRows(ctx, s.client, jobs[i].pk, jobs[i].rks)
	})
	if err := errors.Join(errs...); err != nil {
		return wrap(err)
	}
	return nil
}

// maxConflicts bounds the retries of a row rewrite that keeps losing to concurrent writers.
const maxConflicts = 20

// trimRow removes the slots in [lo, hi) from one row: a read, then a replace (or a delete,
// if nothing is left) conditional on the ETag read; on a conflict it starts again.
func (s *Store) trimRow(ctx context.Context, pk, rk string, lo, hi uint64) error {
	l := s.layout
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
		body := entity.AppendKeys(nil, pk, rk)
		removed, kept := 0, 0
		err = l.Points(&e, func(t uint64, v float64) {
			if t >= lo && t < hi {
				removed++
				return
			}
			kept++
			start := t / l.rowUnits * l.rowUnits
			body = entity.AppendSlot(body, int(t-start), v)
		})
		if err != nil {
			return err
		}
		if removed == 0 {
			return nil
		}
		etag := resp.ETag
		if kept == 0 {
			_, err = s.client.DeleteEntity(ctx, pk, rk, &aztables.DeleteEntityOptions{IfMatch: &etag})
			if isStatus(err, http.StatusNotFound) {
				return nil
			}
		} else {
			_, err = s.client.UpdateEntity(ctx, entity.AppendEnd(body), &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		}
		if isStatus(err, http.StatusPreconditionFailed) || isStatus(err, http.StatusNotFound) {
			continue // a concurrent write changed the row: read it again
		}
		return err
	}
	return fmt.Errorf("row PartitionKey %q RowKey %q: still changing after %d attempts", pk, rk, maxConflicts)
}

func isStatus(err error, status int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == status
}
