package tsdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/tsdb"
)

// labelModel is what a database should answer: each label set's periods, matched with
// Prometheus' own labels.Matcher.
type labelModel struct {
	sets    map[string]tsdb.Labels // by series key
	periods map[string][]int       // hours (periods) with points, by series key
}

func (m labelModel) selectSets(from, to int, ms []tsdb.Matcher) []tsdb.SeriesInfo {
	var pms []*labels.Matcher
	for _, mm := range ms {
		pm, err := labels.NewMatcher(labels.MatchType(mm.Type), mm.Name, mm.Value)
		if err != nil {
			panic(err)
		}
		pms = append(pms, pm)
	}
	var out []tsdb.SeriesInfo
	for key, ls := range m.sets {
		if !slices.ContainsFunc(m.periods[key], func(h int) bool { return h >= from && h < to }) {
			continue
		}
		ok := true
		for _, pm := range pms {
			ok = ok && pm.Matches(ls.Get(pm.Name))
		}
		if ok {
			out = append(out, tsdb.SeriesInfo{Series: key, Labels: ls})
		}
	}
	slices.SortFunc(out, func(a, b tsdb.SeriesInfo) int { return labels.Compare(promLabels(a.Labels), promLabels(b.Labels)) })
	return out
}

func promLabels(ls tsdb.Labels) labels.Labels {
	b := labels.NewScratchBuilder(len(ls))
	for _, l := range ls {
		b.Add(l.Name, l.Value)
	}
	return b.Labels()
}

