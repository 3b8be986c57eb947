//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rulerGet reads path of a server as user ci for tenant teama.
func rulerGet(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Scope-OrgID", "teama")
	req.SetBasicAuth("ci", "secret")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestRulesSync runs `tablets serve` (basic auth, tenants) and syncs a directory of rule
// files into a tenant with `tablets rules sync`: groups created, then updated, deleted and
// added after the files changed (a dry run first, which changes nothing), the namespaces
// of no file left alone, a bad file refused before anything is sent, a wrong password
// refused.
func TestRulesSync(t *testing.T) {
	prevMemoryLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prevMemoryLimit) })
	env, _ := account(t)
	dir := t.TempDir()
	web := filepath.Join(dir, "web.yml")
	webUsers(t, web, "ci", "secret")
	cfg := writeFile(t, "tenants.yml", "tenants:\n  allow: [teama]\n  users:\n    ci: [teama]\n")
	pw := writeFile(t, "pw.txt", "secret\n")
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	db := "rsync" + fmt.Sprint(time.Now().UnixNano()%1e9)
	go func() {
		done <- tabletsCtx(t, ctx, env, "", "serve", "--db", db, "--listen", addr, "--web.config.file", web,
			"--config.file", cfg, "--memory-limit", "3GiB",
			"--fold-interval", "-1s", "--rollup-every", "-1s", "--compact-every", "-1s", "--retain-every", "-1s")
	}()
	defer func() { cancel(); <-done }()
	api := "http://" + addr + "/prometheus/config/v1/rules"
	deadline := time.After(2 * time.Minute)
	for status(t, "http://"+addr+"/-/ready", "ci", "secret") != http.StatusOK {
		select {
		case r := <-done:
			t.Fatalf("serve ended: %d %s", r.code, r.stderr)
		case <-deadline:
			t.Fatal("serve never answered /-/ready 200")
		case <-time.After(50 * time.Millisecond):
		}
	}
	// A namespace set by other means, which the sync leaves alone.
	code, body := rulerGet(t, http.MethodPost, api+"/manual", "name: m\nrules:\n  - record: m:x\n    expr: vector(1)\n")
	require.Equal(t, http.StatusAccepted, code, body)

	rulesDir := filepath.Join(dir, "rules")
	require.NoError(t, os.Mkdir(rulesDir, 0o755))
	put := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(rulesDir, name), []byte(content), 0o644))
	}
	put("alerts.yml", `groups:
  - name: a
    rules:
      - alert: Down
        expr: up == 0
        for: 5m
  - name: b
    rules:
      - record: b:x
        expr: sum(up)
`)
	put("team.yaml", `namespace: team/a
groups:
  - name: c
    interval: 30s
    rules:
      - record: c:x
        expr: sum by (job) (up)
`)
	put("README.md", "not a rule file")
	sync := func(extra ...string) result {
		args := append([]string{"rules", "sync", "--address", "http://" + addr, "--tenant", "teama", "--user", "ci", "--password-file", pw}, extra...)
		return cli(t, env, "", append(args, rulesDir)...)
	}
	r := sync()
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "+ alerts: a (create)\n")
	require.Contains(t, r.stdout, "+ alerts: b (create)\n")
	require.Contains(t, r.stdout, "+ team/a: c (create)\n")
	require.Contains(t, r.stdout, "synced: 3 created, 0 updated, 0 deleted, 0 unchanged\n")
	code, list := rulerGet(t, http.MethodGet, api, "")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{"alerts:\n", "team/a:\n", "manual:\n", "alert: Down", "record: c:x", "interval: 30s"} {
		require.Contains(t, list, want)
	}
	r = sync()
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "synced: 0 created, 0 updated, 0 deleted, 3 unchanged\n", r.stdout)

	// a changed, b gone, d new: a dry run prints it, with the YAML lines, and changes nothing.
	put("alerts.yml", `groups:
  - name: a
    rules:
      - alert: Down
        expr: up == 0
        for: 10m
  - name: d
    rules:
      - record: d:x
        expr: count(up)
`)
	r = sync("--dry-run")
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, want := range []string{"~ alerts: a (update)\n", "    -     for: 5m\n", "    +     for: 10m\n", "- alerts: b (delete)\n",
		"    - name: b\n", "+ alerts: d (create)\n", "    + name: d\n",
		"dry run: 1 to create, 1 to update, 1 to delete, 1 unchanged; nothing changed\n"} {
		require.Contains(t, r.stdout, want)
	}
	code, again := rulerGet(t, http.MethodGet, api, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, list, again, "the dry run changed nothing")
	r = sync()
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "synced: 1 created, 1 updated, 1 deleted, 1 unchanged\n")
	code, body = rulerGet(t, http.MethodGet, api+"/alerts", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "for: 10m")
	require.Contains(t, body, "name: d")
	require.NotContains(t, body, "name: b")
	code, body = rulerGet(t, http.MethodGet, api+"/manual/m", "")
	require.Equal(t, http.StatusOK, code, "a namespace of no file stays")

	// A bad rule: nothing is sent; the error names the file and the rule.
	put("bad.yml", "groups:\n  - name: e\n    rules:\n      - record: e:x\n        expr: sum(\n")
	code, before := rulerGet(t, http.MethodGet, api, "")
	require.Equal(t, http.StatusOK, code)
	r = sync()
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "bad.yml")
	require.Contains(t, r.stderr, `group "e", rule 1, "e:x"`)
	code, after := rulerGet(t, http.MethodGet, api, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, before, after)
	require.NoError(t, os.Remove(filepath.Join(rulesDir, "bad.yml")))

	// Credentials and flags.
	wrong := writeFile(t, "wrong.txt", "nope")
	r = cli(t, env, "", "rules", "sync", "--address", "http://"+addr, "--tenant", "teama", "--user", "ci", "--password-file", wrong, rulesDir)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "401")
	r = cli(t, map[string]string{envPassword: "secret"}, "", "rules", "sync", "--address", "http://"+addr, "--tenant", "teama", "--user", "ci", "--dry-run", rulesDir)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "dry run: 0 to create, 0 to update, 0 to delete, 3 unchanged")
	r = cli(t, env, "", "rules", "sync", "--address", "tablets:9201", rulesDir)
	require.Equal(t, exitUsage, r.code)
	r = cli(t, env, "", "rules", "sync")
	require.Equal(t, exitUsage, r.code)
}
