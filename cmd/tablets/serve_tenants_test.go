//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// tenantStatus is the status of a query for tenant (none: "") as user.
func tenantStatus(t *testing.T, base, user, password, tenant string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/query?query=up", nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, password)
	if tenant != "" {
		req.Header.Set("X-Scope-OrgID", tenant)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// writeConfig replaces path's content as a config manager would.
func writeConfig(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// `tablets serve --config.file`: users act only for the tenants the file binds them to
// (403 otherwise); a new binding takes effect on SIGHUP, without a restart.
func TestServeTenantsSIGHUP(t *testing.T) {
	env, _ := account(t)
	dir := t.TempDir()
	web := filepath.Join(dir, "web.yml")
	var b strings.Builder
	b.WriteString("basic_auth_users:\n")
	for _, u := range []string{"alice", "bob"} {
		h, err := bcrypt.GenerateFromPassword([]byte(u+"pw"), bcrypt.MinCost)
		require.NoError(t, err)
		fmt.Fprintf(&b, "  %s: %q\n", u, h)
	}
	writeConfig(t, web, b.String())
	cfg := filepath.Join(dir, "tenants.yml")
	writeConfig(t, cfg, "tenants:\n  allow: [teama, teamb]\n  users:\n    alice: [teama]\n    bob: []\n")

	public, internal := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() {
		done <- tabletsCtx(t, ctx, env, "", "serve", "--db", "srvten"+fmt.Sprint(time.Now().UnixNano()%1e9),
			"--listen", public, "--listen-internal", internal, "--web.config.file", web, "--config.file", cfg,
			"--fold-interval", "-1s", "--rollup-every", "-1s", "--compact-every", "-1s", "--retain-every", "-1s")
	}()
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
	base := "http://" + public
	assert.Equal(t, http.StatusOK, tenantStatus(t, base, "alice", "alicepw", "teama"))
	assert.Equal(t, http.StatusForbidden, tenantStatus(t, base, "alice", "alicepw", "teamb"))
	assert.Equal(t, http.StatusForbidden, tenantStatus(t, base, "alice", "alicepw", ""), "alice is not bound to the default tenant")
	assert.Equal(t, http.StatusForbidden, tenantStatus(t, base, "bob", "bobpw", "teamb"))
	assert.Equal(t, http.StatusBadRequest, tenantStatus(t, base, "alice", "alicepw", "Team-A"))

	writeConfig(t, cfg, "tenants:\n  allow: [teama, teamb]\n  users:\n    alice: [teama]\n    bob: [teamb, default]\n")
	sighup(t)
	deadline = time.After(time.Minute)
	for tenantStatus(t, base, "bob", "bobpw", "teamb") != http.StatusOK {
		select {
		case <-deadline:
			t.Fatal("bob's new binding never took effect after SIGHUP")
		case <-time.After(20 * time.Millisecond): // polls the reload
		}
	}
	assert.Equal(t, http.StatusOK, tenantStatus(t, base, "bob", "bobpw", ""))
	assert.Equal(t, http.StatusForbidden, tenantStatus(t, base, "bob", "bobpw", "teama"))
	assert.Equal(t, http.StatusForbidden, tenantStatus(t, base, "alice", "alicepw", "teamb"))

	cancel()
	r := <-done
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "SIGHUP: the config file is loaded")
}

// A config file that does not load is a usage error at start; on a reload, it keeps the
// previous configuration and logs why.
func TestServeConfigFileChecked(t *testing.T) {
	bad := writeFile(t, "tenants.yml", "tenants:\n  alow: [teama]\n")
	r := cli(t, map[string]string{}, "", "serve", "--db", "metrics", "--config.file", bad)
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--config.file")
	assert.Contains(t, r.stderr, "alow")

	path := writeFile(t, "good.yml", "tenants:\n  allow: [teama]\nlimits:\n  ingestion_rate: 10\n")
	c, err := loadServeConfig(path, queryLimitFlags{maxSamples: 7, maxConcurrency: 3, timeout: time.Minute}, rulerFlags{}, "")
	require.NoError(t, err)
	first := c.Load()
	require.True(t, first.Allowed("teama"))
	require.Equal(t, 7, first.For("teama").MaxSamplesPerQuery, "the flags are the defaults of the limits")
	require.EqualValues(t, 10, first.For("teama").IngestionRate)

	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	writeConfig(t, path, "tenants:\n  allow: [Team-B]\n")
	c.reload(logger)
	require.Same(t, first, c.Load(), "a file that does not load replaced the configuration")
	require.Contains(t, log.String(), "does not load; the previous configuration stays")

	writeConfig(t, path, "tenants:\n  allow: [teamb]\n")
	c.reload(logger)
	require.True(t, c.Load().Allowed("teamb"))
	require.False(t, c.Load().Allowed("teama"))

	// Users bound to tenants need a web config that checks their passwords.
	users := writeFile(t, "users.yml", "tenants:\n  allow: [teama]\n  users:\n    alice: [teama]\n")
	tlsOnly := writeFile(t, "web.yml", "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n")
	for _, web := range []string{"", tlsOnly} {
		_, err := loadServeConfig(users, queryLimitFlags{maxSamples: 7, maxConcurrency: 3, timeout: time.Minute}, rulerFlags{}, web)
		require.ErrorContains(t, err, "passwords", web)
	}
	r = cli(t, map[string]string{}, "", "serve", "--db", "metrics", "--config.file", users)
	assert.Equal(t, exitUsage, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no --web.config.file")

	// Without a file: the default tenant alone, with the flags' limits.
	none, err := loadServeConfig("", queryLimitFlags{maxSamples: 7, maxConcurrency: 3, timeout: time.Minute}, rulerFlags{}, "")
	require.NoError(t, err)
	require.False(t, none.Load().Allowed("teama"))
	require.Equal(t, 7, none.Load().For("default").MaxSamplesPerQuery)
}
