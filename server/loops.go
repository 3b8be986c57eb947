package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain"
	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/tsdb"
)

// loop is one of Run's background tasks: ranged (rollup, compaction) or not (fold, the
// rollup of dirty slices, retention).
type loop struct {
	name   string
	opts   maintain.Options
	ranges maintain.RangeTask
	tick   maintain.TickTask
}

// loops are Run's tasks on the server's database.
func (s *Server) loops() []loop {
	loops := schedule(s.opts, s.db.Options())
	for i := range loops {
		switch loops[i].name {
		case "fold":
			loops[i].tick = s.fold
		case "compact":
			loops[i].ranges = s.compact
			loops[i].opts.Progress = progress{db: s.db, task: tsdb.TaskCompact}
		case "rollup":
			loops[i].ranges = s.db.Rollup
			loops[i].opts.Progress = progress{db: s.db, task: tsdb.TaskRollup}
		case "flagged":
			loops[i].tick = s.rollupFlagged
		case "retain":
			loops[i].tick = s.retain
		}
	}
	return loops
}

// stagedFor is about how long a staged point may wait after its arrival before a Fold may
// fold it: tsdb folds an arrival bucket (10 minutes) 5 minutes after its end.
const stagedFor = 15 * time.Minute

// compact compacts the chunks of [from, to), and of the time before it that a fold may
// have written into since the last compaction (see refolded).
func (s *Server) compact(ctx context.Context, from, to time.Time) error {
	return s.db.Compact(ctx, refolded(from, s.opts.FoldEvery), to)
}

