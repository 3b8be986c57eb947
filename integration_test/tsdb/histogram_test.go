package tsdb

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/meter"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb"
)

// The tests here write histograms into the histogram tables directly (DirectWrites): staged
// histograms have theirs in histstage_test.go.

// histBase is a fixed time inside one hour-long period and one day partition.
var histBase = time.Date(2024, 5, 20, 10, 0, 0, 0, time.UTC)

// intHist is an integer histogram of schema 3 with count n spread over three buckets.
func intHist(n uint64) *tablets.Histogram {
	a := n / 2
	b := n / 4
	c := n - a - b
	return &tablets.Histogram{
		Schema: 3, ZeroThreshold: 1e-128, Count: n, Sum: float64(n) * 1.5,
		PositiveSpans:   []tablets.HistogramSpan{{Offset: 2, Length: 2}, {Offset: 1, Length: 1}},
		PositiveBuckets: []int64{int64(a), int64(b) - int64(a), int64(c) - int64(b)},
	}
}

// floatHist is a float histogram with a zero bucket and a negative side.
func floatHist(x float64) *tablets.FloatHistogram {
	return &tablets.FloatHistogram{
		CounterResetHint: tablets.GaugeType, Schema: -2, ZeroThreshold: 0.001, ZeroCount: 0.5,
		Count: 0.5 + x + 2*x, Sum: -x,
		PositiveSpans: []tablets.HistogramSpan{{Offset: -1, Length: 1}}, PositiveBuckets: []float64{x},
		NegativeSpans: []tablets.HistogramSpan{{Offset: 0, Length: 1}}, NegativeBuckets: []float64{2 * x},
	}
}

// customHist is a custom-bucket (NHCB) integer histogram.
func customHist(n uint64) *tablets.Histogram {
	return &tablets.Histogram{
		CounterResetHint: tablets.NotCounterReset, Schema: tablets.CustomBucketsSchema, Count: n, Sum: 0.25 * float64(n),
		PositiveSpans:   []tablets.HistogramSpan{{Offset: 0, Length: 3}},
		PositiveBuckets: []int64{int64(n), -int64(n), 0},
		CustomValues:    []float64{0.1, 0.5, 2.5},
	}
}

func hp(at time.Time, h *tablets.Histogram) tsdb.HistogramPoint {
	return tsdb.HistogramPoint{Time: at, H: h}
}

func fhp(at time.Time, h *tablets.FloatHistogram) tsdb.HistogramPoint {
	return tsdb.HistogramPoint{Time: at, FH: h}
}

func queryHist(t *testing.T, db *tsdb.DB, series string, from, to time.Time) []tsdb.HistogramPoint {
	t.Helper()
	return readHists(t, db, from, to, series)[series]
}

// readHists reads the histogram samples of series in [from, to) with a Querier's Read of
// histograms, by series, each oldest first.
func readHists(t *testing.T, db *tsdb.DB, from, to time.Time, series ...string) map[string][]tsdb.HistogramPoint {
	t.Helper()
	q, err := db.Queryable(nil)
	require.NoError(t, err)
	out := map[string][]tsdb.HistogramPoint{}
	for s, err := range q.Querier(from, to).Read(context.Background(), tsdb.HistogramSamples, series...) {
		require.NoError(t, err)
		for it := s.Iterator(); it.Next(); {
			x := it.At()
			require.True(t, x.IsHistogram(), "%s: a float at %d", s.Series, x.T)
			out[s.Series] = append(out[s.Series], tsdb.HistogramPoint{Time: time.UnixMilli(x.T).UTC(), H: x.H, FH: x.FH})
		}
	}
	return out
}

// requireSamples compares samples field for field, times as instants (NaN sums by bits).
func requireSamples(t *testing.T, want, got []tsdb.HistogramPoint) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, want[i].Time.Equal(got[i].Time), "sample %d at %v, want %v", i, got[i].Time, want[i].Time)
		w, g := want[i], got[i]
		w.Time, g.Time = time.Time{}, time.Time{}
		if w.H != nil && g.H != nil && math.IsNaN(w.H.Sum) {
			require.Equal(t, math.Float64bits(w.H.Sum), math.Float64bits(g.H.Sum), "sample %d", i)
			wh, gh := *w.H, *g.H
			wh.Sum, gh.Sum = 0, 0
			w.H, g.H = &wh, &gh
		}
		if w.FH != nil && g.FH != nil && math.IsNaN(w.FH.Sum) {
			require.Equal(t, math.Float64bits(w.FH.Sum), math.Float64bits(g.FH.Sum), "sample %d", i)
			wh, gh := *w.FH, *g.FH
			wh.Sum, gh.Sum = 0, 0
			w.FH, g.FH = &wh, &gh
		}
		require.Equal(t, w, g, "sample %d", i)
	}
}

