package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sort"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/seed71701133/tablets/server/internal/engineselect"
	"github.com/seed71701133/tablets/server/internal/results"
)

// The results cache (Options.ResultsCache) keeps the answer of a range query by step, as
// Mimir's query-frontend and VictoriaMetrics' rollup result cache do, so that a refreshed
// panel (the same query, start and end moved on) computes only its newest steps. The
// engine evaluates each step of a range query alone, from the samples of its own data range
// (the selectors' ranges, offsets and lookback delta before it), so that the answer of a
// step is the same whatever range it was asked in, while those samples stay the same.
// That is what a mark checks: a cached extent (a run of steps) keeps the mark of the data
// range of its steps, and serves only while a mark taken at the request holds it, whichever
// server wrote, folded, deleted or retained samples meanwhile.
//
// Steps at or after now minus Options.ResultsFreshness are always computed and never kept:
// in-order ingest is still filling them, and every write would otherwise spoil an extent.
// The steps kept after now minus Options.ResultsSettled are young: a remote write a little
// late (a Prometheus behind by a minute or two) still reaches their samples. An extent
// keeps a second mark, of its settled steps alone, so that such a write has only the young
// steps computed again, where it would spoil the whole extent.

// DefaultResultsFreshness is the default of Options.ResultsFreshness: a remote write's
// samples are a few seconds old when they are stored (Prometheus sends them every 5 s at
// most), so that the steps a minute old are complete, as Cortex' max_cache_freshness (1m)
// assumes. A later write is not lost: the extent's mark no longer holds, and its young
// steps are computed again.
const DefaultResultsFreshness = time.Minute

// DefaultResultsSettled is the default of Options.ResultsSettled, as VictoriaMetrics'
// -search.cacheTimestampOffset (5m): the steps before it are kept apart from the young ones.
const DefaultResultsSettled = 5 * time.Minute

// KeepEvery is how often an answer computed in part (a refreshed panel's) is kept in the
// database again (Options.KeepAnswers): an answer computed whole is kept at once. A server
// that finds it computes the steps after it, ten minutes of them at most: a few of what a
// panel's first load computes. A keep writes the whole answer again, for the other servers'
// first loads only (a server's own cache serves its refreshes): at a keep a minute, the
// soak's one server kept 36 answers a minute that no server read (run 98 of docs/soak.md).
const KeepEvery = 10 * time.Minute

// MaxKeeps is how many answers an API keeps in the database at once (Options.KeepAnswers):
// a keep is a write in the background, after the answer; one over the bound is left out
// (counted Failed), and the answer is kept at a later refresh.
const MaxKeeps = 4

// keepTimeout bounds a keep, which outlives its request.
const keepTimeout = 30 * time.Second

// Marker is a storage.Queryable whose answers a results cache can check: it takes marks of
// the samples of its database (results.Marker), and says which queries read only what a mark
// covers. promstore.Queryable is one.
type Marker interface {
	results.Marker
	// ExactReads reports whether the Selects of a query with ctx (which carries its
	// max_source_resolution) read raw samples wherever they exist. Tiers served where raw
	// samples exist answer otherwise as a rollup goes on, and a mark says nothing of them.
	ExactReads(ctx context.Context) bool
}

// readPreparer is a Marker that can read beforehand what a query's Selects will take
// without taking a mark (promstore.Queryable.PrepareRead): it neither selects the staged
// entities of the range nor sums them, as a read mark does for the results cache.
type readPreparer interface {
	PrepareRead(ctx context.Context, from, to time.Time) error
}

// speculator is a Marker whose reads can run beside the request that checks them
// (promstore.Queryable.Speculate: tsdb's DB.Speculate).
type speculator interface {
	Speculate(ctx context.Context) (sctx context.Context, holds func() bool, ok bool)
}

