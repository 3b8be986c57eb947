package basic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/rounding"
)

// virtualTable is a table of n basic entities of one series made up on demand: a listing
// serves pages of 1,000 keys, and deletes are checked off in a bitmap. It holds no list of
// keys itself, so the heap it leaves to measure is the engine's.
type virtualTable struct {
	format rounding.KeyFormat
	series string
	n      int

	mu       sync.Mutex
	deleted  []bool
	txns     int
	baseline uint64 // live heap before the delete
	peak     uint64 // most live heap seen during it
	err      error
}

func (v *virtualTable) NewListEntitiesPager(opts *aztables.ListEntitiesOptions) *azruntime.Pager[aztables.ListEntitiesResponse] {
	start := 0
	if opts.NextRowKey != nil {
		start, _ = strconv.Atoi(*opts.NextRowKey)
	}
	return azruntime.NewPager(azruntime.PagingHandler[aztables.ListEntitiesResponse]{
		More: func(r aztables.ListEntitiesResponse) bool { return r.NextRowKey != nil },
		Fetcher: func(ctx context.Context, _ *aztables.ListEntitiesResponse) (aztables.ListEntitiesResponse, error) {
			var resp aztables.ListEntitiesResponse
			end := min(start+1000, v.n)
			for i := start; i < end; i++ {
				e := fmt.Sprintf(`{"PartitionKey":%q,"RowKey":%q}`, v.series, v.format.AppendUnits(nil, uint64(i)))
				resp.Entities = append(resp.Entities, []byte(e))
			}
			if end < v.n {
				next := strconv.Itoa(end)
				resp.NextPartitionKey, resp.NextRowKey = &v.series, &next
			}
			return resp, nil
		},
	})
}

func (v *virtualTable) SubmitTransaction(_ context.Context, actions []aztables.TransactionAction, _ *aztables.SubmitTransactionOptions) (aztables.TransactionResponse, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, a := range actions {
		var keys struct{ PartitionKey, RowKey string }
		if err := json.Unmarshal(a.Entity, &keys); err != nil || a.ActionType != aztables.TransactionTypeDelete || keys.PartitionKey != v.series {
			v.err = fmt.Errorf("unexpected operation %s %s", a.ActionType, a.Entity)
			continue
		}
		u, err := v.format.ParseUnits(keys.RowKey)
		if err != nil || u >= uint64(v.n) || v.deleted[u] {
			v.err = fmt.Errorf("delete of %q: bad or repeated key", keys.RowKey)
			continue
		}
		v.deleted[u] = true
	}
	if v.txns++; v.txns%100 == 0 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		v.peak = max(v.peak, m.HeapAlloc)
	}
	return aztables.TransactionResponse{}, nil
}

var errUnexpected = errors.New("unexpected call")

func (v *virtualTable) UpsertEntity(context.Context, []byte, *aztables.UpsertEntityOptions) (aztables.UpsertEntityResponse, error) {
	return aztables.UpsertEntityResponse{}, errUnexpected
}
func (v *virtualTable) GetEntity(context.Context, string, string, *aztables.GetEntityOptions) (aztables.GetEntityResponse, error) {
	return aztables.GetEntityResponse{}, errUnexpected
}
func (v *virtualTable) UpdateEntity(context.Context, []byte, *aztables.UpdateEntityOptions) (aztables.UpdateEntityResponse, error) {
	return aztables.UpdateEntityResponse{}, errUnexpected
}
func (v *virtualTable) DeleteEntity(context.Context, string, string, *aztables.DeleteEntityOptions) (aztables.DeleteEntityResponse, error) {
	return aztables.DeleteEntityResponse{}, errUnexpected
}

// Delete of a million points streams: the live heap during it stays within a few pages of
// keys (a list of every key would hold a million strings, over 30 MB).
func TestDeleteStreamsAMillionPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("deletes a million (virtual) entities")
	}
	const n = 1_000_000
	format, err := rounding.NewKeyFormat(time.Second)
	require.NoError(t, err)
	table := &virtualTable{format: format, series: "cpu", n: n, deleted: make([]bool, n)}
	store := engine.New(table, layout{format: format}, 8, filter.Limits{})

	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	table.baseline = m.HeapAlloc
	require.NoError(t, store.Delete(context.Background(), "cpu", time.Unix(0, 0), time.Unix(n, 0)))
	require.NoError(t, table.err)
	for u, gone := range table.deleted {
		require.True(t, gone, "point %d not deleted", u)
	}
	require.Equal(t, n/100, table.txns, "transactions of 100")
	grown := int64(table.peak) - int64(table.baseline)
	t.Logf("live heap during the delete: at most %.1f MB over the %.1f MB before", float64(grown)/1e6, float64(table.baseline)/1e6)
	require.Less(t, grown, int64(8<<20), "Delete holds more than a few pages of keys")
}