// Integer, float, custom-bucket and stale samples come back exactly,
// oldest first, whatever order they were written in, and only those of the range.
func TestTSDBHistogramRoundTrip(t *testing.T) {
	ctx := context.Background()
	db, _, checker := newDB(t, &tsdb.Options{RawPeriod: time.Hour, Tiers: []tsdb.Tier{}})
	var want []tsdb.HistogramPoint
	for i := range 40 {
		at := histBase.Add(time.Duration(i) * 15 * time.Second)
		switch i % 3 {
		case 0:
			want = append(want, hp(at, intHist(uint64(10*i+1))))
		case 1:
			want = append(want, fhp(at, floatHist(float64(i)+0.25)))
		default:
			want = append(want, hp(at, customHist(uint64(i))))
		}
	}
	// Staleness markers: Prometheus' stale NaN as the sum, integer and float.
	stale := intHist(0)
	stale.Sum = math.Float64frombits(0x7ff0000000000002)
	fstale := floatHist(0)
	fstale.Sum = math.Float64frombits(0x7ff0000000000002)
	want = append(want, hp(histBase.Add(11*time.Minute), stale), fhp(histBase.Add(12*time.Minute), fstale))
	written := slices.Clone(want)
	slices.Reverse(written) // any order
	checker.Reset()
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "lat", Histograms: written}}))
	// Tables of the period and the next (hist, index), the index entry, one transaction.
	require.Equal(t, int64(2), checker.Stats().Batches, "the index entry's transaction, then one of samples")

	requireSamples(t, want, queryHist(t, db, "lat", histBase, histBase.Add(time.Hour)))
	// A range inside: only its samples; the millisecond bounds exact.
	got := queryHist(t, db, "lat", want[3].Time, want[7].Time)
	requireSamples(t, want[3:7], got)
	got = queryHist(t, db, "lat", want[3].Time.Add(time.Millisecond), want[7].Time.Add(time.Millisecond))
	requireSamples(t, want[4:8], got)
	// No float points.
	for _, err := range db.Query(ctx, "lat", histBase, histBase.Add(time.Hour)) {
		require.NoError(t, err)
		t.Fatal("a histogram sample read as a float point")
	}
}

// A series may switch between float points and histogram samples: each is read by its own
// call, and Select lists the series once, flagged for the periods holding histograms.
func TestTSDBHistogramSwitchAndSelect(t *testing.T) {
	ctx := context.Background()
	db, svc, _ := newDB(t, &tsdb.Options{RawPeriod: time.Hour, Tiers: []tsdb.Tier{}})
	key, err := db.SeriesOf(ctx, tsdb.LabelsFromStrings("__name__", "rpc_latency", "job", "api"))
	require.NoError(t, err)
	floatsOnly, err := db.SeriesOf(ctx, tsdb.LabelsFromStrings("__name__", "rpc_latency", "job", "db"))
	require.NoError(t, err)

	// Hour 0: floats then histograms; hour 1: histograms then floats; hour 2: floats only.
	floats := []tablets.Point{{Time: histBase, Value: 1}, {Time: histBase.Add(90 * time.Minute), Value: 2}, {Time: histBase.Add(150 * time.Minute), Value: 3}}
	hists := []tsdb.HistogramPoint{hp(histBase.Add(time.Minute), intHist(5)), hp(histBase.Add(70*time.Minute), intHist(9))}
	require.NoError(t, db.WriteMany(ctx, []tsdb.SeriesPoints{{Series: key, Points: floats[:1]}, {Series: floatsOnly, Points: floats}}))
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: key, Histograms: hists}}))
	require.NoError(t, db.WriteMany(ctx, []tsdb.SeriesPoints{{Series: key, Points: floats[1:]}}))

	// A second handle (no cache) registering floats again in hour 1 keeps the flag.
	other, err := tsdb.Open(ctx, svc, db.Name(), &tsdb.Options{RawPeriod: time.Hour, Tiers: []tsdb.Tier{}})
	require.NoError(t, err)
	require.NoError(t, other.Write(ctx, key, tablets.Point{Time: histBase.Add(80 * time.Minute), Value: 2.5}))

	var pts []tablets.Point
	for p, err := range db.Query(ctx, key, histBase, histBase.Add(3*time.Hour)) {
		require.NoError(t, err)
		pts = append(pts, p)
	}
	require.Len(t, pts, 4)
	requireSamples(t, hists, queryHist(t, db, key, histBase, histBase.Add(3*time.Hour)))

	sel := func(from, to time.Time) map[string]bool {
		out := map[string]bool{}
		for s, err := range db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchEqual, Name: "__name__", Value: "rpc_latency"}) {
			require.NoError(t, err)
			out[s.Labels.Get("job")] = s.Histograms
		}
		return out
	}
	require.Equal(t, map[string]bool{"api": true, "db": false}, sel(histBase, histBase.Add(3*time.Hour)))
	require.Equal(t, map[string]bool{"api": true, "db": false}, sel(histBase.Add(time.Hour), histBase.Add(2*time.Hour)))
	require.Equal(t, map[string]bool{"api": false, "db": false}, sel(histBase.Add(2*time.Hour), histBase.Add(3*time.Hour)))
}