// stagedPrefetcher is a Marker that can begin fetching, beside a read mark, the staged
// samples a query's Selects will read (promstore.Queryable.PrefetchStaged): a refreshed
// panel then waits for the mark's read of the change log and that fetch at once, not one
// after the other.
type stagedPrefetcher interface {
	PrefetchStaged(ctx context.Context, from, to time.Time, selectors [][]*labels.Matcher)
}

// resultsKey is what an extent answers: the same query of the same database, at the same
// steps (the step and the remainder of start by it), with the same engine settings. The
// Marker is the database: the key keeps it alive while the entry lives, so that no other
// takes its address.
type resultsKey struct {
	db                     Marker
	query                  string // parsed and printed again: spaces and the like don't matter
	step, phase            int64  // milliseconds
	lookback, subqueryStep int64  // milliseconds
}

// extent is the answer of a run of steps, from (the first step) to to (the last),
// milliseconds. It is shared by the requests that find it: nothing in it is changed once it
// is in the cache (its points are copies of the engine's, which recycles its own).
type extent struct {
	from, to int64
	mark     results.Mark // of the data range of its steps
	series   promql.Matrix
	// keptAt is when the answer it extends, or it, was last kept in the database (zero:
	// never, or not by this process), by the API's clock (Options.KeepAnswers).
	keptAt time.Time
	// settledTo is the last of its steps that was before the settled horizon when mark was
	// taken, settled the mark of the data range of the steps from..settledTo: what serves
	// when mark no longer holds (a write a little late, into the young steps' samples).
	// settled is nil when every step is settled (mark serves), or none is.
	settledTo int64
	settled   results.Mark
}

// sharedKey is the name of key's answers among the database's kept answers: what an
// answer depends on besides its database, the same in every server of every version that
// computes the same answers (the version of Prometheus' engine, which computes them, is
// part of it).
func (k resultsKey) sharedKey() string {
	return fmt.Sprintf("range v1 %s step %d phase %d lookback %d subquery %d: %s",
		engineVersion, k.step, k.phase, k.lookback, k.subqueryStep, k.query)
}

// engineVersion is the version of the Prometheus module this program was built with
// ("devel" when unknown, as in tests).
var engineVersion = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/prometheus/prometheus" {
				if m.Replace != nil {
					return m.Replace.Path + "@" + m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return "devel"
}()

// keptExtent reads the answer another server kept for key, as an extent, when it has
// steps of q: nil when there is none (or it cannot be read: the request computes what it
// lacks, as without).
func (a *API) keptExtent(ctx context.Context, key resultsKey, q rangeRequest) *extent {
	k, ok, err := a.keeper.KeptAnswer(ctx, key.sharedKey())
	if err != nil {
		if ctx.Err() == nil {
			a.logger.Warn("results cache: reading a kept answer", "err", err)
		}
		return nil
	}
	if !ok || k.Last < q.start || k.First > q.lastOld {
		return nil
	}
	// Kept now, as far as this process goes: it does not keep it again for KeepEvery.
	return &extent{from: k.First, to: k.Last, mark: k.Mark, series: k.Series, settledTo: k.LastSettled,
		settled: k.Settled, keptAt: a.now()}
}

// keep keeps e in the database for every server, in the background, unless MaxKeeps
// keeps are under way; it reports whether it began.
func (a *API) keep(ctx context.Context, key resultsKey, e *extent) bool {
	select {
	case a.keeps <- struct{}{}:
	default:
		a.results.CountShared(results.SharedStats{Failed: 1})
		return false
	}
	k := results.Kept{First: e.from, Last: e.to, LastSettled: e.settledTo, Mark: e.mark, Settled: e.settled, Series: e.series}
	ctx = context.WithoutCancel(ctx) // the request's values (tenant, class), not its end
	go func() {
		defer func() { <-a.keeps }()
		ctx, cancel := context.WithTimeout(ctx, keepTimeout)
		defer cancel()
		if err := a.keeper.KeepAnswer(ctx, key.sharedKey(), k); err != nil {
			a.results.CountShared(results.SharedStats{Failed: 1})
			a.logger.Debug("results cache: keeping an answer", "err", err)
			return
		}
		a.results.CountShared(results.SharedStats{Kept: 1})
	}()
	return true
}

