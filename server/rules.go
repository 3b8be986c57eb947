package server

import (
	"context"
	"time"

	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	promrules "github.com/prometheus/prometheus/rules"

	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/server/internal/engineselect"
	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/server/remote"
	"github.com/seed71701133/tablets/server/rules"
)

// newRules makes the manager of the server's rules: its queries run on the query API's
// engine of the limits in force (as Prometheus runs its rules on its API's engine), the
// rules of a group's evaluation sharing their reads, and its results go through the
// remote-write handler.
func (s *Server) newRules(o rules.Options) (*rules.Manager, error) {
	shared := rules.NewSharedReads()
	o.SharedReads = shared
	o.QueryFunc = func(ctx context.Context, q string, t time.Time) (promql.Vector, error) {
		api, err := s.queryAPI()
		if err != nil {
			return nil, err
		}
		// The engine's evaluation (engineselect): a rule's instant selectors read each
		// series' latest sample.
		return promrules.EngineQueryFunc(api.api.Engine(), shared.Queryable(api.api.Queryable()))(engineselect.With(ctx), q, t)
	}
	o.Queryable = s.queryable
	o.Writer = ingestWriter{s.write}
	s.withLeaseTable(&o)
	o.Registerer = s.registry
	o.Logger = s.log.With("component", "rules")
	o.Tenant = ""
	if s.opts.Tenant != limits.DefaultTenant {
		o.Tenant = s.opts.Tenant
	}
	return rules.New(&o)
}

// ingestWriter writes rule results as remote writes are written: in the class of requests
// to the account that writes are (reqlimit.Ingest), which never wait behind queries.
type ingestWriter struct{ w *remote.WriteHandler }

func (w ingestWriter) WriteTimeSeries(ctx context.Context, ts []prompb.TimeSeries) (remote.Written, error) {
	return w.w.WriteTimeSeries(reqlimit.Ingest(ctx), ts)
}

// Rules is the manager of the server's rules (nil: it evaluates none).
func (s *Server) Rules() *rules.Manager { return s.rules }
