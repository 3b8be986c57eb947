package server

import (
	"context"
	"time"

	"github.com/seed71701133/tablets/internal/maintain/schedule"
)

// TaskWarm is the name of the warm-up of the caches at Run's start (warm), as the metrics
// and logs of the background tasks name it.
const TaskWarm = "warm"

// DefaultWarmCache is how far back Run's warm-up reads by default (Options.WarmCache):
// Grafana's default range, the last 6 hours, and the ranges of its panels' rates before
// it, whose first runs then read only what changed since (the raw cache takes at most half
// its bound all the same).
const DefaultWarmCache = 6*time.Hour + 15*time.Minute

// warm warms the database up once, when Run starts (tsdb.DB.Warm): the present period's
// index registrations and label sets, and the float points of the last WarmCache into the
// raw cache with one scan of the raw tables by ranges of keys. A server just started (a
// deploy, a restart, one more behind a front) takes its first writes without reading the
// index for them, and answers its first dashboards from the caches instead of reading each
// panel's series from the account. It is a background job (its turn under Jobs, its requests a background share), counted
// and logged as the loops' runs are; a failed one is not retried (the queries read what it
// did not cache).
func (s *Server) warm(ctx context.Context) {
	if s.opts.WarmCache < 0 {
		return
	}
	from := s.opts.Now().Add(-s.opts.WarmCache)
	started := time.Now()
	err := s.doJob(ctx, TaskWarm, func(ctx context.Context) error {
		rep, err := s.db.Warm(ctx, from)
		if err == nil {
			s.log.Info("warmed the caches up", "from", from, "series", rep.Series, "points", rep.Points,
				"bytes", rep.Bytes, "full", rep.Full, "metrics", rep.Metrics, "staged", rep.Staged, "took", time.Since(started).Round(time.Millisecond))
		}
		return err
	})
	if ctx.Err() != nil {
		return // stopped: neither done nor failed
	}
	s.reportStep(schedule.Step{Task: TaskWarm, Took: time.Since(started)}, err)
}