// labelValue holds the characters keys forbid, quotes, control characters, unicode, and
// now and then a long run.
func labelValue(rng *rand.Rand) string {
	alphabet := []string{"web", "-", "1", "2", "/", "\\", "#", "?", "'", "\"", "\x00", "\x1f", "\x7f", "\n", "é", "日本", "😀", "|", "~", " ", "."}
	var b strings.Builder
	for range 1 + rng.IntN(6) {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	if rng.IntN(40) == 0 {
		b.WriteString(strings.Repeat("long", 3000)) // 12 KB
	}
	return b.String()
}

// Select, LabelNames and LabelValues answer as Prometheus' matching over the label sets
// with points in the periods of the range, whatever the values hold.
func TestTSDBLabelsSelect(t *testing.T) {
	ctx := context.Background()
	db, _, checker := newDB(t, &tsdb.Options{RawPeriod: time.Hour})
	base := time.Date(2024, 5, 17, 10, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(13, 1))
	names := []string{"up", "http_requests_total", "a/b#c", "日本", "node_cpu"}
	model := labelModel{sets: map[string]tsdb.Labels{}, periods: map[string][]int{}}
	var sets []tsdb.Labels
	for i := range 80 {
		ls := tsdb.Labels{}
		if i%10 != 9 { // some sets have no metric name
			ls = append(ls, tsdb.Label{Name: tsdb.MetricName, Value: names[rng.IntN(len(names))]})
		}
		for _, l := range []string{"instance", "job", "zone", "le"} {
			if rng.IntN(3) > 0 {
				ls = append(ls, tsdb.Label{Name: l, Value: labelValue(rng)})
			}
		}
		ls = append(ls, tsdb.Label{Name: "id", Value: fmt.Sprint(i)}) // distinct sets
		sets = append(sets, ls)
	}
	keys, err := db.SeriesOfMany(ctx, sets[:40])
	require.NoError(t, err)
	for _, ls := range sets[40:] {
		k, err := db.SeriesOf(ctx, ls)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	var batch []tsdb.SeriesPoints
	for i, k := range keys {
		got := tsdb.LabelsFromStrings()
		for _, l := range sets[i] {
			got = append(got, l)
		}
		slices.SortFunc(got, func(a, b tsdb.Label) int { return strings.Compare(a.Name, b.Name) })
		model.sets[k] = got
		var pts []tablets.Point
		for h := range 4 {
			if rng.IntN(2) == 0 {
				model.periods[k] = append(model.periods[k], h)
				pts = append(pts, tablets.Point{Time: base.Add(time.Duration(h)*time.Hour + time.Minute), Value: float64(i)})
			}
		}
		if i%2 == 0 {
			require.NoError(t, db.Write(ctx, k, pts...))
		} else {
			batch = append(batch, tsdb.SeriesPoints{Series: k, Points: pts})
		}
	}
	require.NoError(t, db.WriteMany(ctx, batch))
	// A plain series (a key SeriesOf never gave) has no labels: no selector lists it.
	require.NoError(t, db.Write(ctx, "plain", tablets.Point{Time: base, Value: 1}))

	matcherSets := [][]tsdb.Matcher{
		{{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "up"}},
		{{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "a/b#c"}, {Type: tsdb.MatchEqual, Name: "zone", Value: ""}},
		{{Type: tsdb.MatchRegexp, Name: tsdb.MetricName, Value: "up|日本"}, {Type: tsdb.MatchNotEqual, Name: "job", Value: "web"}},
		{{Type: tsdb.MatchRegexp, Name: tsdb.MetricName, Value: "node_.*|up"}},
		{{Type: tsdb.MatchRegexp, Name: "instance", Value: "web.*"}},
		{{Type: tsdb.MatchRegexp, Name: "instance", Value: ".*[/\\\\#?].*"}, {Type: tsdb.MatchNotRegexp, Name: "job", Value: ".*日本.*"}},
		{{Type: tsdb.MatchRegexp, Name: "job", Value: "(?s).*\n.*"}},
		{{Type: tsdb.MatchRegexp, Name: "zone", Value: "\\p{Han}+|😀.*"}},
		{{Type: tsdb.MatchRegexp, Name: "id", Value: "1.|2"}, {Type: tsdb.MatchNotRegexp, Name: tsdb.MetricName, Value: "up"}},
		{{Type: tsdb.MatchNotEqual, Name: "id", Value: ""}, {Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: ""}},
		{{Type: tsdb.MatchRegexp, Name: tsdb.MetricName, Value: "up|"}, {Type: tsdb.MatchRegexp, Name: "id", Value: "[0-9]+"}},
		{{Type: tsdb.MatchRegexp, Name: "le", Value: ".+"}, {Type: tsdb.MatchRegexp, Name: "instance", Value: "^web.*$"}},
		{{Type: tsdb.MatchEqual, Name: "id", Value: "7"}},
		{{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "nothing"}},
	}
	ranges := [][2]int{{0, 4}, {0, 1}, {1, 3}, {3, 4}, {2, 2}, {5, 8}}
	for _, ms := range matcherSets {
		for _, r := range ranges {
			from, to := base.Add(time.Duration(r[0])*time.Hour), base.Add(time.Duration(r[1])*time.Hour)
			var got []tsdb.SeriesInfo
			for s, err := range db.Select(ctx, from, to, ms...) {
				require.NoError(t, err)
				got = append(got, s)
			}
			want := model.selectSets(r[0], r[1], ms)
			require.Equal(t, want, got, "Select %v over hours %v", ms, r)

			names, err := db.LabelNames(ctx, from, to, ms...)
			require.NoError(t, err)
			wantNames := map[string]bool{}
			wantZones := map[string]bool{}
			for _, s := range want {
				for _, l := range s.Labels {
					wantNames[l.Name] = true
				}
				if v := s.Labels.Get("zone"); v != "" {
					wantZones[v] = true
				}
			}
			require.Equal(t, sortedSet(wantNames), names, "LabelNames %v", ms)
			zones, err := db.LabelValues(ctx, "zone", from, to, ms...)
			require.NoError(t, err)
			require.Equal(t, sortedSet(wantZones), zones, "LabelValues zone %v", ms)
		}
	}
	// With no matchers: every label set's names and values.
	all := model.selectSets(0, 4, []tsdb.Matcher{{Type: tsdb.MatchRegexp, Name: "id", Value: ".+"}})
	wantMetrics := map[string]bool{}
	for _, s := range all {
		if v := s.Labels.Get(tsdb.MetricName); v != "" {
			wantMetrics[v] = true
		}
	}
	metrics, err := db.LabelValues(ctx, tsdb.MetricName, base, base.Add(4*time.Hour))
	require.NoError(t, err)
	require.Equal(t, sortedSet(wantMetrics), metrics)
	require.NotContains(t, metrics, "", "an absent label has no empty value")
	labelNames, err := db.LabelNames(ctx, base, base.Add(4*time.Hour))
	require.NoError(t, err)
	require.Contains(t, labelNames, tsdb.MetricName)

	// Bad selectors and label sets: ErrInvalidMatcher or ErrInvalidLabels before any request.
	before := checker.Stats().Requests
	for _, ms := range [][]tsdb.Matcher{
		nil,
		{{Type: tsdb.MatchEqual, Name: "job", Value: ""}},
		{{Type: tsdb.MatchRegexp, Name: "job", Value: ".*"}, {Type: tsdb.MatchNotEqual, Name: "x", Value: "y"}},
		{{Type: tsdb.MatchRegexp, Name: "job", Value: "(unclosed"}},
		{{Type: tsdb.MatchEqual, Name: "", Value: "x"}},
	} {
		for _, err := range db.Select(ctx, base, base.Add(time.Hour), ms...) {
			require.ErrorIs(t, err, tablets.ErrInvalidMatcher, "%v", ms)
		}
	}
	_, err = db.LabelValues(ctx, "job", base, base.Add(time.Hour), tsdb.Matcher{Type: tsdb.MatchRegexp, Name: "a", Value: "*"})
	require.ErrorIs(t, err, tablets.ErrInvalidMatcher)
	for _, bad := range []tsdb.Labels{{}, {{Name: "", Value: "x"}}, {{Name: "a", Value: "1"}, {Name: "a", Value: "2"}}, {{Name: "a", Value: "\xff"}}} {
		_, err := db.SeriesOf(ctx, bad)
		require.ErrorIs(t, err, tablets.ErrInvalidLabels, "%v", bad)
	}
	require.Equal(t, before, checker.Stats().Requests, "bad input sends nothing")
}

func sortedSet(m map[string]bool) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Nothing depends on one process's memory: a label set registered by one DB is indexed by
// another's Write, a series is listed only for its periods, the index goes with Retain, and
// registration costs a transaction the first time and nothing after.
func TestTSDBLabelsAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2024, 5, 20, 12, 0, 0, 0, time.UTC)
	clock := clock.New(now)
	opts := &tsdb.Options{RawPeriod: time.Hour, RawRetention: 24 * time.Hour, Tiers: []tsdb.Tier{}, Now: clock.Now}
	a, svc, checker := newDB(t, opts)
	b, err := tsdb.Open(ctx, svc, a.Name(), opts)
	require.NoError(t, err)
	ls := tsdb.LabelsFromStrings(tsdb.MetricName, "up", "job", "api/v1", "instance", "web-3")
	key, err := a.SeriesOf(ctx, ls)
	require.NoError(t, err)
	again, err := b.SeriesOf(ctx, tsdb.Labels{{Name: "instance", Value: "web-3"}, {Name: "job", Value: "api/v1"}, {Name: tsdb.MetricName, Value: "up"}, {Name: "zone", Value: ""}})
	require.NoError(t, err)
	require.Equal(t, key, again, "the same set in any order, with empty labels, is the same key")

	before := checker.Stats()
	_, err = a.SeriesOf(ctx, ls)
	require.NoError(t, err)
	require.Equal(t, before.Requests, checker.Stats().Requests, "a known set costs nothing")

	// Another process (b, fresh caches) writes the key: it reads the registry and indexes the labels.
	c, err := tsdb.Open(ctx, svc, a.Name(), opts)
	require.NoError(t, err)
	require.NoError(t, c.Write(ctx, key, tablets.Point{Time: now.Add(-2 * time.Hour), Value: 1}))
	before = checker.Stats()
	require.NoError(t, c.Write(ctx, key, tablets.Point{Time: now.Add(-2*time.Hour + time.Second), Value: 2}))
	after := checker.Stats()
	require.Equal(t, before.Batches+1, after.Batches, "a registered series costs its points' transaction only")
	require.Equal(t, before.EntityWrites+1, after.EntityWrites, "and the staging mark after it (docs/format.md)")

	sel := func(db *tsdb.DB, from, to time.Time) []tsdb.SeriesInfo {
		var out []tsdb.SeriesInfo
		for s, err := range db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchEqual, Name: "job", Value: "api/v1"}) {
			require.NoError(t, err)
			out = append(out, s)
		}
		return out
	}
	want := []tsdb.SeriesInfo{{Series: key, Labels: ls}}
	require.Equal(t, want, sel(a, now.Add(-3*time.Hour), now))
	require.Equal(t, want, sel(b, now.Add(-2*time.Hour), now.Add(-time.Hour)))
	require.Empty(t, sel(a, now.Add(-time.Hour), now), "not listed for a period without points")

	// Retain drops the period with its index.
	dropped, err := a.Retain(ctx, now.Add(26*time.Hour))
	require.NoError(t, err)
	require.Contains(t, dropped, a.Name()+"i"+fmt.Sprint(now.Add(-2*time.Hour).Unix()))
	require.Empty(t, sel(b, now.Add(-3*time.Hour), now))
}

