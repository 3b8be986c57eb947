package tsdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

// tableReads counts the queries of one table's entities at the transport (n), and of
// the tables whose names begin with second if set (nSecond).
type tableReads struct {
	next          policy.Transporter
	table, second string
	n, nSecond    atomic.Int64
	all           atomic.Int64 // every request, of any table
	// before, if set, is called before a query of table is sent.
	before func(*http.Request)
	// seen traces the queries of table n counted since Trace was last called: what a
	// failed count prints (a retry of one query, or two of the plan).
	mu   sync.Mutex
	seen []string
}

// Trace returns the queries of table counted since its last call (their query strings
// and outcomes), and forgets them.
func (c *tableReads) Trace() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := strings.Join(c.seen, "\n")
	c.seen = nil
	return s
}

func (c *tableReads) Do(req *http.Request) (*http.Response, error) {
	c.all.Add(1)
	if req.Method == http.MethodGet {
		switch {
		case strings.Contains(req.URL.Path, "/"+c.table+"()"):
			c.n.Add(1)
			if c.before != nil {
				c.before(req)
			}
			resp, err := c.next.Do(req)
			outcome := fmt.Sprint(err)
			if err == nil {
				outcome = resp.Status
			}
			c.mu.Lock()
			c.seen = append(c.seen, fmt.Sprintf("%s -> %s", req.URL.RawQuery, outcome))
			c.mu.Unlock()
			return resp, err
		case c.second != "" && strings.Contains(req.URL.Path, "/"+c.second) && strings.HasSuffix(req.URL.Path, "()"):
			c.nSecond.Add(1)
		}
	}
	return c.next.Do(req)
}

// A Select of series of floats and of native histograms, all staged, reads the staging
// table once for both kinds, and returns every sample exactly, floats and histograms
// merged by time.
func TestSelectMixedReadsStagingOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := querierBase.Add(time.Hour)
	name := fmt.Sprintf("mix%d", rand.Uint32())
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	staging := &tableReads{next: checker, table: name + "w"}
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: staging}})
	require.NoError(t, err)
	db, err := Open(ctx, svc, name, &Options{Tiers: []Tier{}, Now: func() time.Time { return now },
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	require.NoError(t, err)
	t.Cleanup(func() {
		p := db.names.PeriodOf(now)
		for _, table := range []string{name + "m", name + "w", db.names.RawTable(p), db.names.IndexTable(p), db.names.HistTable(p),
			db.names.RawTable(p + uint64(DefaultRawPeriod/time.Second)), db.names.IndexTable(p + uint64(DefaultRawPeriod/time.Second))} {
			_, _ = svc.DeleteTable(context.Background(), table, nil)
		}
	})

	var floats []SeriesPoints
	var hists []SeriesHistograms
	want := map[string][]string{} // by label i: the samples as "t:f" or "t:hN"
	for i := range 6 {
		key, err := db.SeriesOf(ctx, Labels{{Name: "__name__", Value: "mixed"}, {Name: "i", Value: fmt.Sprint(i)}})
		require.NoError(t, err)
		var pts []tablets.Point
		for j := range 4 {
			at := querierBase.Add(time.Duration(j) * time.Minute)
			pts = append(pts, tablets.Point{Time: at, Value: float64(10*i + j)})
			want[fmt.Sprint(i)] = append(want[fmt.Sprint(i)], fmt.Sprintf("%d:%v", at.UnixMilli(), float64(10*i+j)))
		}
		floats = append(floats, SeriesPoints{Series: key, Points: pts})
		if i%2 == 0 { // every other series has histograms too, between its floats
			var hs []HistogramPoint
			for j := range 3 {
				at := querierBase.Add(time.Duration(j)*time.Minute + 30*time.Second)
				n := uint64(100*i + j + 1)
				hs = append(hs, HistogramPoint{Time: at, H: &Histogram{Count: n, Sum: float64(n), ZeroThreshold: 0.001, ZeroCount: n}})
			}
			hists = append(hists, SeriesHistograms{Series: key, Histograms: hs})
			var merged []string
			for j, f := range want[fmt.Sprint(i)] {
				merged = append(merged, f)
				if j < 3 {
					merged = append(merged, fmt.Sprintf("%d:h%d", querierBase.Add(time.Duration(j)*time.Minute+30*time.Second).UnixMilli(), 100*i+j+1))
				}
			}
			want[fmt.Sprint(i)] = merged
		}
	}
	require.NoError(t, db.WriteMany(ctx, floats))
	require.NoError(t, db.WriteSamples(ctx, nil, hists))

	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	staging.n.Store(0)
	got := map[string][]string{}
	for s, err := range q.Querier(querierBase, now).Select(ctx, nil, Matcher{Type: MatchEqual, Name: "__name__", Value: "mixed"}) {
		require.NoError(t, err)
		it := s.Iterator()
		for it.Next() {
			x := it.At()
			if x.IsHistogram() {
				got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:h%d", x.T, x.H.Count))
			} else {
				got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:%v", x.T, x.F))
			}
		}
		require.NoError(t, it.Err())
	}
	require.Equal(t, want, got)
	require.EqualValues(t, 1, staging.n.Load(), "one read of the staging table for both kinds")
	st := q.Stats()
	require.EqualValues(t, 6, st.Series)
	require.EqualValues(t, 9, st.Histograms)
	require.EqualValues(t, 33, st.Samples)
}
