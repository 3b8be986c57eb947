package layouts

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/itest"
)

func TestAdvancedOptions(t *testing.T) {
	client, checker := azurite.NewTable(t, nil)
	bad := map[string]advanced.Options{
		"negative partition factor":           {PartitionFactor: -time.Hour},
		"negative row factor":                 {RowFactor: -time.Minute},
		"negative resolution":                 {Resolution: -time.Second},
		"row not a multiple of resolution":    {RowFactor: 90 * time.Second, Resolution: time.Minute},
		"253 slots a row":                     {RowFactor: 253 * time.Second, PartitionFactor: 253 * time.Second},
		"partition not a multiple of the row": {PartitionFactor: 10 * time.Minute, RowFactor: 4 * time.Minute},
		"resolution too fine for 9999":        {Resolution: time.Nanosecond, RowFactor: 100 * time.Nanosecond, PartitionFactor: time.Microsecond},
		"negative concurrency":                {Concurrency: -1},
	}
	for name, opts := range bad {
		_, err := advanced.New(client, &opts)
		require.ErrorIs(t, err, tablets.ErrInvalidOptions, name)
	}
	_, err := advanced.New(nil, nil)
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
	s, err := advanced.New(client, &advanced.Options{RowFactor: 252 * time.Second, PartitionFactor: 252 * time.Second})
	require.NoError(t, err)
	require.Equal(t, time.Second, s.Options().Resolution)
	require.Zero(t, checker.Stats().Requests)
}

// The worked example of the README and the package doc, read back raw from the table.
func TestAdvancedKeyLayout(t *testing.T) {
	client, _ := azurite.NewTable(t, nil)
	s, err := advanced.New(client, nil)
	require.NoError(t, err)
	ctx := context.Background()
	at := time.Date(2015, 4, 28, 12, 4, 35, 0, time.UTC)
	require.NoError(t, s.Write(ctx, "cpu", tablets.Point{Time: at, Value: 0.5}))
	require.NoError(t, s.Write(ctx, "a|b~c", tablets.Point{Time: at, Value: 2}))

	var rows []map[string]any
	for pager := client.NewListEntitiesPager(nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		require.NoError(t, err)
		for _, e := range page.Entities {
			var m map[string]any
			require.NoError(t, json.Unmarshal(e, &m))
			rows = append(rows, m)
		}
	}
	require.Len(t, rows, 2)
	require.Equal(t, "a~pb~~c|001430222400", rows[0]["PartitionKey"])
	require.Equal(t, "cpu|001430222400", rows[1]["PartitionKey"])
	require.Equal(t, "001430222640", rows[1]["RowKey"])
	require.Equal(t, 0.5, rows[1]["v35"])
}

// A day at 1 Hz is 360 rows in 24 partitions: 24 transactions to write, and one filter of at
// most 15 comparisons (at most 2 requests, allowing the service one continuation) to read.
func TestAdvancedRequestCounts(t *testing.T) {
	client, checker := azurite.NewTable(t, nil)
	s, err := advanced.New(client, nil)
	require.NoError(t, err)
	ctx := context.Background()
	day := series1Hz(3, 86400, time.Second)
	require.NoError(t, s.Write(ctx, "cpu", day...))
	stats := checker.Stats()
	require.EqualValues(t, 24, stats.Batches)
	require.EqualValues(t, 360, stats.BatchOperations)
	require.EqualValues(t, 24, stats.Requests)

	for _, span := range []time.Duration{2 * time.Hour, 24 * time.Hour} {
		for _, offset := range []time.Duration{0, 7*time.Minute + 13*time.Second} {
			from := benchStart.Add(offset)
			to := from.Add(span)
			checker.Reset()
			got := itest.CollectPoints(t, s.Query(ctx, "cpu", from, to))
			var want []tablets.Point
			for _, p := range day {
				if !p.Time.Before(from) && p.Time.Before(to) {
					want = append(want, p)
				}
			}
			require.Equal(t, len(want), len(got), "%v from +%v", span, offset)
			require.Equal(t, want[0].Value, got[0].Value)
			require.Equal(t, want[len(want)-1].Time, got[len(got)-1].Time)
			require.LessOrEqual(t, checker.Stats().Requests, int64(2), "%v from +%v", span, offset)
		}
	}
	// Latest finds the newest points without scanning the series.
	checker.Reset()
	latest, err := s.Latest(ctx, "cpu", 3)
	require.NoError(t, err)
	require.Equal(t, day[len(day)-1].Time, latest[0].Time)
	require.Equal(t, day[len(day)-3].Time, latest[2].Time)
	require.Less(t, checker.Stats().Requests, int64(40))
}

// interferer writes to a row right before the first conditional rewrite of that row reaches
// the service, as a concurrent writer would between the delete's read and its write.
type interferer struct {
	next   policy.Transporter
	once   atomic.Bool
	before func()
}

func (i *interferer) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && req.Header.Get("If-Match") != "" && req.Header.Get("If-Match") != "*" && i.once.CompareAndSwap(false, true) {
		i.before()
	}
	return i.next.Do(req)
}

// Delete rewrites a row cut by the range conditionally on its ETag: a write that lands in
// between makes the rewrite fail and start again, and is kept.
func TestAdvancedDeleteKeepsConcurrentWrite(t *testing.T) {
	ctx := context.Background()
	var other *advanced.Store
	at := func(s int) time.Time { return benchStart.Add(time.Duration(s) * time.Second) }
	hook := &interferer{before: func() {
		require.NoError(t, other.Write(ctx, "cpu", tablets.Point{Time: at(200), Value: 42}))
	}}
	client, _ := azurite.NewTable(t, &azurite.TableOptions{Wrap: func(next policy.Transporter) policy.Transporter {
		hook.next = next
		return hook
	}})
	s, err := advanced.New(client, nil)
	require.NoError(t, err)
	other = s
	require.NoError(t, s.Write(ctx, "cpu", series1Hz(4, 240, time.Second)...)) // one full row
	// Delete [10 s, 100 s): the row is cut, so it is rewritten; the interferer writes slot 200.
	require.NoError(t, s.Delete(ctx, "cpu", at(10), at(100)))
	require.True(t, hook.once.Load(), "no conditional rewrite was sent")
	got := itest.CollectPoints(t, s.Query(ctx, "cpu", at(0), at(240)))
	require.Len(t, got, 240-90)
	for _, p := range got {
		require.False(t, !p.Time.Before(at(10)) && p.Time.Before(at(100)), "deleted point %v is back", p.Time)
		if p.Time.Equal(at(200)) {
			require.Equal(t, 42.0, p.Value, "the concurrent write was lost")
		}
	}
	var _ aztables.UpdateMode // the rewrite is an UpdateModeReplace with If-Match
}
