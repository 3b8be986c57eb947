package tsdb

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

func advancedLayout(c *aztables.Client) (tablets.Store, error) { return advanced.New(c, nil) }

// formatRecorded reads whether database name's catalog records its raw format.
func formatRecorded(t *testing.T, svc *aztables.ServiceClient, name string) bool {
	t.Helper()
	_, err := svc.NewClient(name+"m").GetEntity(context.Background(), "format", "raw", nil)
	if re := (*azcore.ResponseError)(nil); errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return false
	}
	require.NoError(t, err)
	return true
}

// A new database stores its raw points chunked at a millisecond and records it; small
// writes are staged. A later handle opened without a layout uses the record, and one
// opened with another layout is refused.
func TestTSDBNewDatabaseRecordsItsFormat(t *testing.T) {
	ctx := context.Background()
	clk := clock.New(time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC))
	opts := &tsdb.Options{RawPeriod: 24 * time.Hour, Tiers: []tsdb.Tier{}, Now: clk.Now}
	db, svc, _ := dbtest.NewDB(t, opts)
	require.True(t, formatRecorded(t, svc, db.Name()))
	s, err := db.Options().Layout(svc.NewClient(db.Name() + "r0"))
	require.NoError(t, err)
	c, ok := s.(*chunked.Store)
	require.True(t, ok, "the raw layout of a new database is %T", s)
	require.Equal(t, time.Millisecond, c.Options().Resolution)

	at := clk.Now().Add(-time.Minute)
	require.NoError(t, db.Write(ctx, "cpu", tablets.Point{Time: at.Add(123 * time.Millisecond), Value: 1.5}))
	require.Equal(t, 1, countEntities(t, svc, db.Name()+"w"), "a small write is staged")

	again, err := tsdb.Open(ctx, svc, db.Name(), &tsdb.Options{RawPeriod: 24 * time.Hour, Tiers: []tsdb.Tier{}, Now: clk.Now})
	require.NoError(t, err)
	pts, err := again.Latest(ctx, "cpu", 1)
	require.NoError(t, err)
	require.Equal(t, []tablets.Point{{Time: at.Add(123 * time.Millisecond), Value: 1.5}}, pts)

	_, err = tsdb.Open(ctx, svc, db.Name(), &tsdb.Options{RawPeriod: 24 * time.Hour, Layout: advancedLayout})
	require.ErrorIs(t, err, tablets.ErrInvalidOptions, "a recorded database opened with another layout")
	// The recorded format at another concurrency is the same format.
	_, err = tsdb.Open(ctx, svc, db.Name(), &tsdb.Options{RawPeriod: 24 * time.Hour,
		Layout: func(c *aztables.Client) (tablets.Store, error) {
			return chunked.New(c, &chunked.Options{Concurrency: 2})
		}})
	require.NoError(t, err)

	// Two processes opening one new database at once agree.
	name := db.Name() + "x"
	dbtest.DropOnCleanup(t, name)
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := tsdb.Open(ctx, svc, name, nil); errs <- err }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.True(t, formatRecorded(t, svc, name))

	// A record of a later version: refused, with what it is.
	other := db.Name() + "y"
	dbtest.DropOnCleanup(t, other)
	require.NoError(t, tablets.EnsureTable(ctx, svc.NewClient(other+"m")))
	_, err = svc.NewClient(other+"m").AddEntity(ctx, []byte(`{"PartitionKey":"format","RowKey":"raw","V":2,"V@odata.type":"Edm.Double","L":"columnar/1us"}`), nil)
	require.NoError(t, err)
	_, err = tsdb.Open(ctx, svc, other, nil)
	require.ErrorContains(t, err, `raw format is version 2 ("columnar/1us")`)
}