// hasHistograms reports whether a series of m has histogram samples.
func hasHistograms(m promql.Matrix) bool {
	for _, s := range m {
		if len(s.Histograms) > 0 {
			return true
		}
	}
	return false
}

// newExtent is the extent of the steps from..to of mat, stamped with (sub-marks of) mark:
// the steps up to lastSettled are the settled ones.
func newExtent(q rangeRequest, mark results.Mark, from, to, lastSettled int64, mat promql.Matrix) *extent {
	e := &extent{from: from, to: to, mark: mark.Sub(q.dataRange(from, to)), series: mat, settledTo: min(lastSettled, to)}
	if e.settledTo >= from && e.settledTo < to {
		e.settled = mark.Sub(q.dataRange(from, e.settledTo))
	}
	return e
}

// holding is how much of e a mark m taken now holds: to its last step (e.to), to its last
// settled one, or none (ok false).
func (e *extent) holding(m results.Mark) (to int64, ok bool) {
	switch {
	case m.Holds(e.mark):
		return e.to, true
	case e.settled != nil && m.Holds(e.settled):
		return e.settledTo, true
	}
	return 0, false
}

// rangeRequest is a range query the results cache may answer.
type rangeRequest struct {
	expr             parser.Expr
	query            string // printed by the parser: the key's
	raw              string // as asked: the engine's, whose annotations point into it
	start, end, step int64  // milliseconds; end is the last step
	lastOld          int64  // the last step before the freshness horizon: the last kept
	lastSettled      int64  // the last step before the settled horizon (<= lastOld)
	lookback         time.Duration
	opts             promql.QueryOpts
	limit            int
}

