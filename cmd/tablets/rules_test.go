package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const testdata = "../../server/rules/testdata/"

func TestRulesCheckAndTest(t *testing.T) {
	r := cli(t, nil, "", "rules", "check", testdata+"rules/alerts.yml", testdata+"rules/limit.yml")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "Checking "+testdata+"rules/alerts.yml\n  SUCCESS: 3 rules found")
	r = cli(t, nil, "", "rules", "check", testdata+"rules/alerts.yml", testdata+"rules/bad.yml")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "  FAILED:\n")
	require.Contains(t, r.stderr, "bad.yml")

	r = cli(t, nil, "", "rules", "test", testdata+"pass_alerts.test.yml", testdata+"pass_notation.test.yml")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, 2, strings.Count(r.stdout, "  SUCCESS"))
	r = cli(t, nil, "", "rules", "test", testdata+"fail_value.test.yml")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, `expr: "job:http_requests:rate5m", time: 10m`)
	r = cli(t, nil, "", "rules", "test", "--run", "limit", testdata+"pass_notation.test.yml")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = cli(t, nil, "", "rules", "test", "--run", "(", testdata+"pass_notation.test.yml")
	require.Equal(t, exitUsage, r.code)
	r = cli(t, nil, "", "rules", "check")
	require.Equal(t, exitUsage, r.code)
}

// serve refuses a bad rule file before it starts anything, naming it.
func TestServeBadRuleFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yml")
	require.NoError(t, os.WriteFile(bad, []byte("groups:\n  - name: a\n    rules:\n      - record: x\n        expr: 'sum('\n"), 0o644))
	r := cli(t, nil, "", "serve", "--db", "rulesbad", "--listen", "127.0.0.1:0", "--rule.file", bad)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.line(t), bad)
	r = cli(t, nil, "", "serve", "--db", "rulesbad", "--listen", "127.0.0.1:0", "--alertmanager.url", "http://am:9093", "--ruler.enable-api=false")
	require.Equal(t, exitUsage, r.code)
	r = cli(t, nil, "", "serve", "--db", "rulesbad", "--listen", "127.0.0.1:0", "--rule.file", filepath.Join(dir, "*.yml"), "--rule.external-label", "nope")
	require.Equal(t, exitUsage, r.code)
	// An alerting section that is not one, or none.
	prom := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(prom, []byte("alerting:\n  alertmanagers:\n    - dns_sd_configs: [{names: [am]}]\n"), 0o644))
	good := filepath.Join(dir, "good.yml")
	require.NoError(t, os.WriteFile(good, []byte("groups: []\n"), 0o644))
	r = cli(t, nil, "", "serve", "--db", "rulesbad", "--listen", "127.0.0.1:0", "--rule.file", good, "--alerting.config.file", prom)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.line(t), prom)
	r = cli(t, nil, "", "serve", "--db", "rulesbad", "--listen", "127.0.0.1:0", "--alerting.config.file", prom, "--ruler.enable-api=false")
	require.Equal(t, exitUsage, r.code)
}
