package server

import (
	"context"
	"sync"
	"sync/atomic"
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

// WarmReady bounds how long /-/ready waits for Run's warm-up: a warm-up that reads more
// than a minute (a large database, an account under load) goes on behind a server that
// answers, within the 2 minutes a soak or a deploy waits for it.
const WarmReady = time.Minute

// warming is Run's warm-up, as readiness sees it.
type warming struct {
	began   atomic.Int64 // Unix nanoseconds of the wall clock when Run began it; 0: never
	ended   chan struct{}
	endOnce sync.Once
}

func (w *warming) begin() { w.began.CompareAndSwap(0, time.Now().UnixNano()) }
func (w *warming) end()   { w.endOnce.Do(func() { close(w.ended) }) }

// warmingUp reports whether Run's warm-up of the caches (Options.WarmCache) goes on, begun
// less than WarmReady ago: /-/ready answers 503 meanwhile. A server whose Run has not begun
// is not warming up.
func (s *Server) warmingUp() bool {
	began := s.warming.began.Load()
	if began == 0 || time.Since(time.Unix(0, began)) >= WarmReady {
		return false
	}
	select {
	case <-s.warming.ended:
		return false
	default:
		return true
	}
}

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
				"bytes", rep.Bytes, "full", rep.Full, "metrics", rep.Metrics, "staged", rep.Staged,
				"histogram_series", rep.HistSeries, "histogram_samples", rep.HistSamples, "histogram_bytes", rep.HistBytes, "took", time.Since(started).Round(time.Millisecond))
		}
		return err
	})
	if ctx.Err() != nil {
		return // stopped: neither done nor failed
	}
	s.reportStep(schedule.Step{Task: TaskWarm, Took: time.Since(started)}, err)
}
