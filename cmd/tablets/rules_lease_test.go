package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// serve refuses a lease it cannot keep, before it starts anything.
func TestServeBadRuleLease(t *testing.T) {
	good := filepath.Join(t.TempDir(), "good.yml")
	require.NoError(t, os.WriteFile(good, []byte("groups:\n  - name: a\n    rules:\n      - record: x\n        expr: vector(1)\n"), 0o644))
	for _, args := range [][]string{
		{"--rule.lease", "1s"},
		{"--rule.lease", "-1s"},
		{"--rule.lease", "13h"},
		{"--rule.lease", "0", "--rule.lease-holder", "a"},
	} {
		r := cli(t, nil, "", append([]string{"serve", "--db", "rulesbad", "--listen", "127.0.0.1:0", "--rule.file", good}, args...)...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.line(t))
		require.Contains(t, r.line(t), "--rule.lease", args)
	}
}