// Select by metric name reads only that metric's index entries, among 10,000 series.
func TestTSDBLabelsSelectCost(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 series")
	}
	ctx := context.Background()
	db, svc, checker := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour})
	at := time.Date(2024, 5, 17, 10, 0, 0, 0, time.UTC)
	var sets []tsdb.Labels
	for i := range 10000 {
		name := fmt.Sprintf("metric_%03d", i%200) // 200 metrics of 50 series
		sets = append(sets, tsdb.LabelsFromStrings(tsdb.MetricName, name, "instance", fmt.Sprintf("host-%05d.example.com:9100", i), "job", "node"))
	}
	checker.Reset()
	keys, err := db.SeriesOfMany(ctx, sets)
	require.NoError(t, err)
	reg := checker.Stats()
	t.Logf("registering 10,000 label sets: %d requests (%d transactions), %d bytes sent", reg.Requests, reg.Batches, reg.RequestBytes)
	// Retried attempts (a loaded machine makes Azurite time out) are not the design's cost.
	require.LessOrEqual(t, reg.Batches-(reg.Requests-reg.Calls), int64(10000/100+16), "registration is batched per registry partition")

	// The first metric's 50 series through WriteMany: the index entries of a metric in one
	// transaction.
	var batch []tsdb.SeriesPoints
	for i := 0; i < len(keys); i += 200 {
		batch = append(batch, tsdb.SeriesPoints{Series: keys[i], Points: []tablets.Point{{Time: at, Value: float64(i)}}})
	}
	checker.Reset()
	require.NoError(t, db.WriteMany(ctx, batch))
	w := checker.Stats()
	t.Logf("first write of 50 series of one metric: %d requests, %d transactions", w.Requests, w.Batches)
	require.LessOrEqual(t, w.Batches-(w.Requests-w.Calls), int64(50+1+2*50), "a transaction per series' points (and tier flags), one for the metric's index entries")

	// The other 9,950 entries as the documented format says (PartitionKey "n" + name, RowKey
	// the key, L the label set), in a transaction per metric: 10,000 series' point writes
	// would take minutes of Azurite. The entry the library wrote must be byte for byte the same.
	index := svc.NewClient(fmt.Sprintf("%si%d", db.Name(), at.Truncate(24*time.Hour).Unix()))
	entry := func(i int) []byte {
		enc, err := sets[i].MarshalBinary()
		require.NoError(t, err)
		b, err := json.Marshal(map[string]any{"PartitionKey": "n" + sets[i].Get(tsdb.MetricName), "RowKey": keys[i], "L@odata.type": "Edm.Binary", "L": enc})
		require.NoError(t, err)
		return b
	}
	stored, err := index.GetEntity(ctx, "nmetric_000", keys[0], nil)
	require.NoError(t, err)
	var got, want map[string]any
	require.NoError(t, json.Unmarshal(stored.Value, &got))
	require.NoError(t, json.Unmarshal(entry(0), &want))
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}
	for m := 1; m < 200; m++ {
		var actions []aztables.TransactionAction
		for i := m; i < len(keys); i += 200 {
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: entry(i)})
		}
		_, err := index.SubmitTransaction(ctx, actions, nil)
		require.NoError(t, err)
	}

	measure := func(ms ...tsdb.Matcher) (int, azuriteStats) {
		checker.Reset()
		n := 0
		for _, err := range db.Select(ctx, at, at.Add(time.Hour), ms...) {
			require.NoError(t, err)
			n++
		}
		s := checker.Stats()
		return n, azuriteStats{s.Requests, s.ResponseBytes}
	}
	n, byName := measure(tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "metric_007"})
	require.Equal(t, 50, n)
	n, _ = measure(tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "metric_000"})
	require.Equal(t, 50, n)
	n, byJob := measure(tsdb.Matcher{Type: tsdb.MatchEqual, Name: "job", Value: "node"}, tsdb.Matcher{Type: tsdb.MatchRegexp, Name: "instance", Value: "host-0000[0-9].*"})
	require.Equal(t, 10, n)
	t.Logf("Select by name over 10,000 series: %d requests, %d response bytes; by other labels (reads every entry): %d requests, %d bytes",
		byName.requests, byName.bytes, byJob.requests, byJob.bytes)
	require.Equal(t, int64(1), byName.requests, "the metric's partition: the DB knows the tables it made")
	require.Less(t, byName.bytes*100, byJob.bytes*2, "the name's 50 entries are about 1/200 of the index")
}

