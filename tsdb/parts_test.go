package tsdb

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The parts of a DB depend on each other one way (doc.go, "Parts"): each part package
// imports only the leaf layer and the parts this table allows, and the leaf packages no
// part. A new import between parts is a change of the design, made here on purpose.
func TestPartsDependOneWay(t *testing.T) {
	leaf := []string{"azerr", "cache", "catalog", "changelog", "labels", "lease", "naming", "sentinel", "tables", "times"}
	allowed := map[string][]string{
		// the leaf layer: among themselves only, the catalog below the period tables
		"azerr": nil, "cache": nil, "labels": nil, "naming": nil, "sentinel": nil, "times": nil,
		"changelog": {"azerr", "times"},
		"lease":     {"azerr"},
		"catalog":   {"azerr", "cache", "labels"},
		"tables":    {"cache", "catalog", "naming", "sentinel"},
		// the parts
		"index":     leaf,
		"staging":   leaf,
		"raw":       append(slices.Clone(leaf), "staging"), // the merge of staged samples (pure code)
		"tiers":     append(slices.Clone(leaf), "staging"), // the staged kinds and the merge
		"retention": append(slices.Clone(leaf), "tiers"),
		"answers":   {"azerr"}, // the kept answers' table: bytes by key, what they hold is tsdb's
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command: %v", err)
	}
	const prefix = "github.com/seed71701133/tablets/tsdb/internal/"
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "./internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		part := strings.TrimPrefix(pkg, prefix)
		ok, known := allowed[part]
		if !known {
			t.Errorf("tsdb/internal/%s is not in the parts' table: add it, with what it may import", part)
			continue
		}
		seen[part] = true
		for _, imp := range strings.Fields(imports) {
			if imp == "github.com/seed71701133/tablets/tsdb" {
				t.Errorf("%s imports package tsdb", part)
			}
			if dep, isPart := strings.CutPrefix(imp, prefix); isPart && !slices.Contains(ok, dep) {
				t.Errorf("%s imports %s, which the parts' table does not allow", part, dep)
			}
		}
	}
	for part := range allowed {
		if !seen[part] {
			t.Errorf("the parts' table names %s, which go list did not find", part)
		}
	}
}
