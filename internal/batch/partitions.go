package batch

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
)

// SubmitAll sends the operations of one partition in as many transactions as the batch
// limits need, one after another; it stops at the first error.
func SubmitAll(ctx context.Context, client Submitter, pk string, actions []aztables.TransactionAction) error {
	start := 0
	for _, end := range entity.Batches(len(actions), func(i int) int { return len(actions[i].Entity) + 2*len(pk) }) {
		if err := Submit(ctx, client, pk, actions[start:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// PartitionsConcurrency is how many transactions SubmitPartitions sends at once.
const PartitionsConcurrency = 8

// SubmitPartitions sends the operations of many partitions of one table, in transactions
// under the batch limits, PartitionsConcurrency at a time; it returns the first error.
func SubmitPartitions(ctx context.Context, client Submitter, byPart map[string][]aztables.TransactionAction) error {
	type txn struct {
		pk      string
		actions []aztables.TransactionAction
	}
	var txns []txn
	for pk, actions := range byPart {
		start := 0
		for _, end := range entity.Batches(len(actions), func(i int) int { return len(actions[i].Entity) + 2*len(pk) }) {
			txns = append(txns, txn{pk, actions[start:end]})
			start = end
		}
	}
	for _, err := range Run(ctx, PartitionsConcurrency, len(txns), func(ctx context.Context, i int) error {
		return Submit(ctx, client, txns[i].pk, txns[i].actions)
	}) {
		if err != nil {
			return err
		}
	}
	return nil
}