type azuriteStats struct{ requests, bytes int64 }

// A period's index outlives its raw points while a tier keeps the period's windows: Select
// still finds the series the tier holds, and the index goes once the tier's retention passes.
func TestTSDBLabelsOutliveRaw(t *testing.T) {
	ctx := context.Background()
	tiers := []tsdb.Tier{{Step: time.Minute, Retention: 10 * time.Hour}}
	now := time.Date(2024, 5, 20, 12, 0, 0, 0, time.UTC)
	clock := clock.New(now.Add(10 * time.Minute))
	writer, svc, _ := newDB(t, &tsdb.Options{RawPeriod: time.Hour, RawRetention: 2 * time.Hour, Tiers: tiers, Now: clock.Now})
	db, err := tsdb.Open(ctx, svc, writer.Name(), &tsdb.Options{RawPeriod: time.Hour, RawRetention: 2 * time.Hour, Tiers: tiers, Now: clock.Now})
	require.NoError(t, err)
	key, err := writer.SeriesOf(ctx, tsdb.LabelsFromStrings(tsdb.MetricName, "up", "job", "api"))
	require.NoError(t, err)
	require.NoError(t, writer.Write(ctx, key, tablets.Point{Time: now.Add(-90 * time.Minute), Value: 1}))
	require.NoError(t, writer.Rollup(ctx, now.Add(-2*time.Hour), now.Add(-time.Hour)))
	period := fmt.Sprint(now.Add(-2 * time.Hour).Unix())
	sel := func() int {
		n := 0
		for _, err := range db.Select(ctx, now.Add(-2*time.Hour), now, tsdb.Matcher{Type: tsdb.MatchEqual, Name: "job", Value: "api"}) {
			require.NoError(t, err)
			n++
		}
		return n
	}
	dropped, err := db.Retain(ctx, now.Add(3*time.Hour))
	require.NoError(t, err)
	require.Contains(t, dropped, db.Name()+"r"+period)
	require.NotContains(t, dropped, db.Name()+"i"+period, "the minute tier still holds the period")
	require.Equal(t, 1, sel())
	var windows int
	for _, err := range db.Aggregate(ctx, []string{key}, now.Add(-2*time.Hour), now, time.Minute, nil) {
		require.NoError(t, err)
		windows++
	}
	require.Equal(t, 1, windows, "the tier answers where the raw points are gone")
	// A Rollup over the range whose raw table is gone leaves the tier as it is: its windows
	// are the last word there (they were computed before the points went).
	clock.Add(3 * time.Hour)
	require.NoError(t, db.Rollup(ctx, now.Add(-2*time.Hour), now))
	windows = 0
	for _, err := range db.Aggregate(ctx, []string{key}, now.Add(-2*time.Hour), now, time.Minute, nil) {
		require.NoError(t, err)
		windows++
	}
	require.Equal(t, 1, windows, "a Rollup after the raw table was dropped erased the tier's window")

	dropped, err = db.Retain(ctx, now.Add(12*time.Hour))
	require.NoError(t, err)
	require.Contains(t, dropped, db.Name()+"i"+period)
	require.Zero(t, sel())
}