// cachedRange answers a range query with the results cache. ok is false when the query is
// not one to cache: the caller then has the engine answer it whole.
func (a *API) cachedRange(ctx context.Context, r *http.Request, opts promql.QueryOpts, start, end time.Time, step time.Duration, limit int) (data []byte, ws annotations.Annotations, apiErr *apiError, ok bool) {
	q, ok := a.cacheable(ctx, r, opts, start, end, step)
	if !ok {
		return nil, nil, nil, false
	}
	q.limit = limit
	key := resultsKey{db: a.marker, query: q.query, step: q.step, phase: q.start % q.step,
		lookback: q.lookback.Milliseconds(), subqueryStep: a.subqueryStep}
	var ext *extent
	if v, found := a.results.Get(key); found {
		ext = v.(*extent)
		if ext.to < q.start || ext.from > q.lastOld { // no step of this request: of no use
			ext = nil
		}
	}
	// None of this process's: another server's, kept in the database. (One of this
	// process's that no longer holds is not looked for there: the change that spoilt it
	// spoilt the kept one too, unless another server computed it since, which is rare.)
	triedKept := false
	if ext == nil && a.keeper != nil {
		ext, triedKept = a.keptExtent(ctx, key, q), true
	}
	// One mark over the data range of every step that may come from the cache or go into
	// it: the extent's, and the request's before the horizon.
	from, to := q.start, q.lastOld
	if ext != nil {
		from, to = min(from, ext.from), max(to, ext.to)
	}
	markFrom, markTo := q.dataRange(from, to)
	if p, ok := a.marker.(stagedPrefetcher); ok {
		// The staged samples of the steps the engine will compute (those after the
		// extent: a refresh's last few), fetched while the mark reads the change log.
		computeFrom := q.start
		if ext != nil && ext.from <= q.start {
			computeFrom = min(q.lastOld, ext.to) + q.step
		}
		if computeFrom <= q.end {
			pf, pt := q.dataRange(computeFrom, q.end)
			p.PrefetchStaged(ctx, pf, pt, parser.ExtractSelectors(q.expr))
		}
	}
	mark, err := a.marker.ReadMark(ctx, markFrom, markTo)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, classify(ctx.Err()), true
		}
		// The answer needs no mark: the engine gives it, uncached.
		a.logger.Warn("results cache: taking a read mark", "err", err)
		return nil, nil, nil, false
	}
	extTo := int64(0) // the extent's last step that still stands
	if ext != nil {
		var holds bool
		// What stands may end before the request's first step (a panel zoomed in on the
		// young steps): then nothing of it serves.
		if extTo, holds = ext.holding(mark); !holds || extTo < q.start {
			ext = nil
		}
	}
	if ext != nil {
		a.results.Hit()
	} else {
		a.results.Miss()
	}
	if triedKept {
		if ext != nil {
			a.results.CountShared(results.SharedStats{Hits: 1})
		} else {
			a.results.CountShared(results.SharedStats{Misses: 1})
		}
	}

	// What the extent lacks, computed by the engine (its limits apply to each part): the
	// steps before the extent, and those after it up to the request's end.
	var parts []promql.Matrix
	cachedFrom, cachedTo := q.start, q.start-q.step // none
	if ext != nil {
		cachedFrom, cachedTo = max(q.start, ext.from), min(q.lastOld, extTo)
	}
	storable := true // no part before the horizon had annotations
	compute := func(from, to int64) *apiError {
		m, w, apiErr := a.computeRange(ctx, q, from, to)
		if apiErr != nil {
			return apiErr
		}
		if len(w) > 0 && from <= q.lastOld {
			storable = false
		}
		ws.Merge(w)
		parts = append(parts, m)
		return nil
	}
	if cachedFrom > q.start {
		if apiErr := compute(q.start, cachedFrom-q.step); apiErr != nil {
			return nil, ws, apiErr, true
		}
	}
	if ext != nil {
		cached := ext.series
		if cachedTo < ext.to {
			// Its young steps no longer stand (or lie past the request's horizon): only the
			// points up to cachedTo are taken.
			cached = mergeSteps([]promql.Matrix{cached}, cachedFrom, cachedTo)
		}
		parts = append(parts, cached)
	}
	if cachedTo < q.end {
		if apiErr := compute(cachedTo+q.step, q.end); apiErr != nil {
			return nil, ws, apiErr, true
		}
	}
	mat := mergeSteps(parts, q.start, q.end)

	switch {
	case !storable:
	case ext != nil && cachedFrom == q.start && cachedTo == q.lastOld && cachedTo == ext.to:
		// Nothing before the horizon was computed: the extent again, with the newer mark,
		// which later changes are checked from (logs keep a bounded number of them). The
		// whole extent stood at it, so that its steps now before the settled horizon are
		// settled as of it.
		again := newExtent(q, mark, ext.from, ext.to, q.lastSettled, ext.series)
		again.keptAt = ext.keptAt
		a.results.Put(key, again, again.bytes())
	default:
		// The request's steps before the horizon. Their reads came after the mark: if
		// anything changed in between, the next mark does not hold this one, and they are
		// computed again.
		keep := newExtent(q, mark, q.start, q.lastOld, q.lastSettled, mergeSteps([]promql.Matrix{mat}, q.start, q.lastOld))
		if ext != nil {
			keep.keptAt = ext.keptAt
		}
		// Kept in the database too when computed whole, or when what the database keeps is
		// older than KeepEvery: another server then computes KeepEvery of steps at most.
		if a.keeper != nil && (ext == nil || a.now().Sub(keep.keptAt) >= KeepEvery) && !hasHistograms(keep.series) {
			if now := a.now(); a.keep(ctx, key, keep) {
				keep.keptAt = now
			}
		}
		a.results.Put(key, keep, keep.bytes())
	}

	if q.limit > 0 && len(mat) > q.limit {
		mat = mat[:q.limit]
		ws = ws.Add(errors.New("results truncated due to limit"))
	}
	data, err = appendQueryData(nil, mat, nil)
	if err != nil {
		a.logger.Error("error encoding query result", "err", err)
		return nil, nil, &apiError{typ: ErrorInternal, err: err}, true
	}
	return data, ws, nil, true
}