// The latest write of a millisecond wins, across calls and within one (the later argument).
func TestTSDBHistogramLastWriteWinsAndRetry(t *testing.T) {
	ctx := context.Background()
	db, svc, checker := newDB(t, &tsdb.Options{DirectWrites: true, RawPeriod: time.Hour, Tiers: []tsdb.Tier{}})
	at := func(s int) time.Time { return histBase.Add(time.Duration(s) * time.Second) }
	first := []tsdb.HistogramPoint{hp(at(0), intHist(1)), hp(at(10), intHist(2)), hp(at(20), intHist(3))}
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "s", Histograms: first}}))
	require.Equal(t, 1, countEntities(t, svc, db.Name()+"h"+itoa(histBase.Truncate(time.Hour).Unix())))

	// Rewrite 10 s (a float histogram now), twice within a call: the later argument wins;
	// and 20 s in two entries of the series: the later entry wins.
	second := []tsdb.HistogramPoint{fhp(at(10), floatHist(7)), fhp(at(10), floatHist(8)), hp(at(30), intHist(4))}
	checker.Reset()
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "s", Histograms: second},
		{Series: "s", Histograms: []tsdb.HistogramPoint{fhp(at(20), floatHist(5))}}, {Series: "s", Histograms: []tsdb.HistogramPoint{fhp(at(20), floatHist(6))}}}))
	require.Equal(t, int64(1), checker.Stats().Batches, "one transaction, the index entry cached")
	want := []tsdb.HistogramPoint{first[0], second[1], fhp(at(20), floatHist(6)), second[2]}
	requireSamples(t, want, queryHist(t, db, "s", histBase, histBase.Add(time.Hour)))
}

// countEntities counts a table's entities with a fresh client.
// The staging table's logs' entities (partitions "!changes" and "~folds") hold no samples: they are not counted.
func countEntities(t *testing.T, svc *aztables.ServiceClient, table string) int {
	t.Helper()
	n := 0
	notLog := "PartitionKey ne '!changes' and PartitionKey ne '~folds'"
	for p := svc.NewClient(table).NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &notLog}); p.More(); {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		n += len(page.Entities)
	}
	return n
}

// Bad samples are rejected with the good ones of the same series stored; input that is all
// bad sends no request.
func TestTSDBHistogramRejects(t *testing.T) {
	ctx := context.Background()
	now := histBase.Add(30 * time.Minute)
	db, _, checker := newDB(t, &tsdb.Options{RawPeriod: time.Hour, RawRetention: 48 * time.Hour, Tiers: []tsdb.Tier{}, Now: func() time.Time { return now }})

	badSpans := intHist(10)
	badSpans.PositiveSpans = []tablets.HistogramSpan{{Offset: 0, Length: 1}}
	badSchema := intHist(10)
	badSchema.Schema = 9
	unsorted := customHist(3)
	unsorted.CustomValues = []float64{0.5, 0.1, 2.5}
	negative := &tablets.Histogram{Schema: 0, Count: 0, PositiveSpans: []tablets.HistogramSpan{{Length: 2}}, PositiveBuckets: []int64{1, -2}}
	nanCount := floatHist(1)
	nanCount.Count = math.NaN()
	bad := []tsdb.HistogramPoint{hp(histBase, badSpans), hp(histBase.Add(time.Second), badSchema), hp(histBase.Add(2*time.Second), unsorted),
		hp(histBase.Add(3*time.Second), negative), fhp(histBase.Add(4*time.Second), nanCount), {Time: histBase.Add(5 * time.Second)}}
	badTime := hp(time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC), intHist(1))
	expired := hp(now.Add(-49*time.Hour), intHist(1))

	// All bad: no request at all.
	checker.Reset()
	err := db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{
		{Series: "a", Histograms: bad}, {Series: "bad/name", Histograms: []tsdb.HistogramPoint{hp(histBase, intHist(1))}},
		{Series: "b", Histograms: []tsdb.HistogramPoint{badTime, expired}},
	})
	require.Error(t, err)
	require.Equal(t, int64(0), checker.Stats().Requests)
	type reject struct {
		series string
		cause  error
		n      int
	}
	var got []reject
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var we *tablets.WriteError
		require.ErrorAs(t, e, &we)
		require.Equal(t, -1, we.Index)
		require.Empty(t, we.Failed)
		var cause error
		for _, s := range []error{tablets.ErrInvalidHistogram, tablets.ErrInvalidSeries, tablets.ErrInvalidTime, tsdb.ErrExpired} {
			if errors.Is(we, s) {
				require.Nil(t, cause, "two sentinels in %v", we)
				cause = s
			}
		}
		got = append(got, reject{we.Series, cause, len(we.FailedHistograms)})
	}
	require.Equal(t, []reject{{"a", tablets.ErrInvalidHistogram, len(bad)}, {"bad/name", tablets.ErrInvalidSeries, 1},
		{"b", tablets.ErrInvalidTime, 1}, {"b", tsdb.ErrExpired, 1}}, got)

	// Mixed: the good samples are stored, the bad ones listed exactly.
	good := []tsdb.HistogramPoint{hp(histBase.Add(time.Minute), intHist(4)), hp(histBase.Add(2*time.Minute), intHist(6))}
	mixed := []tsdb.HistogramPoint{good[0], bad[1], good[1], bad[4]}
	err = db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "a", Histograms: mixed}})
	var we *tablets.WriteError
	require.ErrorAs(t, err, &we)
	require.ErrorIs(t, err, tablets.ErrInvalidHistogram)
	require.Equal(t, []tsdb.HistogramPoint{bad[1], bad[4]}, we.FailedHistograms)
	requireSamples(t, good, queryHist(t, db, "a", histBase, histBase.Add(time.Hour)))
}

