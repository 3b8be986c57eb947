package rules

import (
	"context"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// Stored groups are evaluated beside the rule files, their namespace as their file; a
// change replaces them at once while the manager runs, and a namespace named as a file
// leaves the file's groups in force.
func TestManagerStoredGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		file := writeFile(t, dir, "r.yml", testRules)
		store, am, reg := newMemStore(), &fakeAlertmanager{}, prometheus.NewRegistry()
		m := testManager(t, store, am, reg, filepath.Join(dir, "*.yml"))
		feed(store, time.Now(), 100*time.Second, func(time.Duration) float64 { return 1 })
		stored := func(doc string) StoredGroup {
			g, err := ParseGroup([]byte(doc))
			require.NoError(t, err)
			return StoredGroup{Namespace: "team/a", Group: g}
		}
		// Before Run: kept, and loaded when it starts.
		require.NoError(t, m.SetStored([]StoredGroup{stored("name: s\ninterval: 10s\nrules:\n  - record: s:x\n    expr: x * 3\n")}))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		defer func() {
			cancel()
			require.NoError(t, <-done)
		}()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		files := map[string]string{}
		for _, g := range m.RuleGroups(ctx) {
			files[g.Name] = g.File
		}
		require.Equal(t, map[string]string{"g": file, "s": "team/a"}, files)
		require.NotEmpty(t, store.samples(labels.MustNewMatcher(labels.MatchEqual, "__name__", "s:x")))
		require.Greater(t, testutil.ToFloat64(m.metrics.EvalTotal.WithLabelValues("team/a;s")), 0.0)

		// Replaced while running: the new group, at once.
		require.NoError(t, m.SetStored([]StoredGroup{stored("name: t\ninterval: 10s\nrules:\n  - record: t:x\n    expr: x * 4\n")}))
		names := []string{}
		for _, g := range m.RuleGroups(ctx) {
			names = append(names, g.File+";"+g.Name)
		}
		require.Equal(t, []string{file + ";g", "team/a;t"}, names)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		require.NotEmpty(t, store.samples(labels.MustNewMatcher(labels.MatchEqual, "__name__", "t:x")))

		// A namespace named as the rule file: the file's group stays, the error says why.
		shadow := stored("name: u\nrules:\n  - record: u:x\n    expr: x\n")
		shadow.Namespace = file
		err := m.SetStored([]StoredGroup{shadow})
		require.Error(t, err)
		require.Contains(t, err.Error(), "named as rule files")
		names = names[:0]
		for _, g := range m.RuleGroups(ctx) {
			names = append(names, g.File+";"+g.Name)
		}
		require.Equal(t, []string{file + ";g"}, names)

		// None stored: the files' groups alone.
		require.NoError(t, m.SetStored(nil))
		require.Len(t, m.RuleGroups(ctx), 1)
	})
}
