package tiers

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/batch"
)

// maxPendingBytes bounds the operations a groupWriter holds, as bodies: past it, it sends
// its largest transaction though not full.
const maxPendingBytes = 32 << 20

// groupWriter packs the blocks a batched Rollup writes (packed layout) of many series into
// transactions of their partitions: a transaction is sent when full (100 operations or the
// batch's bytes), or when its group is done (flush). A transaction that fails as a block
// changed since it was read (batch.IsConflict) rolls up each of its series again by itself
// (rollupSeries), as a series layout's transaction of one series does.
type groupWriter struct {
	tr    *Tiers
	w     rollupWindows
	mu    sync.Mutex
	txns  map[[2]string]*pendingTxn // by table and PartitionKey
	bytes int                       // of all txns
}

// pendingTxn is a transaction being filled: its operations, their size, their series.
type pendingTxn struct {
	table, pk string
	ops       []aztables.TransactionAction
	size      int
	series    []string
}

func newGroupWriter(tr *Tiers, w rollupWindows) *groupWriter {
	return &groupWriter{tr: tr, w: w, txns: map[[2]string]*pendingTxn{}}
}

// add takes the writes of one series (sliceWrites'), and sends the transactions they fill.
func (g *groupWriter) add(ctx context.Context, writes []blockWrite) error {
	var full []*pendingTxn
	g.mu.Lock()
	for _, bw := range writes {
		k := [2]string{bw.table, bw.pk}
		for _, ops := range bw.blocks {
			p := g.txns[k]
			if p != nil && !fitsBatch(len(p.ops), p.size, p.pk, ops) {
				full = append(full, p)
				g.bytes -= p.size
				p = nil
			}
			if p == nil {
				p = &pendingTxn{table: bw.table, pk: bw.pk}
				g.txns[k] = p
			}
			n := opsBytes(bw.pk, ops)
			p.ops = append(p.ops, ops...)
			p.size += n
			g.bytes += n
			if len(p.series) == 0 || p.series[len(p.series)-1] != bw.series {
				p.series = append(p.series, bw.series)
			}
		}
	}
	for g.bytes > maxPendingBytes {
		// The largest, sent though not full: what is held stays bounded.
		var big [2]string
		size := -1
		for k, p := range g.txns {
			if p.size > size {
				big, size = k, p.size
			}
		}
		full = append(full, g.txns[big])
		g.bytes -= size
		delete(g.txns, big)
	}
	for _, p := range full {
		if g.txns[[2]string{p.table, p.pk}] == p {
			delete(g.txns, [2]string{p.table, p.pk})
		}
	}
	g.mu.Unlock()
	for _, p := range full {
		if err := g.send(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// flush sends every transaction still held, writeConcurrency at once.
func (g *groupWriter) flush(ctx context.Context) error {
	g.mu.Lock()
	keys := slices.Collect(maps.Keys(g.txns))
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	left := make([]*pendingTxn, len(keys))
	for i, k := range keys {
		left[i] = g.txns[k]
	}
	g.txns, g.bytes = map[[2]string]*pendingTxn{}, 0
	g.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan *pendingTxn)
	var wg sync.WaitGroup
	for range min(writeConcurrency, len(left)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				if err := g.send(ctx, p); err != nil {
					cancel(err)
				}
			}
		}()
	}
	for _, p := range left {
		select {
		case jobs <- p:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	return context.Cause(ctx)
}

// send submits one transaction; on a conflict it rolls up each of its series again.
func (g *groupWriter) send(ctx context.Context, p *pendingTxn) error {
	err := batch.Submit(ctx, g.tr.service.NewClient(p.table), p.pk, p.ops)
	if !batch.IsConflict(err) {
		return err
	}
	for _, series := range p.series {
		if err := g.tr.rollupSeries(ctx, series, g.w); err != nil {
			return fmt.Errorf("tsdb: rollup %q: %w", series, err)
		}
	}
	return nil
}