// A Querier's Read of histograms packs many series into each request (filters of at most 15
// comparisons, which the Checker enforces) and yields each series' samples oldest first.
func TestTSDBHistogramQueryManyPacks(t *testing.T) {
	ctx := context.Background()
	db, _, checker := newDB(t, &tsdb.Options{DirectWrites: true, RawPeriod: time.Hour, Tiers: []tsdb.Tier{}})
	const n = 20
	var batch []tsdb.SeriesHistograms
	want := map[string][]tsdb.HistogramPoint{}
	var names []string
	for i := range n {
		name := fmt.Sprintf("s%02d", i)
		names = append(names, name)
		for j := range 3 {
			want[name] = append(want[name], hp(histBase.Add(time.Duration(j*60+i)*time.Second), intHist(uint64(i+j))))
		}
		batch = append(batch, tsdb.SeriesHistograms{Series: name, Histograms: want[name]})
	}
	require.NoError(t, db.WriteSamples(ctx, nil, batch))

	from, to := histBase.Add(time.Second), histBase.Add(10*time.Minute) // inside one partition
	checker.Reset()
	got := readHists(t, db, from, to, append(names, names[0])...)
	// Inside one partition the series share the range's comparisons (L and RowKey: 2), each
	// then costs its PartitionKey: 13 series a filter, 2 requests for 20 series; and one of
	// the staging table.
	require.Equal(t, int64(3), checker.Stats().Queries)
	for _, name := range names {
		w := want[name]
		if name == "s00" {
			w = w[1:] // its first sample is at histBase, before from
		}
		requireSamples(t, w, got[name])
	}
}

// histFault answers the batch requests whose body holds match: with a 503 ServerBusy
// without sending them (every time), or, with loseOnce, by sending the first one and losing
// its reply (a 500 OperationTimedOut: the SDK sends it again).
type histFault struct {
	next     policy.Transporter
	match    string
	loseOnce bool

	mu    sync.Mutex
	fired int
}

func (f *histFault) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "$batch") {
		body, err := meter.ReadBody(req)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(body, []byte(f.match)) {
			f.mu.Lock()
			f.fired++
			n := f.fired
			f.mu.Unlock()
			switch {
			case !f.loseOnce:
				return serviceReply(req, http.StatusServiceUnavailable, "ServerBusy"), nil
			case n == 1:
				resp, err := f.next.Do(req)
				if err != nil {
					return nil, err
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return serviceReply(req, http.StatusInternalServerError, "OperationTimedOut"), nil
			}
		}
	}
	return f.next.Do(req)
}

// serviceReply is an error reply shaped like the Table service's.
func serviceReply(req *http.Request, status int, code string) *http.Response {
	body := fmt.Sprintf(`{"odata.error":{"code":%q,"message":{"lang":"en-US","value":"injected"}}}`, code)
	h := http.Header{}
	h.Set("Content-Type", "application/json;odata=minimalmetadata;streaming=true;charset=utf-8")
	h.Set("X-Ms-Error-Code", code)
	return &http.Response{Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}
}

// reopenWith opens database name again, its requests through wrap(the limit Checker).
func reopenWith(t *testing.T, name string, opts *tsdb.Options, wrap func(policy.Transporter) policy.Transporter) *tsdb.DB {
	srv := azurite.Shared(t)
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	svc, err := srv.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: wrap(checker), Retry: azurite.TestRetryOptions()}})
	require.NoError(t, err)
	db, err := tsdb.Open(context.Background(), svc, name, opts)
	require.NoError(t, err)
	return db
}

