package tiers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// tierLayout reads the tier layout database name records: its V and L.
func tierLayout(t *testing.T, svc *aztables.ServiceClient, name string) (float64, string) {
	t.Helper()
	resp, err := svc.NewClient(name+"m").GetEntity(context.Background(), "format", "tiers", nil)
	require.NoError(t, err)
	e := entity.Entity{AllowStrings: true}
	require.NoError(t, e.Decode(resp.Value))
	l, _ := e.String("L")
	for _, p := range e.Props {
		if string(p.Name) == "V" {
			return p.Value, string(l)
		}
	}
	t.Fatal("no V")
	return 0, ""
}

// A new database records the packed layout at its first Open and writes its blocks so; a
// database rolled up by a version before the record (tier tables, no record) records the
// series layout, and keeps it once Retain dropped its tier tables; a record of a later
// version is an error at Open.
func TestTSDBTierLayoutRecord(t *testing.T) {
	ctx := context.Background()
	opts := &tsdb.Options{RawPeriod: 24 * time.Hour, Layout: chunkedLayout}
	db, svc, _ := newDB(t, opts)
	v, l := tierLayout(t, svc, db.Name())
	require.Equal(t, [2]any{2.0, "packed"}, [2]any{v, l})
	pts := every15s(itest.RollupBase, 240, 1)
	require.NoError(t, db.Write(ctx, "cpu", pts...))
	require.NoError(t, db.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(24*time.Hour)))
	minutes := svc.NewClient(tierTableOf(db, time.Minute, itest.RollupBase.Unix()))
	_, err := minutes.GetEntity(ctx, "cp", fmt.Sprintf("cpu|%012d", itest.RollupBase.Unix()), nil)
	require.NoError(t, err, "the packed block of cpu's day of minutes")

	// Tier tables without a record: an earlier version's. The record says series from then
	// on, its blocks keyed by series.
	old := reopenUnrecorded(t, svc, db, opts)
	v, l = tierLayout(t, svc, db.Name())
	require.Equal(t, [2]any{1.0, "series"}, [2]any{v, l})
	require.NoError(t, old.Write(ctx, "mem", pts...))
	require.NoError(t, old.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(24*time.Hour)))
	_, err = minutes.GetEntity(ctx, "mem", fmt.Sprintf("%012d", itest.RollupBase.Unix()), nil)
	require.NoError(t, err, "the series layout's block of mem's day of minutes")
	for _, step := range []time.Duration{time.Minute, time.Hour} {
		got := itest.CollectWindows(t, old.Aggregate(ctx, []string{"mem"}, itest.RollupBase, itest.RollupBase.Add(24*time.Hour), step, nil))
		itest.RequireWindows(t, itest.ModelWindows(pts, itest.RollupBase, itest.RollupBase.Add(24*time.Hour), step), got, "mem at "+step.String())
	}
	// The tier tables gone (as Retain drops them): the record still decides.
	for _, name := range []string{tierTableOf(db, time.Minute, itest.RollupBase.Unix()), tierTableOf(db, time.Hour, itest.RollupBase.Unix())} {
		_, err := svc.NewClient(name).Delete(ctx, nil)
		require.NoError(t, err)
	}
	_, err = tsdb.Open(ctx, svc, db.Name(), opts)
	require.NoError(t, err)
	v, _ = tierLayout(t, svc, db.Name())
	require.Equal(t, 1.0, v, "the record, not the tables, decides")

	// A later version's record.
	_, err = svc.NewClient(db.Name()+"m").UpsertEntity(ctx, []byte(`{"PartitionKey":"format","RowKey":"tiers","V":3,"V@odata.type":"Edm.Double","L":"later"}`), nil)
	require.NoError(t, err)
	_, err = tsdb.Open(ctx, svc, db.Name(), opts)
	require.ErrorContains(t, err, "tier layout is version 3")
}

// A batched Rollup in the packed layout writes the blocks of series sharing a partition in
// one transaction; when another process's write changed one of them between the read and
// the write, the transaction fails whole (Azure's entity group transactions are atomic),
// and each of its series is rolled up again by itself: every block stored in the end holds
// what the points say, the late point included.
func TestTSDBRollupPackedRace(t *testing.T) {
	ctx := context.Background()
	opts := &tsdb.Options{RawPeriod: 24 * time.Hour, Layout: chunkedLayout}
	db, svc, _ := newDB(t, opts)
	names := []string{"s1a", "s1b", "s1c"} // one partition, "s1"
	all := map[string][]tablets.Point{}
	var batch []tsdb.SeriesPoints
	for i, s := range names {
		all[s] = every15s(itest.RollupBase, 480, i)
		batch = append(batch, tsdb.SeriesPoints{Series: s, Points: all[s]})
	}
	require.NoError(t, db.WriteMany(ctx, batch))
	require.NoError(t, db.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
	for i, s := range names { // a point more each: the next Rollup rewrites every block
		more := tablets.Point{Time: itest.RollupBase.Add(90*time.Minute + time.Duration(20+i)*time.Second), Value: 0.5}
		require.NoError(t, db.Write(ctx, s, more))
		all[s] = append(all[s], more)
	}

	h := &itest.Hooked{}
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	h.Next = checker
	hsvc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: h, Retry: azurite.TestRetryOptions()}})
	require.NoError(t, err)
	hdb, err := tsdb.Open(ctx, hsvc, db.Name(), opts)
	require.NoError(t, err)
	late := tablets.Point{Time: itest.RollupBase.Add(30*time.Minute + 7*time.Second), Value: -7.5} // between scrapes
	injected, ops := false, 0
	h.Arm(func(req *http.Request) bool {
		body := string(itest.PeekBody(req))
		if itest.IsBatch(req) && strings.Contains(body, "t60p") && strings.Contains(body, `"PartitionKey":"s1"`) {
			ops = strings.Count(body, `"PartitionKey":"s1"`)
			return true
		}
		return false
	}, func() {
		injected = true
		require.NoError(t, db.Write(ctx, "s1b", late))
		require.NoError(t, db.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
	}, nil)
	before := checker.Stats()
	require.NoError(t, hdb.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
	require.True(t, injected)
	require.Equal(t, len(names), ops, "the three series' minute blocks in one transaction")
	conflicted := checker.Stats().Queries - before.Queries
	// The failed transaction, then each series again by itself: its blocks and points read
	// again (each computes what the other process wrote, so writes nothing), beyond what a
	// Rollup that meets no conflict reads.
	before = checker.Stats()
	require.NoError(t, hdb.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
	clean := checker.Stats().Queries - before.Queries
	t.Logf("queries of the Rollup that met the conflict: %d; of one that met none: %d", conflicted, clean)
	require.GreaterOrEqual(t, conflicted, clean+int64(2*len(names)), "each series rolled up again")
	all["s1b"] = append(all["s1b"], late)
	for _, s := range names {
		windows, _ := columnarWindows(t, tierEntities(t, svc, db, time.Minute, itest.RollupBase, itest.RollupBase.Add(time.Hour), s), time.Minute)
		requireColumnar(t, windows, all[s], itest.RollupBase, itest.RollupBase.Add(2*time.Hour), time.Minute, s+"'s minutes")
		for _, step := range []time.Duration{time.Minute, time.Hour} {
			got := itest.CollectWindows(t, hdb.Aggregate(ctx, []string{s}, itest.RollupBase, itest.RollupBase.Add(2*time.Hour), step, nil))
			itest.RequireWindows(t, itest.ModelWindows(all[s], itest.RollupBase, itest.RollupBase.Add(2*time.Hour), step), got, s+" at "+step.String())
		}
	}
}
