package rules

import (
	"fmt"
	"io"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// Check checks rule files as `promtool check rules` does, and writes its report: for each
// file "Checking FILE", then "  SUCCESS: N rules found" to out, or "  FAILED:" and the
// errors (each naming the file) to errOut. Recording rules that record the same series twice
// (same name, same labels) are reported as a warning, as promtool's default lint does,
// and do not fail. It returns whether every file loaded.
func Check(out, errOut io.Writer, files ...string) bool {
	ok := true
	for _, f := range files {
		fmt.Fprintln(out, "Checking", f)
		groups, err := ParseFiles([]string{f})
		if err != nil {
			ok = false
			fmt.Fprintln(errOut, "  FAILED:")
			for _, e := range splitJoined(err) {
				fmt.Fprintln(errOut, e.Error())
			}
			fmt.Fprintln(out)
			continue
		}
		n := 0
		for _, g := range groups[f].Groups {
			n += len(g.Rules)
		}
		if dups := duplicateRules(groups[f]); len(dups) > 0 {
			fmt.Fprintf(errOut, "  WARNING: %d duplicate rule(s) found (might cause inconsistency while recording expressions):\n", len(dups))
			for _, d := range dups {
				fmt.Fprintf(errOut, "    %s\n", d)
			}
		}
		fmt.Fprintf(out, "  SUCCESS: %d rules found\n", n)
		fmt.Fprintln(out)
	}
	return ok
}

func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// duplicateRules lists the recording rules of a file that record the same series: the same
// name and labels (promtool's checkDuplicates).
func duplicateRules(rgs *rulefmt.RuleGroups) []string {
	seen := map[string]int{}
	var order []string
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			if r.Record == "" {
				continue
			}
			key := labels.FromMap(r.Labels).String()
			if _, err := parser.ParseExpr(r.Expr); err != nil {
				continue
			}
			k := r.Record + " " + key
			if seen[k] == 1 {
				order = append(order, k)
			}
			seen[k]++
		}
	}
	return order
}