// When the account is down, WriteMany stops at the first failure instead of taking every
// series through every retry, and says which points of every series were not stored.
func TestTSDBWriteManyFailsFast(t *testing.T) {
	ctx := context.Background()
	var down atomic.Bool
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	ft := fault.New(checker, fault.Options{FailBefore: 1, Match: func(*http.Request) bool { return down.Load() }})
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: ft, Retry: azurite.TestRetryOptions()}})
	require.NoError(t, err)
	name := fmt.Sprintf("ff%d", time.Now().UnixNano()%1e12)
	dbtest.DropOnCleanup(t, name)
	now := time.Date(2024, 5, 20, 12, 0, 0, 0, time.UTC)
	db, err := tsdb.Open(ctx, svc, name, &tsdb.Options{Tiers: []tsdb.Tier{}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	var batch []tsdb.SeriesPoints
	for i := range 200 {
		batch = append(batch, tsdb.SeriesPoints{Series: fmt.Sprintf("s%03d", i), Points: []tablets.Point{{Time: now, Value: float64(i)}}})
	}
	require.NoError(t, db.WriteMany(ctx, batch)) // tables and index entries exist: only points to write
	for i := range batch {
		batch[i].Points = []tablets.Point{{Time: now.Add(time.Second), Value: 1}}
	}
	down.Store(true)
	before := ft.Requests()
	err = db.WriteMany(ctx, batch)
	require.Error(t, err)
	attempts := ft.Requests() - before
	retries := int64(azurite.TestRetryOptions().MaxRetries + 1)
	t.Logf("200 series with the account down: %d attempts (%d a request)", attempts, retries)
	require.Less(t, attempts, 100*retries, "the first failure stops the rest")
	var failed, answered int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var we *tablets.WriteError
		require.ErrorAs(t, e, &we)
		failed += len(we.Failed)
		if we.Status != 0 { // the service's answer, not "not written after another failed"
			answered++
			require.Contains(t, []int{http.StatusServiceUnavailable, http.StatusInternalServerError}, we.Status)
			require.Equal(t, we.Status == http.StatusServiceUnavailable, errors.Is(we, tablets.ErrThrottled), "%v", we)
		}
	}
	require.Equal(t, 200, failed, "every point is reported not stored")
	require.Positive(t, answered, "the failed series carry the service's status")
}