// A transaction whose reply is lost is sent again and lands on the same entity: one chunk,
// no error.
func TestTSDBHistogramRetriedWriteIdempotent(t *testing.T) {
	ctx := context.Background()
	opts := &tsdb.Options{DirectWrites: true, RawPeriod: time.Hour, Tiers: []tsdb.Tier{}}
	db, svc, _ := newDB(t, opts)
	fault := &histFault{match: `"PartitionKey":"r|`, loseOnce: true}
	faulty := reopenWith(t, db.Name(), opts, func(next policy.Transporter) policy.Transporter { fault.next = next; return fault })
	want := []tsdb.HistogramPoint{hp(histBase, intHist(3)), fhp(histBase.Add(time.Second), floatHist(2))}
	require.NoError(t, faulty.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "r", Histograms: want}}))
	require.Equal(t, 2, fault.fired, "the transaction was sent twice")
	require.Equal(t, 1, countEntities(t, svc, db.Name()+"h"+itoa(histBase.Truncate(time.Hour).Unix())))
	requireSamples(t, want, queryHist(t, db, "r", histBase, histBase.Add(time.Hour)))
}

// A failed transaction's samples, and only those, are listed, with the service's answer; the
// other transaction's samples are stored.
func TestTSDBHistogramFailureListsUnstored(t *testing.T) {
	ctx := context.Background()
	opts := &tsdb.Options{DirectWrites: true, RawPeriod: 7 * 24 * time.Hour, Tiers: []tsdb.Tier{}}
	db, _, _ := newDB(t, opts)
	day1 := []tsdb.HistogramPoint{hp(histBase, intHist(1)), hp(histBase.Add(time.Hour), intHist(2))}
	day2 := []tsdb.HistogramPoint{hp(histBase.Add(24*time.Hour), intHist(3)), hp(histBase.Add(25*time.Hour), intHist(4))}
	require.Equal(t, periodOf(db, day1[0].Time), periodOf(db, day2[1].Time), "one table, two partitions")
	day2Key := fmt.Sprintf(`"PartitionKey":"f|%015d"`, histBase.Add(24*time.Hour).Truncate(24*time.Hour).UnixMilli())
	fault := &histFault{match: day2Key}
	faulty := reopenWith(t, db.Name(), opts, func(next policy.Transporter) policy.Transporter { fault.next = next; return fault })

	err := faulty.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "f", Histograms: []tsdb.HistogramPoint{day2[0], day1[0], day2[1], day1[1]}}})
	var we *tablets.WriteError
	require.ErrorAs(t, err, &we)
	require.Equal(t, "f", we.Series)
	require.Equal(t, []tsdb.HistogramPoint{day2[0], day2[1]}, we.FailedHistograms)
	require.Empty(t, we.Failed)
	require.Equal(t, http.StatusServiceUnavailable, we.Status)
	require.Equal(t, "ServerBusy", we.Code)
	require.ErrorIs(t, err, tablets.ErrThrottled)
	require.Greater(t, fault.fired, 1, "retried by the SDK")
	requireSamples(t, day1, queryHist(t, db, "f", histBase, histBase.Add(48*time.Hour)))
}

// Delete removes the samples of its range: chunks inside deleted, chunks it cuts rewritten
// without them; samples outside, and other series, are kept.
func TestTSDBHistogramDelete(t *testing.T) {
	ctx := context.Background()
	db, svc, _ := newDB(t, &tsdb.Options{DirectWrites: true, RawPeriod: time.Hour, Tiers: []tsdb.Tier{}})
	at := func(m int) time.Time { return histBase.Add(time.Duration(m) * time.Minute) }
	var a, b []tsdb.HistogramPoint
	for m := range 30 {
		a = append(a, hp(at(m), intHist(uint64(m))))
		b = append(b, hp(at(30+m), intHist(uint64(100+m))))
	}
	inside := []tsdb.HistogramPoint{hp(at(25).Add(time.Second), intHist(7)), hp(at(35).Add(time.Second), intHist(8))}
	for _, w := range [][]tsdb.HistogramPoint{a, b, inside} {
		require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "d", Histograms: w}, {Series: "keep", Histograms: w}}))
	}
	require.NoError(t, db.Write(ctx, "d", tablets.Point{Time: at(30), Value: 1}))
	table := db.Name() + "h" + itoa(histBase.Truncate(time.Hour).Unix())
	require.Equal(t, 6, countEntities(t, svc, table))

	require.NoError(t, db.Delete(ctx, "d", at(20), at(40)))
	want := append(slices.Clone(a[:20]), b[10:]...)
	requireSamples(t, want, queryHist(t, db, "d", histBase, histBase.Add(time.Hour)))
	all := append(append(slices.Clone(a), b...), inside...)
	slices.SortFunc(all, func(x, y tsdb.HistogramPoint) int { return x.Time.Compare(y.Time) })
	requireSamples(t, all, queryHist(t, db, "keep", histBase, histBase.Add(time.Hour)))
	require.Equal(t, 5, countEntities(t, svc, table), "d: two chunks rewritten, one deleted")
	for _, err := range db.Query(ctx, "d", histBase, histBase.Add(time.Hour)) {
		require.NoError(t, err)
		t.Fatal("the float point in the range was not deleted")
	}
	// Everything: nothing left of d.
	require.NoError(t, db.Delete(ctx, "d", histBase, histBase.Add(time.Hour)))
	require.Empty(t, queryHist(t, db, "d", histBase, histBase.Add(time.Hour)))
	require.Equal(t, 3, countEntities(t, svc, table))
}

