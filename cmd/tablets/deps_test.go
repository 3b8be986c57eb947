package main

import (
	"bytes"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/seed71701133/tablets"

// forbidden reports why the command or library must not link pkg ("" if it may). Test-only
// code: the testing package (and testing/...), testify, and the test kit internal/testkit/...
// (its Azurite harness too: the Azurite runner the demo uses is internal/azurite/runner).
type forbidden func(pkg string) string

func noTesting(pkg string) string {
	if pkg == "testing" || strings.HasPrefix(pkg, "testing/") {
		return "test-only standard package"
	}
	return ""
}

func noTestCode(pkg string) string {
	switch {
	case noTesting(pkg) != "":
		return noTesting(pkg)
	case pkg == "github.com/stretchr/testify" || strings.HasPrefix(pkg, "github.com/stretchr/testify/"):
		return "test assertion library"
	case pkg == module+"/internal/testkit/azurite":
		return "the Azurite test harness (use internal/azurite/runner)"
	case pkg == module+"/internal/testkit" || strings.HasPrefix(pkg, module+"/internal/testkit/"):
		return "the test kit"
	}
	return ""
}

// lean is the rule of the library packages: no test code, and not Prometheus (the command
// and the server carry it; a library user should not).
func lean(pkg string) string {
	if why := noTesting(pkg); why != "" {
		return why
	}
	if strings.HasPrefix(pkg, "github.com/prometheus/") {
		return "Prometheus is for the command and the server, not the library"
	}
	return ""
}

// TestDeps checks, with `go list -deps`, that the tablets binary, the server and the library
// packages link no test-only code, and the library packages (root, stores, tsdb) no
// Prometheus module.
func TestDeps(t *testing.T) {
	// go test runs with the go command on PATH: its absence is an error, not a reason to skip.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command: %v", err)
	}
	for _, tc := range []struct {
		pkg    string
		forbid forbidden
	}{
		{module + "/cmd/tablets", noTestCode},
		{module + "/server", noTestCode},
		{module, lean},
		{module + "/basic", lean},
		{module + "/advanced", lean},
		{module + "/chunked", lean},
		{module + "/tsdb", lean},
		{module + "/internal/maintain/schedule", lean}, // the server's scheduler, which tests and tablets maintain run without it
	} {
		name := strings.TrimPrefix(strings.TrimPrefix(tc.pkg, module), "/")
		if name == "" {
			name = "root"
		}
		t.Run(name, func(t *testing.T) {
			imports := goListDeps(t, goBin, tc.pkg)
			for _, dep := range slices.Sorted(maps.Keys(imports)) {
				if why := tc.forbid(dep); why != "" {
					t.Errorf("%s depends on %s (%s): %s", tc.pkg, dep, why, strings.Join(importChain(imports, tc.pkg, dep), " -> "))
				}
			}
		})
	}
}

// goListDeps returns pkg and everything it depends on (tests excluded), each with its direct
// imports.
func goListDeps(t *testing.T, goBin, pkg string) map[string][]string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), goBin, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.String())
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	if _, ok := imports[pkg]; !ok {
		t.Fatalf("go list -deps %s does not list %s itself:\n%s", pkg, pkg, out)
	}
	return imports
}

// importChain returns a shortest import path from 'from' to 'to', both included: which
// import pulls 'to' in.
func importChain(imports map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, q := range imports[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return []string{from, "?", to}
}
