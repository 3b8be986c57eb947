//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// A web config that does not load is a usage error, before any request or listener.
func TestServeWebConfigChecked(t *testing.T) {
	bad := writeFile(t, "web.yml", "basic_auth_users:\n  alice: not-a-hash\n")
	for _, file := range []string{bad, filepath.Join(t.TempDir(), "none.yml")} {
		r := cli(t, map[string]string{}, "", "serve", "--db", "metrics", "--web.config.file", file)
		assert.Equal(t, exitUsage, r.code, "%s: %s", file, r.stderr)
		assert.Contains(t, r.stderr, "--web.config.file", file)
	}
}

// freeAddr returns a loopback address no one listens on (as far as one can tell).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func webUsers(t *testing.T, path, user, password string) {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	require.NoError(t, err)
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, fmt.Appendf(nil, "basic_auth_users:\n  %s: %q\n", user, h), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func status(t *testing.T, url, user, password string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// `tablets serve` with --web.config.file (basic auth) and --listen-internal: the probes are
// on the internal address only, without credentials; the API needs the password; a changed
// password takes effect without a restart, and the server goes on after a SIGHUP
// (TestServeTenantsSIGHUP checks the server's handler reloads); SIGINT (the context) ends it
// cleanly.
func TestServeAuthInternalAndSIGHUP(t *testing.T) {
	prevMemoryLimit := debug.SetMemoryLimit(-1)
	env, _ := account(t)
	cfg := filepath.Join(t.TempDir(), "web.yml")
	webUsers(t, cfg, "grafana", "one")
	public, internal := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() {
		done <- tabletsCtx(t, ctx, env, "", "serve", "--db", "srvauth"+fmt.Sprint(time.Now().UnixNano()%1e9),
			"--listen", public, "--listen-internal", internal, "--web.config.file", cfg, "--memory-limit", "3GiB",
			"--fold-interval", "-1s", "--rollup-every", "-1s", "--compact-every", "-1s", "--retain-every", "-1s")
	}()
	t.Cleanup(func() { debug.SetMemoryLimit(prevMemoryLimit) })
	ready := "http://" + internal + "/-/ready"
	deadline := time.After(2 * time.Minute)
	for status(t, ready, "", "") != http.StatusOK {
		select {
		case r := <-done:
			t.Fatalf("serve ended: %d %s", r.code, r.stderr)
		case <-deadline:
			t.Fatal("the internal listener never answered /-/ready 200")
		case <-time.After(50 * time.Millisecond): // polls the server starting
		}
	}
	api := "http://" + public + "/api/v1/status/buildinfo"
	assert.Equal(t, http.StatusUnauthorized, status(t, api, "", ""))
	assert.Equal(t, http.StatusUnauthorized, status(t, api, "grafana", "two"))
	assert.Equal(t, http.StatusOK, status(t, api, "grafana", "one"))
	assert.Equal(t, http.StatusNotFound, status(t, "http://"+public+"/metrics", "grafana", "one"))
	assert.Equal(t, http.StatusOK, status(t, "http://"+internal+"/metrics", "", ""))
	metrics, err := http.Get("http://" + internal + "/metrics")
	require.NoError(t, err)
	exposition, err := io.ReadAll(metrics.Body)
	metrics.Body.Close()
	require.NoError(t, err)
	// The account's requests in flight are bounded (--account.max-requests-in-flight); the
	// gauges say how many are in flight and waiting, for the whole server.
	assert.Regexp(t, `(?m)^tablets_account_requests_in_flight [0-9]+$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_account_requests_waiting [0-9]+$`, string(exposition))
	// The connections: the account's (Open's requests opened at least one, and it is kept
	// for the next), and the internal listener's (this scrape's, open while it is answered).
	assert.Regexp(t, `(?m)^tablets_account_connections [1-9][0-9]*$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_account_connections_opened_total [1-9][0-9]*$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_http_connections\{listener="internal"\} [1-9][0-9]*$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_http_connections_accepted_total\{listener="public"\} [1-9][0-9]*$`, string(exposition))
	// Which class took the account's time: Open's reads are a query's.
	assert.Regexp(t, `(?m)^tablets_account_class_requests_total\{class="query"\} [1-9][0-9]*$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_account_class_requests_total\{class="background"\} [0-9]+$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_account_class_slot_seconds_total\{class="query"\} [0-9.e+-]+$`, string(exposition))
	// Open reads the catalog's entities by their keys: point reads, in the histogram.
	assert.Regexp(t, `(?m)^tablets_account_point_read_seconds_bucket\{le="0.001"\} [0-9]+$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_account_point_read_seconds_count [1-9][0-9]*$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_account_point_read_phase_seconds_count\{phase="answer"\} [1-9][0-9]*$`, string(exposition))
	// And which tables: Open reads its catalog (a query's: no background task).
	assert.Regexp(t, `(?m)^tablets_account_table_requests_total\{class="query",table="catalog",task=""\} [1-9][0-9]*$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_account_table_received_bytes_total\{class="query",table="catalog",task=""\} [1-9][0-9.e+]*$`, string(exposition))
	// So are the background jobs of all tenants (--background.max-jobs).
	assert.Regexp(t, `(?m)^tablets_background_jobs_running [0-9]+$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_background_jobs_waiting [0-9]+$`, string(exposition))
	// And what the tenants' last folds wrote, kept for their raw caches to take in.
	assert.Regexp(t, `(?m)^tablets_folds_kept_bytes [0-9][0-9.e+]*$`, string(exposition))
	// And the staging pages read at once (--staging.max-read-bytes). A gauge of a million
	// or more is written as a float (8.388608e+06: a page's budget taken at the scrape).
	assert.Regexp(t, `(?m)^tablets_staging_read_bytes_in_use [0-9][0-9.e+]*$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_staging_reads_waiting [0-9]+$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_staging_fold_bytes_in_use [0-9][0-9.e+]*$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_staging_folds_waiting [0-9]+$`, string(exposition))
	// Each read cache's hits, misses, bytes and entries (--*.cache-bytes).
	for _, c := range []string{"staging_cache", "tier_block_cache", "raw_cache", "index_cache"} {
		for _, m := range []string{"hits_total", "misses_total", "bytes", "entries"} {
			assert.Regexp(t, `(?m)^tablets_`+c+`_`+m+` [0-9][0-9.e+]*$`, string(exposition))
		}
	}
	assert.Regexp(t, `(?m)^tablets_raw_cache_folds_taken_in_total [0-9]+$`, string(exposition))
	for _, reason := range []string{"log", "receipt", "column", "overlap"} {
		assert.Regexp(t, `(?m)^tablets_raw_cache_folds_missed_total\{reason="`+reason+`"\} [0-9]+$`, string(exposition))
	}
	assert.Regexp(t, `(?m)^tablets_raw_cache_reads_shared_total [0-9]+$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_raw_cache_spilled_total [0-9]+$`, string(exposition))
	assert.Regexp(t, `(?m)^tablets_staging_cache_fetches_shared_total [0-9]+$`, string(exposition))
	// The live heap, beside Go's memstats, for the soak to tell a leak from a burst.
	assert.Regexp(t, `(?m)^go_gc_heap_live_bytes [0-9.e+]+$`, string(exposition))
	assert.Regexp(t, `(?m)^go_memstats_heap_inuse_bytes [0-9.e+]+$`, string(exposition))
	// --memory-limit is the runtime's.
	assert.Regexp(t, `(?m)^go_gc_gomemlimit_bytes 3\.221225472e\+09$`, string(exposition))

	webUsers(t, cfg, "grafana", "two")
	sighup(t)
	assert.Equal(t, http.StatusUnauthorized, status(t, api, "grafana", "one"))
	assert.Equal(t, http.StatusOK, status(t, api, "grafana", "two"))
	select {
	case r := <-done:
		t.Fatalf("serve ended after SIGHUP: %d %s", r.code, r.stderr)
	default:
	}

	cancel()
	r := <-done
	assert.Equal(t, 0, r.code, r.stderr)
}

// sighup sends this process a SIGHUP, as an operator would the server, and returns once the
// runtime has delivered it. The kernel hands a signal sent to the process to a thread that
// may run only later; were the server's handler stopped by then (the test ended), Go's
// default for SIGHUP would end the test binary (CI saw "signal: hangup"). The test's own
// channel receiving it is that delivery; the server's handler, registered at the time,
// receives it too (TestServeTenantsSIGHUP checks its effect).
func sighup(t *testing.T) {
	t.Helper()
	delivered := make(chan os.Signal, 1)
	signal.Notify(delivered, syscall.SIGHUP)
	defer signal.Stop(delivered)
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	select {
	case <-delivered:
	case <-time.After(time.Minute):
		t.Fatal("the SIGHUP was not delivered in a minute")
	}
}