// Compact merges a partition's small chunks into one, keeping the latest write of each
// millisecond; a second Compact finds nothing to do and writes nothing.
func TestTSDBHistogramCompact(t *testing.T) {
	ctx := context.Background()
	db, svc, checker := newDB(t, &tsdb.Options{DirectWrites: true, RawPeriod: 7 * 24 * time.Hour, Tiers: []tsdb.Tier{}})
	var want []tsdb.HistogramPoint
	for i := range 30 { // a remote write every 5 s: a chunk each
		p := hp(histBase.Add(time.Duration(i)*5*time.Second), intHist(uint64(i*i)))
		want = append(want, p)
		require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "c", Histograms: []tsdb.HistogramPoint{p}}}))
	}
	// A rewrite of the 10th sample (a later chunk of the same millisecond) and a chunk in the
	// next day's partition.
	want[10] = fhp(want[10].Time, floatHist(3))
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "c", Histograms: want[10:11]}}))
	nextDay := hp(histBase.Add(24*time.Hour), intHist(5))
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "c", Histograms: []tsdb.HistogramPoint{nextDay}}}))
	table := db.Name() + "h" + itoa(periodOf(db, histBase))
	require.Equal(t, 32, countEntities(t, svc, table))
	before, billedBefore := storedBytes(t, svc, table)

	checker.Reset()
	require.NoError(t, db.Compact(ctx, histBase, histBase.Add(time.Hour)))
	require.Equal(t, int64(1), checker.Stats().Batches, "one transaction merges the partition")
	require.Equal(t, 2, countEntities(t, svc, table), "one chunk a partition")
	after, billedAfter := storedBytes(t, svc, table)
	t.Logf("32 chunks of 32 samples (one rewritten): %d bytes listed, %d billed; compacted into 2 chunks of 31: %d listed, %d billed (billed a sample: %d, then %d)",
		before, billedBefore, after, billedAfter, billedBefore/32, billedAfter/31)
	require.Less(t, billedAfter, billedBefore/4)
	requireSamples(t, append(want, nextDay), queryHist(t, db, "c", histBase, histBase.Add(48*time.Hour)))

	checker.Reset()
	require.NoError(t, db.Compact(ctx, histBase, histBase.Add(48*time.Hour)))
	require.Equal(t, int64(0), checker.Stats().Batches, "nothing to merge")
	// A range wider than the first's (another partition): the histogram table's and the raw
	// table's scans, each after its period's change log (a point read).
	require.Equal(t, int64(4), checker.Stats().Queries, "the scans only, and the logs")
}

// storedBytes sums a table's entities as listed (JSON bytes) and as Azure bills them: 4 +
// 2 x len(PartitionKey + RowKey) + for each property 8 + 2 x len(name) + its value (a string
// 4 + 2 x its length, bytes 4 + their length, a Double 8).
func storedBytes(t *testing.T, svc *aztables.ServiceClient, table string) (listed, billed int) {
	t.Helper()
	for p := svc.NewClient(table).NewListEntitiesPager(nil); p.More(); {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, raw := range page.Entities {
			listed += len(raw)
			var e map[string]any
			require.NoError(t, json.Unmarshal(raw, &e))
			billed += 4
			for name, v := range e {
				switch {
				case name == "PartitionKey" || name == "RowKey":
					billed += 2 * len(v.(string))
				case strings.HasPrefix(name, "odata.") || strings.Contains(name, "@odata.") || name == "Timestamp":
				case e[name+"@odata.type"] == "Edm.Binary":
					b, err := base64.StdEncoding.DecodeString(v.(string))
					require.NoError(t, err)
					billed += 8 + 2*len(name) + 4 + len(b)
				default:
					if str, ok := v.(string); ok {
						billed += 8 + 2*len(name) + 4 + 2*len(str)
					} else {
						billed += 8 + 2*len(name) + 8
					}
				}
			}
		}
	}
	return listed, billed
}

