package tsdb

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
)

// The index checks the series key of each entry a Select reads with the raw layout's
// rules, once an entry: a Select of samples that matches an entry naming a key the layout
// refuses (an index table is network input; Azure takes the key as a RowKey) fails with
// tablets.ErrInvalidSeries, naming the entry, before the raw table is read. Selects of the
// good entries alone answer, and the listings of series and label values still list the
// entry, with and without an index cache.
func TestSelectChecksIndexEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := querierBase.Add(time.Hour)
	k := newKeyRangeDB(t, "ic", now, now)
	k.reads.table = k.names.RawTable(k.names.PeriodOf(now))
	good, err := k.SeriesOf(ctx, LabelsFromStrings(MetricName, "up", "job", "good"))
	require.NoError(t, err)
	require.NoError(t, k.Write(ctx, good, tablets.Point{Time: now.Add(-time.Minute), Value: 1}))
	_, err = k.Fold(ctx)
	require.NoError(t, err)

	// Another writer's entry, with a key too long for the raw layout once it adds its
	// partition's part, recorded in the index log as Register records.
	bad := strings.Repeat("k", 510) // 1,020 bytes of UTF-16, as Azure counts a key
	ls := labels.FromStrings(MetricName, "up", "job", "bad")
	body := entity.AppendEnd(entity.AppendBinary(entity.AppendKeys(nil, catalog.MetricPartition("up"), bad), catalog.LabelsProperty, labels.Append(nil, ls)))
	_, err = k.svc.NewClient(k.names.IndexTable(k.names.PeriodOf(now))).AddEntity(ctx, body, nil)
	require.NoError(t, err)
	require.NoError(t, k.index.Log.Record(ctx, nil))

	for _, cached := range []bool{false, true} {
		o := *k.opts
		if cached {
			o.IndexCache = NewIndexCache(1 << 20)
		}
		db, err := Open(ctx, k.svc, k.name, &o)
		require.NoError(t, err)
		q, err := db.Queryable(nil)
		require.NoError(t, err)
		selectUp := func(job string) ([]string, error) {
			var got []string
			for s, err := range q.Querier(now.Add(-time.Hour), now).Select(ctx, nil, Matcher{Type: MatchEqual, Name: MetricName, Value: "up"},
				Matcher{Type: MatchRegexp, Name: "job", Value: job}) {
				if err != nil {
					return got, err
				}
				got = append(got, s.Series)
			}
			return got, nil
		}
		k.reads.n.Store(0)
		got, err := selectUp(".*")
		if !errors.Is(err, tablets.ErrInvalidSeries) || !strings.Contains(err.Error(), "index entry") {
			t.Fatalf("cached %v: Select over the bad entry: %q, %v; want an error of the index entry wrapping ErrInvalidSeries", cached, got, err)
		}
		if n := k.reads.n.Load(); n != 0 {
			t.Errorf("cached %v: %d queries of the raw table for a Select that failed on its index entry", cached, n)
		}
		got, err = selectUp("good")
		require.NoError(t, err, "cached %v", cached)
		require.Equal(t, []string{good}, got)
		values, err := db.LabelValues(ctx, "job", now.Add(-time.Hour), now, Matcher{Type: MatchEqual, Name: MetricName, Value: "up"})
		require.NoError(t, err)
		require.Equal(t, []string{"bad", "good"}, values)
		var listed []string
		for s, err := range q.Querier(now.Add(-time.Hour), now).Select(ctx, &SelectHints{Func: "series"}, Matcher{Type: MatchEqual, Name: MetricName, Value: "up"}) {
			require.NoError(t, err)
			listed = append(listed, s.Labels.Get("job"))
		}
		require.ElementsMatch(t, []string{"bad", "good"}, listed, "the series API lists it")
	}
}
