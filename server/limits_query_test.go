package server

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/server/api"
	"github.com/seed71701133/tablets/server/limits"
)

// Each query limit of the tenant, where not zero, replaces the server's option, and only the
// tenant's own override applies.
func TestQueryLimitsNow(t *testing.T) {
	base := api.Options{MaxSamples: 1000, MaxConcurrency: 4, MaxSeriesPerSelect: 0, Timeout: time.Minute}
	var cfg *limits.Config
	s := &Server{opts: Options{Tenant: "teama", Limits: func() *limits.Config { return cfg }}, queries: queryAPIs{base: base}}
	server := queryLimits{maxSamples: 1000, maxConcurrency: 4, timeout: time.Minute}
	require.Equal(t, server, s.queryLimitsNow(), "no configuration")
	cfg = &limits.Config{Limits: limits.Limits{MaxSamplesPerQuery: 7},
		Overrides: map[string]limits.Limits{"teamb": {MaxConcurrentQueries: 9}}}
	require.Equal(t, queryLimits{maxSamples: 7, maxConcurrency: 4, timeout: time.Minute}, s.queryLimitsNow())
	cfg.Overrides["teama"] = limits.Limits{MaxSamplesPerQuery: 5, MaxConcurrentQueries: 2, MaxSeriesPerSelect: 3,
		QueryTimeout: model.Duration(10 * time.Second)}
	require.Equal(t, queryLimits{maxSamples: 5, maxConcurrency: 2, maxSeriesPerSelect: 3, timeout: 10 * time.Second}, s.queryLimitsNow())
	s.opts.Limits = nil
	require.Equal(t, server, s.queryLimitsNow(), "no Limits")
}