// Retain drops a period's histogram table with its raw table (a period of histograms only
// too), and a write into a dropped period is ErrExpired, sending nothing.
func TestTSDBHistogramRetain(t *testing.T) {
	ctx := context.Background()
	now := histBase.Add(5 * time.Hour)
	db, svc, checker := newDB(t, &tsdb.Options{RawPeriod: time.Hour, RawRetention: 4 * time.Hour, Tiers: []tsdb.Tier{}, Now: func() time.Time { return now }})
	old, histOnly, recent := histBase.Add(time.Hour+time.Minute), histBase.Add(2*time.Hour+time.Minute), histBase.Add(4*time.Hour)
	require.NoError(t, db.Write(ctx, "s", tablets.Point{Time: old, Value: 1}, tablets.Point{Time: recent, Value: 2}))
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "s", Histograms: []tsdb.HistogramPoint{
		hp(old, intHist(1)), hp(histOnly, intHist(2)), hp(recent, intHist(3))}}}))

	dropped, err := db.Retain(ctx, now.Add(2*time.Hour)) // cutoff: histBase + 3h
	require.NoError(t, err)
	name := func(kind string, at time.Time) string { return db.Name() + kind + itoa(at.Truncate(time.Hour).Unix()) }
	require.Subset(t, dropped, []string{name("r", old), name("h", old), name("h", histOnly)})
	require.NotContains(t, dropped, name("h", recent))
	requireSamples(t, []tsdb.HistogramPoint{hp(recent, intHist(3))}, queryHist(t, db, "s", histBase, histBase.Add(6*time.Hour)))

	// A fresh handle: the catalog says the histograms-only period is dropped.
	other, err := tsdb.Open(ctx, svc, db.Name(), &tsdb.Options{RawPeriod: time.Hour, RawRetention: 24 * time.Hour, Tiers: []tsdb.Tier{}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	err = other.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "s", Histograms: []tsdb.HistogramPoint{hp(histOnly.Add(time.Second), intHist(4))}}})
	require.ErrorIs(t, err, tsdb.ErrExpired)
	checker.Reset()
	err = db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "s", Histograms: []tsdb.HistogramPoint{hp(histOnly.Add(time.Second), intHist(4))}}})
	require.ErrorIs(t, err, tsdb.ErrExpired)
	require.Equal(t, int64(0), checker.Stats().Requests, "known dropped: no request")
}

// periodOf is the start (Unix seconds) of the raw period of db holding t.
func periodOf(db *tsdb.DB, t time.Time) int64 {
	p := int64(db.Options().RawPeriod / time.Second)
	return t.Unix() / p * p
}

// A late sample (older than the seal delay) flags its rollup tier blocks once stored, as a
// late point does; a recent one flags nothing.
func TestTSDBHistogramLateFlagsTiers(t *testing.T) {
	ctx := context.Background()
	now := histBase.Add(3 * time.Hour)
	db, svc, _ := newDB(t, &tsdb.Options{DirectWrites: true, RawPeriod: time.Hour, Now: func() time.Time { return now }})
	markers := func() (keys []string) {
		f := "PartitionKey eq 'dirty'"
		for q := svc.NewClient(db.Name() + "m").NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &f}); q.More(); {
			page, err := q.NextPage(ctx)
			require.NoError(t, err)
			for _, raw := range page.Entities {
				var e struct{ RowKey string }
				require.NoError(t, json.Unmarshal(raw, &e))
				keys = append(keys, e.RowKey)
			}
		}
		return keys
	}
	tierTables := func() (n int) {
		f := "TableName ge '" + db.Name() + "t' and TableName lt '" + db.Name() + "u'"
		for p := svc.NewListTablesPager(&aztables.ListTablesOptions{Filter: &f}); p.More(); {
			page, err := p.NextPage(ctx)
			require.NoError(t, err)
			n += len(page.Tables)
		}
		return n
	}
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "late", Histograms: []tsdb.HistogramPoint{hp(now.Add(-time.Minute), intHist(1))}}}))
	require.Empty(t, markers(), "a recent sample marks nothing")
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "late", Histograms: []tsdb.HistogramPoint{hp(histBase, intHist(1))}}}))
	day := histBase.Truncate(24 * time.Hour) // a slice of the default tiers: a day
	require.Equal(t, []string{fmt.Sprintf("%012d|late", day.Unix())}, markers(), "the late sample's slice marked dirty")
	require.Zero(t, tierTables(), "a Write makes no tier table")
}