// refolded is where a compaction of a range starting at from starts, when folds run every
// foldEvery (0: only before it, as Maintain's): the points staged when the last compaction
// ran may have arrived up to stagedFor before its end, and be folded up to foldEvery later,
// into days it compacted; compacted again, their chunks are merged. Compaction works whole
// days, so that costs more only on the day after a day boundary.
func refolded(from time.Time, foldEvery time.Duration) time.Time {
	return later(tablets.MinTime, from.Add(-max(foldEvery, 0)-stagedFor))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// schedule is when and over what range Run's tasks run, for the server's options o (with
// their defaults) and the database's db: the tasks not disabled, without their work, in the
// order that a run of all of them takes (Maintain's): fold, compact, rollup, flagged (the
// rollup of the slices late writes marked dirty, at the rollup's interval), retain.
func schedule(o Options, db tsdb.Options) []loop {
	var loops []loop
	if o.FoldEvery > 0 {
		loops = append(loops, loop{name: "fold", opts: maintain.Options{Every: o.FoldEvery}})
	}
	if o.CompactEvery > 0 {
		// Cut at days: a chunked partition is a day by default, and compacted whole.
		loops = append(loops, loop{name: "compact", opts: maintain.Options{Every: o.CompactEvery,
			CatchUp: o.CompactCatchUp, Slice: 24 * time.Hour}})
	}
	if o.RollupEvery > 0 {
		// Windows are trusted once sealed; their raw points are kept RawRetention at least.
		catchUp, limit := max(o.RollupCatchUp, db.SealDelay), time.Duration(0)
		if db.RawRetention > 0 {
			limit = max(db.RawRetention, db.SealDelay)
			catchUp = min(catchUp, limit)
		}
		var slice time.Duration // a block of the coarsest tier: Rollup works whole ones
		if len(db.Tiers) > 0 {
			slice = db.Tiers[len(db.Tiers)-1].Step * tierBlockWindows
		}
		loops = append(loops, loop{name: "rollup", opts: maintain.Options{Every: o.RollupEvery, Lag: db.SealDelay,
			CatchUp: catchUp, Limit: limit, Slice: slice}})
		if len(db.Tiers) > 0 {
			loops = append(loops, loop{name: "flagged", opts: maintain.Options{Every: o.RollupEvery}})
		}
	}
	if o.RetainEvery > 0 {
		loops = append(loops, loop{name: "retain", opts: maintain.Options{Every: o.RetainEvery}})
	}
	for i := range loops {
		loops[i].opts.Now = o.Now
	}
	return loops
}

// progress is a task's progress in the database, as a loop keeps it.
type progress struct {
	db   *tsdb.DB
	task string
}

func (p progress) Load(ctx context.Context) (time.Time, bool, error) {
	return p.db.Covered(ctx, p.task)
}

func (p progress) Save(ctx context.Context, t time.Time) error {
	return p.db.SetCovered(ctx, p.task, t)
}

// tierBlockWindows is the number of windows of a tier block (docs/format.md).
const tierBlockWindows = 24

// fold folds the staged points into the raw tables, and sets the fold's covered-until gauge
// to the arrival time folded through.
func (s *Server) fold(ctx context.Context, _ time.Time) error {
	r, err := s.db.Fold(ctx)
	if errors.Is(err, tsdb.ErrFoldBusy) {
		s.log.Debug("another process is folding the database")
		return nil // it folds what this one would
	}
	if r.Entities > 0 {
		s.log.Info("folded staged points", "entities", r.Entities, "points", r.Points, "series", r.Series, "through", r.Through)
	}
	if !r.Through.IsZero() {
		s.covered.WithLabelValues("fold").Set(float64(r.Through.UnixNano()) / 1e9)
	}
	return err
}

// rollupFlagged rolls up the slices that writes of late points marked dirty.
func (s *Server) rollupFlagged(ctx context.Context, _ time.Time) error {
	n, err := s.db.RollupFlagged(ctx)
	if n > 0 {
		s.log.Info("rolled up the slices late writes marked dirty", "markers", n)
	}
	return err
}

// retain drops the tables past their retention.
func (s *Server) retain(ctx context.Context, now time.Time) error {
	dropped, err := s.db.Retain(ctx, now)
	if len(dropped) > 0 {
		s.log.Info("retention dropped tables", "tables", dropped)
	}
	return err
}

// runLoops runs loops until ctx is done, each call of a task in its turn under the
// options' Jobs, counting and logging their runs.
func (s *Server) runLoops(ctx context.Context, loops []loop) {
	var wg sync.WaitGroup
	for _, l := range loops {
		l.opts.Report = func(r maintain.Run) { s.reportRun(l.name, r) }
		// Their requests to the account are background ones: they take at most a share of
		// the account's requests in flight, so that writes and queries never queue behind a
		// catch-up (reqlimit).
		if ranges := l.ranges; ranges != nil {
			l.ranges = func(ctx context.Context, from, to time.Time) error {
				ctx = reqlimit.Background(ctx)
				return s.opts.Jobs.do(ctx, func() error { return ranges(ctx, from, to) })
			}
		}
		if tick := l.tick; tick != nil {
			do := s.opts.Jobs.do
			if l.name == "fold" {
				do = s.opts.Jobs.doFirst
			}
			l.tick = func(ctx context.Context, now time.Time) error {
				ctx = reqlimit.Background(ctx)
				return do(ctx, func() error { return tick(ctx, now) })
			}
		}
		wg.Go(func() {
			var err error
			if l.ranges != nil {
				err = maintain.Ranges(ctx, l.ranges, &l.opts)
			} else {
				err = maintain.Ticks(ctx, l.tick, &l.opts)
			}
			if ctx.Err() == nil {
				s.log.Error("background "+l.name+" stopped", "err", err) // options New let through: a bug
			}
		})
	}
	wg.Wait()
}

func (s *Server) reportRun(name string, r maintain.Run) {
	if r.Err != nil {
		s.background.WithLabelValues(name, "error").Inc()
		if r.From.IsZero() {
			s.log.Warn("background "+name+" failed", "err", r.Err)
		} else {
			s.log.Warn("background "+name+" failed; the next run retries from its start", "from", r.From, "to", r.To, "err", r.Err)
		}
		return
	}
	s.background.WithLabelValues(name, "ok").Inc()
	if r.SaveErr != nil {
		s.log.Warn("background "+name+" done, but its progress was not saved; a server started meanwhile covers the range again",
			"from", r.From, "to", r.To, "err", r.SaveErr)
	}
	if !r.To.IsZero() {
		s.covered.WithLabelValues(name).Set(float64(r.To.UnixNano()) / 1e9)
		s.log.Debug("background "+name+" done", "from", r.From, "to", r.To)
	}
}

func (s *Server) registerLoopMetrics() {
	s.background = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tablets_background_runs_total",
		Help: "Runs of the fold, compaction, rollup, dirty-slice rollup (flagged) and retention loops, by result (a run of a long range counts once per slice)."}, []string{"task", "result"})
	s.covered = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tablets_background_covered_until_seconds",
		Help: "Unix time up to which the compaction and rollup loops have covered the database; for the fold, the arrival time up to which staged points are folded."}, []string{"task"})
}
