package main

import (
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/server/api"
)

// A query limit that is not positive is a usage error, before any request or listener.
func TestServeQueryLimitsChecked(t *testing.T) {
	for _, args := range [][]string{{"--query.max-samples", "0"}, {"--query.timeout", "-1s"}, {"--query.max-concurrency", "0"},
		{"--query.max-series-per-select", "-1"}} {
		r := cli(t, map[string]string{}, "", append([]string{"serve", "--db", "metrics", "--listen", "256.0.0.1:1"}, args...)...)
		assert.Equal(t, exitUsage, r.code, "%v", args)
		assert.Contains(t, r.stderr, "--query.max-samples, --query.timeout and --query.max-concurrency must be positive", "%v", args)
	}
}

// A results freshness that is not positive is a usage error, before any request or
// listener.
func TestServeResultsFreshnessChecked(t *testing.T) {
	for _, v := range []string{"0s", "-1m"} {
		r := cli(t, map[string]string{}, "", "serve", "--db", "metrics", "--listen", "256.0.0.1:1", "--query.results-freshness", v)
		assert.Equal(t, exitUsage, r.code, v)
		assert.Contains(t, r.stderr, "--query.results-freshness must be positive", v)
	}
}

// The flags default to Prometheus' limits and fill api.Options.
func TestServeQueryLimitFlags(t *testing.T) {
	cmd := &cobra.Command{}
	var q queryLimitFlags
	addQueryLimitFlags(cmd, &q)
	o, err := q.options(cmd)
	require.NoError(t, err)
	assert.Equal(t, &api.Options{MaxSamples: 50_000_000, Timeout: 2 * time.Minute, MaxConcurrency: 20}, o)
	require.NoError(t, cmd.Flags().Parse([]string{"--query.max-samples=1000", "--query.timeout=30s", "--query.max-concurrency=4", "--query.max-series-per-select=500"}))
	o, err = q.options(cmd)
	require.NoError(t, err)
	assert.Equal(t, &api.Options{MaxSamples: 1000, Timeout: 30 * time.Second, MaxConcurrency: 4, MaxSeriesPerSelect: 500}, o)
}

// A fold pace outside [0, 5m] is a usage error, before any request or listener.
func TestServeFoldPaceChecked(t *testing.T) {
	for _, v := range []string{"-1s", "5m1s"} {
		r := cli(t, map[string]string{}, "", "serve", "--db", "metrics", "--listen", "256.0.0.1:1", "--background.fold-pace", v)
		assert.Equal(t, exitUsage, r.code, v)
		assert.Contains(t, r.stderr, "--background.fold-pace "+v+" is not from 0 to 5m0s", v)
	}
}

// --background.rollup-pace outside [0, 5m] is refused before anything starts.
func TestServeRollupPaceChecked(t *testing.T) {
	for _, v := range []string{"-1s", "5m1s"} {
		r := cli(t, map[string]string{}, "", "serve", "--db", "metrics", "--listen", "256.0.0.1:1", "--background.rollup-pace", v)
		assert.Equal(t, exitUsage, r.code, v)
		assert.Contains(t, r.stderr, "--background.rollup-pace "+v+" is not from 0 to 5m0s", v)
	}
}

// A negative --query.log-slower-than is refused before anything starts.
func TestServeSlowQueryLogChecked(t *testing.T) {
	r := cli(t, map[string]string{}, "", "serve", "--db", "metrics", "--listen", "256.0.0.1:1", "--query.log-slower-than", "-1s")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--query.log-slower-than -1s is negative")
}
