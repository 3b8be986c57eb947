package engine

import (
	"context"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/batch"
)

// Write upserts points of one series: the layout maps them to rows, and WriteRows sends
// them. A failure is a *tablets.WriteError listing every argument whose row was in a failed
// transaction.
func (s *Store) Write(ctx context.Context, series string, points ...tablets.Point) error {
	if err := s.layout.ValidateSeries(series); err != nil {
		return err
	}
	units, err := batch.Units(s.layout.Format(), points)
	if err != nil {
		return s.errorf("write %q: %w", series, err)
	}
	kept := batch.LastWins(units)
	sortedUnits := make([]uint64, len(kept))
	values := make([]float64, len(kept))
	for i, idx := range kept {
		sortedUnits[i], values[i] = units[idx], points[idx].Value
	}
	var rows []Row
	s.layout.Rows(series, sortedUnits, values, func(r Row) { rows = append(rows, r) })
	if h, ok := s.layout.(Hinter); ok && len(sortedUnits) > 0 {
		// Filed with the rows of its partition (the hint holds no point: From = To).
		hint := h.HintRow(series, sortedUnits[len(sortedUnits)-1])
		hint.From, hint.To = len(sortedUnits), len(sortedUnits)
		at := len(rows)
		for at > 0 && rows[at-1].PartitionKey != hint.PartitionKey {
			at--
		}
		if at == 0 {
			at = len(rows)
		}
		rows = slices.Insert(rows, at, hint)
	}
	errs := WriteRows(ctx, s.client, rows, s.layout.WriteAction(), s.concurrency)
	// Every argument whose time went in a failed transaction may not be stored (superseded
	// duplicates included).
	lost := map[uint64]bool{}
	for i, err := range errs {
		if err != nil {
			for _, u := range sortedUnits[rows[i].From:rows[i].To] {
				lost[u] = true
			}
		}
	}
	if err := batch.WriteError(series, points, errs, func(i int) bool { return lost[units[i]] }); err != nil {
		return s.errorf("%w", err)
	}
	return nil
}

// WriteRows sends rows (in key order) with action, the rows of each partition in
// transactions under the batch limits (at most 100 operations and 4 MiB), concurrency at
// once, and returns for each row the error of its transaction (nil: stored). Every table of
// rows is written through it: the layouts' (Write) and tsdb's histogram tables (package
// chunks).
func WriteRows(ctx context.Context, client batch.Submitter, rows []Row, action aztables.TransactionType, concurrency int) []error {
	txns := transactions(rows)
	errs := batch.Run(ctx, concurrency, len(txns), func(ctx context.Context, t int) error {
		rs := rows[txns[t].from:txns[t].to]
		actions := make([]aztables.TransactionAction, len(rs))
		for i, r := range rs {
			actions[i] = aztables.TransactionAction{ActionType: action, Entity: r.Body}
		}
		return batch.Submit(ctx, client, rs[0].PartitionKey, actions)
	})
	rowErrs := make([]error, len(rows))
	for t, err := range errs {
		for i := txns[t].from; i < txns[t].to; i++ {
			rowErrs[i] = err
		}
	}
	return rowErrs
}

// txn is one transaction of WriteRows: rows [from, to), all of one partition.
type txn struct{ from, to int }

// transactions splits rows (in key order) into runs of one partition under the batch
// limits: at most 100 operations and 4 MiB a transaction.
func transactions(rows []Row) []txn {
	var txns []txn
	for from := 0; from < len(rows); {
		to := from
		for to < len(rows) && rows[to].PartitionKey == rows[from].PartitionKey {
			to++
		}
		pk := len(rows[from].PartitionKey)
		start := from
		for _, end := range entity.Batches(to-from, func(i int) int { return len(rows[from+i].Body) + 2*pk }) {
			txns = append(txns, txn{start, from + end})
			start = from + end
		}
		from = to
	}
	return txns
}