// cacheable returns the request as a rangeRequest if the results cache may answer it: the
// API has a cache and its Queryable takes marks; the Selects read raw samples (no tiers
// asked for by max_source_resolution or the store's default); no stats asked for (they
// would count only what was computed); a query that parses, whose steps each depend on
// their own time only (no @ modifier, start() or end()); whole milliseconds; some steps
// before the freshness horizon.
func (a *API) cacheable(ctx context.Context, r *http.Request, opts promql.QueryOpts, start, end time.Time, step time.Duration) (rangeRequest, bool) {
	if a.results == nil || a.marker == nil || r.FormValue("stats") != "" || !a.marker.ExactReads(ctx) {
		return rangeRequest{}, false
	}
	if step%time.Millisecond != 0 || start.Nanosecond()%int(time.Millisecond) != 0 || end.Nanosecond()%int(time.Millisecond) != 0 {
		return rangeRequest{}, false
	}
	expr, err := parser.ParseExpr(r.FormValue("query"))
	if err != nil {
		return rangeRequest{}, false // the engine says what is wrong
	}
	if t := expr.Type(); t != parser.ValueTypeVector && t != parser.ValueTypeScalar {
		return rangeRequest{}, false
	}
	if !stepLocal(expr) {
		return rangeRequest{}, false
	}
	q := rangeRequest{expr: expr, query: expr.String(), raw: r.FormValue("query"), start: millis(start), step: step.Milliseconds(), opts: opts}
	q.end = q.start + (millis(end)-q.start)/q.step*q.step
	horizon := millis(a.now().Add(-a.freshness))
	if q.start >= horizon {
		return rangeRequest{}, false // every step is fresh: nothing to keep
	}
	q.lastOld = q.start + (min(horizon-1, q.end)-q.start)/q.step*q.step
	q.lastSettled = q.start - q.step // none
	if settled := millis(a.now().Add(-a.settled)); settled > q.start {
		q.lastSettled = q.start + (min(settled-1, q.lastOld)-q.start)/q.step*q.step
	}
	q.lookback = a.lookbackDelta
	if d := opts.LookbackDelta(); d > 0 {
		q.lookback = d
	}
	return q, true
}

// stepLocal reports whether the value of expr at a step depends on the step's time alone,
// not on the range's start or end: no @ modifier, start() or end(), on a selector or a
// subquery.
func stepLocal(expr parser.Expr) bool {
	local := true
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			local = local && n.Timestamp == nil && n.StartOrEnd == 0
		case *parser.SubqueryExpr:
			local = local && n.Timestamp == nil && n.StartOrEnd == 0
		}
		return nil
	})
	return local
}

// dataRange is the range of sample times the steps from..to read, as a mark's [from, to):
// promql.FindMinMaxTime's (selectors' ranges, offsets, subqueries and the lookback delta),
// within the stores' times.
func (q rangeRequest) dataRange(from, to int64) (time.Time, time.Time) {
	mint, maxt := promql.FindMinMaxTime(&parser.EvalStmt{Expr: q.expr, Start: time.UnixMilli(from), End: time.UnixMilli(to),
		Interval: time.Duration(q.step) * time.Millisecond, LookbackDelta: q.lookback})
	start, end, ok := storeRange(time.UnixMilli(mint), time.UnixMilli(maxt+1))
	if !ok { // all of it before the stores' times (negative offsets): an empty range there
		return start, start
	}
	return start, end
}