// A database written before tsdb recorded its raw format (the advanced layout, the default
// then: opened here with it named, which records nothing, exactly as that code ran) keeps
// working when opened without a layout: read, written, rolled up, aggregated and retained,
// its raw tables still of the advanced layout, and no record written.
func TestTSDBDatabaseOfTheAdvancedLayoutKeepsWorking(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC)
	clk := clock.New(base.Add(50 * time.Hour))
	opts := func(layout func(*aztables.Client) (tablets.Store, error), retention time.Duration) *tsdb.Options {
		return &tsdb.Options{RawPeriod: 24 * time.Hour, RawRetention: retention, Tiers: []tsdb.Tier{{Step: time.Hour}}, Layout: layout, Now: clk.Now}
	}
	old, svc, _ := dbtest.NewDB(t, opts(advancedLayout, 0))
	require.False(t, formatRecorded(t, svc, old.Name()), "a named layout other than the format records nothing")
	want := map[string][]tablets.Point{}
	write := func(db *tsdb.DB, from time.Time, hours int, v float64) {
		for _, s := range []string{"cpu", "mem"} {
			var pts []tablets.Point
			for m := range hours * 60 {
				pts = append(pts, tablets.Point{Time: from.Add(time.Duration(m) * time.Minute), Value: v + float64(m)})
			}
			require.NoError(t, db.Write(ctx, s, pts...))
			want[s] = append(want[s], pts...)
		}
	}
	write(old, base, 48, 0) // two days: two raw tables
	require.NoError(t, old.Rollup(ctx, base, base.Add(24*time.Hour)))

	db, err := tsdb.Open(ctx, svc, old.Name(), opts(nil, 0))
	require.NoError(t, err)
	s, err := db.Options().Layout(svc.NewClient(old.Name() + "r0"))
	require.NoError(t, err)
	require.IsType(t, &advanced.Store{}, s, "a database made before the record keeps its layout")
	require.False(t, formatRecorded(t, svc, old.Name()))

	// Read what the old handle wrote; write more (a new period's table too); read it all.
	write(db, base.Add(48*time.Hour), 1, 1e6)
	for _, series := range []string{"cpu", "mem"} {
		var got []tablets.Point
		for p, err := range db.Query(ctx, series, base, base.Add(72*time.Hour)) {
			require.NoError(t, err)
			got = append(got, p)
		}
		require.Equal(t, want[series], got, series)
	}
	// The new period's raw table is of the advanced layout too: the old handle reads it.
	pts, err := old.Latest(ctx, "cpu", 1)
	require.NoError(t, err)
	require.Equal(t, want["cpu"][len(want["cpu"])-1:], pts)

	// Rolled up, aggregated, retained.
	require.NoError(t, db.Rollup(ctx, base, base.Add(48*time.Hour)))
	retaining, err := tsdb.Open(ctx, svc, old.Name(), opts(nil, 36*time.Hour))
	require.NoError(t, err)
	dropped, err := retaining.Retain(ctx, clk.Now().Add(24*time.Hour)) // cutoff: day 1 at 14:00
	require.NoError(t, err)
	require.Contains(t, dropped, old.Name()+"r"+itoa(base.Unix()), "the first day's raw table")
	windows := 0
	for w, err := range retaining.Aggregate(ctx, []string{"cpu"}, base, base.Add(48*time.Hour), time.Hour, nil) {
		require.NoError(t, err)
		h := int(w.Start.Sub(base) / time.Hour)
		require.Equal(t, uint64(60), w.Count, "window %d", h)
		require.Equal(t, float64(h*60+59), w.Max, "window %d", h)
		windows++
	}
	require.Equal(t, 48, windows)
	require.False(t, formatRecorded(t, svc, old.Name()), "the legacy database still has no record")
}

// A database the server made before the record (chunked at a millisecond, named) records
// the format when opened with that layout; then it opens without one.
func TestTSDBChunkedDatabaseOfBeforeRecords(t *testing.T) {
	ctx := context.Background()
	db, svc, _ := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	require.True(t, formatRecorded(t, svc, db.Name()))
	again, err := tsdb.Open(ctx, svc, db.Name(), nil)
	require.NoError(t, err)
	s, err := again.Options().Layout(svc.NewClient(db.Name() + "r0"))
	require.NoError(t, err)
	require.IsType(t, &chunked.Store{}, s)
}
