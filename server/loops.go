package server

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/tsdb"
)

// scheduleOptions are when Run's tasks run, for the server's options o (their defaults
// applied): a negative interval, never.
func scheduleOptions(o Options) schedule.Options {
	return schedule.Options{FoldEvery: o.FoldEvery, CompactEvery: o.CompactEvery, CompactPhase: o.CompactPhase, CompactCatchUp: o.CompactCatchUp,
		RollupEvery: o.RollupEvery, RollupCatchUp: o.RollupCatchUp, RollupGrain: o.RollupGrain, RollupDelay: o.RollupDelay, RetainEvery: o.RetainEvery, Now: o.Now}
}

// runLoops runs tasks until ctx is done (the scheduler's Run), each call of a step in its
// turn under the options' Jobs, counting and logging their calls.
func (s *Server) runLoops(ctx context.Context, tasks []schedule.Task) {
	if len(tasks) == 0 {
		// Every loop off (a backfill's server): nothing to run or report until ctx ends.
		// The scheduler would return at once, which is no stop to log.
		<-ctx.Done()
		return
	}
	err := schedule.Run(ctx, tasks, &schedule.Hooks{Do: s.doJob, Report: s.reportStep})
	if ctx.Err() == nil {
		s.log.Error("background tasks stopped", "err", err) // options New let through: a bug
	}
}

// doJob makes a call of task's step a background job: its requests to the account take at
// most a share of the account's requests in flight, so that writes and queries never queue
// behind a catch-up (reqlimit), and it waits for its turn under the options' Jobs (a fold
// ahead of the others).
//
// Without the account's background lease (Options.BackgroundHeld), the call is not made: it
// is another server's, and counts as busy.
func (s *Server) doJob(ctx context.Context, task string, call func(context.Context) error) error {
	if held := s.opts.BackgroundHeld; held != nil && !held() {
		return tsdb.ErrTaskBusy
	}
	ctx = reqlimit.WithTask(reqlimit.Background(ctx), task)
	do := s.opts.Jobs.do
	if task == schedule.Fold {
		do = s.opts.Jobs.doFirst
	}
	return do(ctx, func() error { return call(ctx) })
}

// reportStep counts and logs a call of a task's step; a fold's also sets the fold's
// covered-until gauge to the arrival time folded through.
func (s *Server) reportStep(step schedule.Step, err error) {
	name := step.Task
	switch {
	case name == schedule.Fold && step.FoldBusy:
		s.log.Debug("another process is folding the database")
	case name == schedule.Fold:
		if r := step.Fold; r.Entities > 0 {
			s.log.Info("folded staged points", "entities", r.Entities, "points", r.Points, "series", r.Series, "through", r.Through)
		}
		if !step.Fold.Through.IsZero() {
			s.covered.WithLabelValues(name).Set(float64(step.Fold.Through.UnixNano()) / 1e9)
		}
	case name == schedule.Flagged && step.Flagged > 0:
		s.log.Info("rolled up the slices late writes marked dirty", "markers", step.Flagged)
	case name == schedule.Retain && len(step.Dropped) > 0:
		s.log.Info("retention dropped tables", "tables", step.Dropped)
	}
	if errors.Is(err, tsdb.ErrTaskBusy) {
		// Another server holds the task's lease: it covers the range, and saves how far it
		// got, which this server's next run starts from.
		s.background.WithLabelValues(name, "busy").Inc()
		s.log.Debug("another process is doing the background "+name, "from", step.From, "to", step.To)
		return
	}
	if err != nil {
		s.background.WithLabelValues(name, "error").Inc()
		if step.From.IsZero() {
			s.log.Warn("background "+name+" failed", "err", err)
		} else {
			s.log.Warn("background "+name+" failed; the next run retries from its start", "from", step.From, "to", step.To, "err", err)
		}
		return
	}
	s.background.WithLabelValues(name, "ok").Inc()
	if step.SaveErr != nil {
		s.log.Warn("background "+name+" done, but its progress was not saved; a server started meanwhile covers the range again",
			"from", step.From, "to", step.To, "err", step.SaveErr)
	}
	if !step.To.IsZero() {
		s.covered.WithLabelValues(name).Set(float64(step.To.UnixNano()) / 1e9)
		s.log.Debug("background "+name+" done", "from", step.From, "to", step.To)
	}
}

func (s *Server) registerLoopMetrics() {
	s.background = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tablets_background_runs_total",
		Help: "Runs of the fold, compaction, rollup, dirty-slice rollup (flagged) and retention loops, and of the raw cache's warm-up at start (warm), by result: ok, error, or busy (another server holds the compaction, rollup or flagged lease; a run of a long range counts once per slice)."}, []string{"task", "result"})
	s.covered = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tablets_background_covered_until_seconds",
		Help: "Unix time up to which the compaction and rollup loops have covered the database; for the fold, the arrival time up to which staged points are folded."}, []string{"task"})
}
