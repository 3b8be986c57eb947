package rules

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/promrun"
)

// testFiles are the unit test files of testdata, whose names say whether they pass, and
// those of the project's own alerts (docs/rules), which pass.
func testFiles(t *testing.T) []string {
	files, err := filepath.Glob("testdata/*.test.yml")
	require.NoError(t, err)
	own, err := filepath.Glob("../../docs/rules/*.test.yml")
	require.NoError(t, err)
	require.NotEmpty(t, own)
	return append(files, own...)
}

func shouldPass(file string) bool {
	return strings.HasPrefix(filepath.Base(file), "pass_") || strings.Contains(file, "docs/rules/")
}

func TestUnitTests(t *testing.T) {
	for _, f := range testFiles(t) {
		var out, errOut bytes.Buffer
		ok := Test(&out, &errOut, nil, f)
		want := shouldPass(f)
		require.Equal(t, want, ok, "%s:\n%s%s", f, out.String(), errOut.String())
		require.Contains(t, out.String(), "Unit Testing:  "+f)
		if ok {
			require.Contains(t, out.String(), "  SUCCESS")
		} else {
			require.Contains(t, errOut.String(), "  FAILED:")
		}
	}
	var out, errOut bytes.Buffer
	require.False(t, Test(&out, &errOut, nil, "testdata/fail_annotation.test.yml"))
	require.Contains(t, errOut.String(), "alertname: HighErrorRate, time: 10m")
	require.Contains(t, errOut.String(), `description="50% of requests fail (eu1)"`)
	errOut.Reset()
	require.False(t, Test(&out, &errOut, nil, "testdata/fail_bad_rule_file.test.yml"))
	require.Contains(t, errOut.String(), "bad.yml")
	// query_offset (Prometheus 2.53+): the value 2m before each evaluation.
	require.True(t, Test(&out, &errOut, nil, "testdata/prom3/pass_query_offset.test.yml"), errOut.String())
	// --run: only the groups it matches.
	require.True(t, Test(&out, &errOut, &TestOptions{Run: regexp.MustCompile("limit")}, "testdata/pass_notation.test.yml"))
}

// TestUnitTestsAsPromtool runs each test file with `promtool test rules` (Prometheus 2.42,
// Debian's package) too: both pass or both fail. And `promtool check rules` against Check,
// on the rule files.
func TestUnitTestsAsPromtool(t *testing.T) {
	bin := promrun.Need(t) // skips under -short; fails if Prometheus cannot be installed
	for _, f := range testFiles(t) {
		var out, errOut bytes.Buffer
		ours := Test(&out, &errOut, nil, f)
		theirs, err := exec.Command(bin.Promtool, "test", "rules", f).CombinedOutput()
		require.Equal(t, exitOK(t, err), ours, "%s: promtool says\n%s\ntablets says\n%s%s", f, theirs, out.String(), errOut.String())
	}
	rulesFiles, err := filepath.Glob("testdata/rules/*.yml")
	require.NoError(t, err)
	rulesFiles = append(rulesFiles, "../../docs/rules/tablets-alerts.yml")
	for _, f := range rulesFiles {
		var out, errOut bytes.Buffer
		ours := Check(&out, &errOut, f)
		theirs, err := exec.Command(bin.Promtool, "check", "rules", f).CombinedOutput()
		require.Equal(t, exitOK(t, err), ours, "%s: promtool says\n%s\ntablets says\n%s%s", f, theirs, out.String(), errOut.String())
		require.Equal(t, !strings.Contains(f, "bad"), ours, f)
	}
}

// exitOK reads a command's outcome: true for exit 0, false for exit 1; anything else fails.
func exitOK(t *testing.T, err error) bool {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false
	}
	t.Fatalf("promtool: %v", err)
	return false
}