// latencyHist is a 20-bucket latency histogram of schema 3 after n scrapes: each scrape adds
// about 100 observations, more in the middle buckets.
func latencyHist(n int) *tablets.Histogram {
	h := &tablets.Histogram{Schema: 3, ZeroThreshold: 1e-128, PositiveSpans: []tablets.HistogramSpan{{Offset: -40, Length: 20}}}
	var prev int64
	for b := range 20 {
		weight := int64(10 - absInt(b-10)/2)
		abs := int64(n)*weight/2 + int64((n*(b+3))%7)
		h.PositiveBuckets = append(h.PositiveBuckets, abs-prev)
		prev = abs
		h.Count += uint64(abs)
		h.Sum += float64(abs) * 0.01 * float64(b+1)
	}
	return h
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// An hour of remote writes every 5 s (a chunk each: 720 entities) compacts into one chunk:
// the requests and the bytes Azure bills, before and after.
func TestTSDBHistogramCompactHour(t *testing.T) {
	ctx := context.Background()
	db, svc, checker := newDB(t, &tsdb.Options{DirectWrites: true, Tiers: []tsdb.Tier{}})
	var want []tsdb.HistogramPoint
	checker.Reset()
	for i := range 720 {
		p := hp(histBase.Add(time.Duration(i)*5*time.Second), latencyHist(i))
		want = append(want, p)
		require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "latency", Histograms: []tsdb.HistogramPoint{p}}}))
	}
	writes := checker.Stats()
	require.Equal(t, int64(721), writes.Batches, "a transaction a write, and the index entry")
	t.Logf("720 writes: %d requests, %d bytes sent (%d a write), %d received", writes.Requests, writes.RequestBytes, writes.RequestBytes/720, writes.ResponseBytes)
	table := db.Name() + "h" + itoa(periodOf(db, histBase))
	require.Equal(t, 720, countEntities(t, svc, table))
	_, billedBefore := storedBytes(t, svc, table)

	checker.Reset()
	require.NoError(t, db.Compact(ctx, histBase, histBase.Add(time.Hour)))
	st := checker.Stats()
	require.Equal(t, 1, countEntities(t, svc, table))
	_, billedAfter := storedBytes(t, svc, table)
	t.Logf("720 samples, 20 buckets: %d bytes billed (%d a sample) in 720 chunks; compacted by %d queries and %d transactions into one chunk of %d bytes billed (%.1f a sample)",
		billedBefore, billedBefore/720, st.Queries, st.Batches, billedAfter, float64(billedAfter)/720)
	require.Less(t, billedAfter*10, billedBefore)
	requireSamples(t, want, queryHist(t, db, "latency", histBase, histBase.Add(time.Hour)))
}

// A packed read whose reply is cut by the service's 1,000-entity page re-reads the series it
// cut in a fresh query and still yields every sample once, oldest first.
func TestTSDBHistogramQueryManyPaged(t *testing.T) {
	ctx := context.Background()
	db, _, checker := newDB(t, &tsdb.Options{RawPeriod: time.Hour, Tiers: []tsdb.Tier{}})
	const chunks = 600 // a write each, of each series: 1,200 chunks in one partition
	for i := range chunks {
		at := histBase.Add(time.Duration(i) * 5 * time.Second)
		require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{
			{Series: "pa", Histograms: []tsdb.HistogramPoint{hp(at, intHist(uint64(i)))}},
			{Series: "pb", Histograms: []tsdb.HistogramPoint{hp(at.Add(time.Millisecond), intHist(uint64(2*i)))}},
		}))
	}
	checker.Reset()
	got := readHists(t, db, histBase, histBase.Add(time.Hour), "pb", "pa")
	// The packed query's two pages (600 of pa and 400 of pb, then 200 of pb) and pb again.
	require.Equal(t, int64(3), checker.Stats().Queries)
	for name, shift := range map[string]time.Duration{"pa": 0, "pb": time.Millisecond} {
		require.Len(t, got[name], chunks, name)
		for i, p := range got[name] {
			n := uint64(i)
			if name == "pb" {
				n *= 2
			}
			require.True(t, histBase.Add(time.Duration(i)*5*time.Second+shift).Equal(p.Time), "%s sample %d at %v", name, i, p.Time)
			require.Equal(t, n, p.H.Count, "%s sample %d", name, i)
		}
	}
}

// Series lists the series of a period that holds only histogram samples, in this handle and
// in a fresh one (which lists the tables: the range spans more periods than it probes).
func TestTSDBHistogramSeriesOfHistogramOnlyPeriods(t *testing.T) {
	ctx := context.Background()
	now := histBase.Add(6 * time.Hour)
	opts := &tsdb.Options{RawPeriod: time.Hour, Tiers: []tsdb.Tier{}, Now: func() time.Time { return now }}
	db, svc, _ := newDB(t, opts)
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "h", Histograms: []tsdb.HistogramPoint{
		hp(histBase.Add(time.Minute), intHist(1))}}}))
	require.NoError(t, db.Write(ctx, "f", tablets.Point{Time: histBase.Add(5 * time.Hour), Value: 1}))

	for name, handle := range map[string]func() *tsdb.DB{
		"writer": func() *tsdb.DB { return db },
		"fresh": func() *tsdb.DB {
			other, err := tsdb.Open(ctx, svc, db.Name(), opts)
			require.NoError(t, err)
			return other
		},
	} {
		got, err := handle().Series(ctx, histBase, histBase.Add(6*time.Hour))
		require.NoError(t, err, name)
		require.Equal(t, []string{"f", "h"}, got, name)
		got, err = handle().Series(ctx, histBase, histBase.Add(time.Hour))
		require.NoError(t, err, name)
		require.Equal(t, []string{"h"}, got, name)
	}
}
