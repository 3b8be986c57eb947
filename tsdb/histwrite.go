package tsdb

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/internal/priority"
)

// priorityNext is the write priority of a new chunk: the process's clock, which staging and
// the chunked layout share, so that of two writes the later wins.
func priorityNext() uint64 { return priority.Next() }

// histRows cuts samples (strictly increasing milliseconds) into chunks of at most
// histMaxChunk bytes, none across a partition, all with priority prio.
func histRows(series string, samples []histenc.Sample, prio uint64) []histRow {
	escaped := partkey.Escape(series)
	var rows []histRow
	for i := 0; i < len(samples); {
		end := i
		for p := histPartitionOf(samples[i].Unit); end < len(samples) && histPartitionOf(samples[end].Unit) == p; end++ {
		}
		for i < end {
			chunk, n := histenc.AppendLimit(nil, samples[i:end], histMaxChunk)
			pk := histPartitionKey(escaped, samples[i].Unit)
			rk := histRowKey(samples[i].Unit, prio, chunk)
			rows = append(rows, histRow{pk: pk, rk: rk, body: histBody(pk, rk, samples[i+n-1].Unit, chunk), from: i, to: i + n})
			i += n
		}
	}
	return rows
}

// histTransactions splits rows (in key order) into runs of one partition under the batch
// limits: at most 100 operations and 4 MiB a transaction.
func histTransactions(rows []histRow) []struct{ from, to int } {
	var txns []struct{ from, to int }
	for from := 0; from < len(rows); {
		to := from
		for to < len(rows) && rows[to].pk == rows[from].pk {
			to++
		}
		start := from
		for _, end := range entity.Batches(to-from, func(i int) int { return len(rows[from+i].body) + 2*len(rows[from+i].pk) }) {
			txns = append(txns, struct{ from, to int }{start, from + end})
			start = from + end
		}
		from = to
	}
	return txns
}

// submitHistRows writes rows of one partition in one transaction (insert or replace: a
// chunk is always written whole, and a retried write lands on the same keys).
func submitHistRows(ctx context.Context, client batch.Submitter, rows []histRow) error {
	actions := make([]aztables.TransactionAction, len(rows))
	for i, r := range rows {
		actions[i] = aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: r.body}
	}
	return batch.Submit(ctx, client, rows[0].pk, actions)
}