// computeRange has the engine answer the steps from..to of q, and returns a copy of its
// matrix: the engine recycles its own when the query is closed.
func (a *API) computeRange(ctx context.Context, q rangeRequest, from, to int64) (promql.Matrix, annotations.Annotations, *apiError) {
	qry, err := a.newRangeQuery(ctx, q.opts, q.raw, time.UnixMilli(from), time.UnixMilli(to), time.Duration(q.step)*time.Millisecond)
	if err != nil {
		return nil, nil, newQueryError(err)
	}
	defer qry.Close()
	res := qry.Exec(engineselect.With(ctx)) // as exec's
	if res.Err != nil {
		return nil, res.Warnings, classify(res.Err)
	}
	m, ok := res.Value.(promql.Matrix)
	if !ok { // a range query's value is a matrix: not expected
		return nil, res.Warnings, &apiError{typ: ErrorInternal, err: errors.New("range query answered no matrix")}
	}
	return copyMatrix(m), res.Warnings, nil
}

// copyMatrix copies m deeply: labels, points and histograms.
func copyMatrix(m promql.Matrix) promql.Matrix {
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		c := promql.Series{Metric: s.Metric.Copy()}
		if len(s.Floats) > 0 {
			c.Floats = append([]promql.FPoint(nil), s.Floats...)
		}
		if len(s.Histograms) > 0 {
			c.Histograms = make([]promql.HPoint, len(s.Histograms))
			for j, p := range s.Histograms {
				c.Histograms[j] = promql.HPoint{T: p.T, H: p.H.Copy()}
			}
		}
		out[i] = c
	}
	return out
}

// mergeSteps joins the series of parts (answers of successive runs of steps, in time
// order) by their labels, keeping the points of steps from..to, in new slices (the points
// of one part are shared with it: nothing changes them). A series without points there is
// left out, and the series are sorted by labels, as the engine sorts the answer of a range
// query.
func mergeSteps(parts []promql.Matrix, from, to int64) promql.Matrix {
	var out promql.Matrix
	index := map[string]int{}
	var buf []byte
	for _, part := range parts {
		for _, s := range part {
			fs := pointsWithin(s.Floats, from, to, func(p promql.FPoint) int64 { return p.T })
			hs := pointsWithin(s.Histograms, from, to, func(p promql.HPoint) int64 { return p.T })
			if len(fs) == 0 && len(hs) == 0 {
				continue
			}
			buf = s.Metric.Bytes(buf[:0])
			i, seen := index[string(buf)]
			if !seen {
				i = len(out)
				index[string(buf)] = i
				out = append(out, promql.Series{Metric: s.Metric})
			}
			if len(fs) > 0 {
				out[i].Floats = append(out[i].Floats, fs...)
			}
			if len(hs) > 0 {
				out[i].Histograms = append(out[i].Histograms, hs...)
			}
		}
	}
	if out == nil {
		out = promql.Matrix{}
	}
	sort.Sort(out)
	return out
}

// pointsWithin is the run of points (times ascending) within [from, to].
func pointsWithin[P any](ps []P, from, to int64, t func(P) int64) []P {
	lo := sort.Search(len(ps), func(i int) bool { return t(ps[i]) >= from })
	hi := sort.Search(len(ps), func(i int) bool { return t(ps[i]) > to })
	if hi < lo { // from after to: none
		return nil
	}
	return ps[lo:hi]
}

// bytes is about the memory the extent holds.
func (e *extent) bytes() int64 {
	n := int64(64)
	for _, s := range e.series {
		n += 64 + int64(len(s.Metric.Bytes(nil))) + 16*int64(cap(s.Floats)) + 16*int64(cap(s.Histograms))
		for _, p := range s.Histograms {
			n += histogramBytes(p.H)
		}
	}
	return n
}

// histogramBytes is about the memory of h.
func histogramBytes(h *histogram.FloatHistogram) int64 {
	return 128 + 8*int64(len(h.PositiveSpans)+len(h.NegativeSpans)+len(h.PositiveBuckets)+len(h.NegativeBuckets)+len(h.CustomValues))
}
