package promstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"

	"github.com/seed71701133/tablets/server/internal/resolution"
	"github.com/seed71701133/tablets/server/internal/results"
	"github.com/seed71701133/tablets/tsdb"
)

// ReadMark takes a mark of the samples of [from, to) of the database (tsdb's DB.ReadMark),
// for the query API's results cache (api.Marker): an answer computed from them stands
// while a later mark holds it.
func (q *Queryable) ReadMark(ctx context.Context, from, to time.Time) (results.Mark, error) {
	m, err := q.db.ReadMark(ctx, from, to)
	if err != nil {
		return nil, err
	}
	return readMark{m}, nil
}

// PrepareRead is tsdb's DB.PrepareRead: the query API prepares an instant query's read
// with it (ReadMark without a mark to keep).
func (q *Queryable) PrepareRead(ctx context.Context, from, to time.Time) error {
	return q.db.PrepareRead(ctx, from, to)
}

// Speculate is tsdb's DB.Speculate: the query API answers an instant query beside its
// PrepareRead, and keeps the answer when the check says it holds.
func (q *Queryable) Speculate(ctx context.Context) (context.Context, func() bool, bool) {
	return q.db.Speculate(ctx)
}

// BeginRead is tsdb's DB.BeginRead: the query API begins each query's read with it, so
// that its read mark and its Selects share the staging listing and the change logs' reads.
func (q *Queryable) BeginRead(ctx context.Context) context.Context { return q.db.BeginRead(ctx) }

// PrefetchStaged begins bringing into the staging cache, in the background, what the
// Selects of the query with ctx (which began: BeginRead) will read of the staging table
// over [from, to) for the selectors (tsdb's DB.PrefetchStaged): the query API runs it
// beside its read mark, so that the entities staged since the last refresh are fetched
// while the mark reads the raw log. It ends with ctx; selectors of every series and bad
// matchers are left out (the Selects say what is wrong), and so are its errors (the
// Selects read what it did not).
func (q *Queryable) PrefetchStaged(ctx context.Context, from, to time.Time, selectors [][]*labels.Matcher) {
	var sets [][]tsdb.Matcher
	for _, ms := range selectors {
		if !selective(ms) {
			continue
		}
		if m, err := MatchersToTSDB(ms); err == nil {
			sets = append(sets, m)
		}
	}
	if len(sets) == 0 {
		return
	}
	go func() { _ = q.db.PrefetchStaged(ctx, from, to, sets...) }()
}

// ExactReads reports whether the Selects of a query with ctx read raw samples wherever
// they exist (what a mark covers): its max_source_resolution, else the Queryable's
// MaxResolution, is raw, and tiers are not preferred.
func (q *Queryable) ExactReads(ctx context.Context) bool {
	switch {
	case q.opts.DisableTiers:
		return true
	case q.opts.PreferTiers:
		return false
	}
	res := resolution.From(ctx)
	if res == 0 {
		res = q.opts.MaxResolution
	}
	return res == 0 || res == tsdb.RawResolution
}

// readMark is a tsdb.ReadMark as a results.Mark.
type readMark struct{ m tsdb.ReadMark }

func (r readMark) Holds(since results.Mark) bool {
	s, ok := since.(readMark)
	return ok && r.m.Holds(s.m)
}

func (r readMark) Sub(from, to time.Time) results.Mark { return readMark{r.m.Sub(from, to)} }

// errNotKept is the error of KeepAnswer for an answer it cannot keep: marks of another
// Marker, or histograms (a kept answer holds floats).
var errNotKept = errors.New("promstore: an answer that cannot be kept")

// KeepAnswer keeps an answer of the query API's results cache in the database, for every
// server sharing it (tsdb's Answers.Keep; results.Keeper): one request.
func (q *Queryable) KeepAnswer(ctx context.Context, key string, k results.Kept) error {
	mark, ok := k.Mark.(readMark)
	if !ok {
		return fmt.Errorf("%w: a mark of %T", errNotKept, k.Mark)
	}
	a := tsdb.KeptAnswer{First: k.First, Last: k.Last, Mark: mark.m, LastSettled: k.LastSettled}
	if k.Settled != nil {
		settled, ok := k.Settled.(readMark)
		if !ok {
			return fmt.Errorf("%w: a mark of %T", errNotKept, k.Settled)
		}
		a.Settled, a.HasSettled = settled.m, true
	}
	a.Series = make([]tsdb.AnswerSeries, len(k.Series))
	for i, s := range k.Series {
		if len(s.Histograms) > 0 {
			return fmt.Errorf("%w: histograms", errNotKept)
		}
		ts, vs := make([]int64, len(s.Floats)), make([]float64, len(s.Floats))
		for j, p := range s.Floats {
			ts[j], vs[j] = p.T, p.F
		}
		a.Series[i] = tsdb.AnswerSeries{Labels: LabelsToTSDB(s.Metric), Times: ts, Values: vs}
	}
	return q.db.Answers().Keep(ctx, key, a)
}

// KeptAnswer reads the answer kept under key (tsdb's Answers.Kept; results.Keeper): one
// request.
func (q *Queryable) KeptAnswer(ctx context.Context, key string) (results.Kept, bool, error) {
	a, ok, err := q.db.Answers().Kept(ctx, key)
	if err != nil || !ok {
		return results.Kept{}, false, err
	}
	k := results.Kept{First: a.First, Last: a.Last, LastSettled: a.LastSettled, Mark: readMark{a.Mark},
		Series: make(promql.Matrix, len(a.Series))}
	if a.HasSettled {
		k.Settled = readMark{a.Settled}
	}
	for i, s := range a.Series {
		ps := make([]promql.FPoint, len(s.Times))
		for j, t := range s.Times {
			ps[j] = promql.FPoint{T: t, F: s.Values[j]}
		}
		k.Series[i] = promql.Series{Metric: LabelsFromTSDB(s.Labels), Floats: ps}
	}
	return k, true, nil
}
