package rules

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// ErrBadRules wraps every error about rules that do not load: a file that cannot be read,
// YAML that is not a rule file, a bad expression, template, label or name. The message
// names the file, and the group and rule where the parser says.
var ErrBadRules = errors.New("bad rules")

// ExpandFiles returns the files the patterns name, as Prometheus expands rule_files: each
// pattern a glob (filepath.Match's syntax) or a plain path; a pattern matching nothing is
// no error (Prometheus' rule_files too), a malformed one is. The files are sorted within each
// pattern and listed once each, in the order of the patterns.
func ExpandFiles(patterns []string) ([]string, error) {
	var files []string
	seen := map[string]bool{}
	for _, p := range patterns {
		matches, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("%w: rule file pattern %q: %v", ErrBadRules, p, err)
		}
		slices.Sort(matches)
		for _, m := range matches {
			if !seen[m] {
				seen[m] = true
				files = append(files, m)
			}
		}
	}
	return files, nil
}

// ParseFiles parses and checks each file as Prometheus loads a rule file (rulefmt: the
// YAML, unknown fields refused, each expression, template, label and name, group names
// unique within a file). It returns the groups of each file; the error joins one error a
// problem, each wrapping ErrBadRules and naming its file.
func ParseFiles(files []string) (map[string]*rulefmt.RuleGroups, error) {
	out := make(map[string]*rulefmt.RuleGroups, len(files))
	var errs []error
	for _, f := range files {
		rgs, ferrs := rulefmt.ParseFile(f, false)
		seen := map[string]bool{} // rulefmt may report a YAML error twice
		for _, err := range ferrs {
			if !seen[err.Error()] {
				seen[err.Error()] = true
				errs = append(errs, fileError(f, err))
			}
		}
		if len(ferrs) == 0 {
			out[f] = rgs
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// fileError wraps err in ErrBadRules, naming file unless err already does (rulefmt names
// the file of a YAML error, not of a rule's).
func fileError(file string, err error) error {
	var re *rulefmt.Error
	if errors.As(err, &re) {
		return fmt.Errorf("%w: %s: %v", ErrBadRules, file, err)
	}
	if msg := err.Error(); len(msg) >= len(file) && msg[:len(file)] == file {
		return fmt.Errorf("%w: %v", ErrBadRules, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrBadRules, file, err)
}

// loader serves Prometheus' rule manager the groups last loaded without error, from
// memory: a group the manager loads again (a restart of Run, a reload of other files) is
// the one that was checked, whatever is on disk now. Its identifiers are the files'
// names; another source of groups (rule groups stored in the account) plugs in the same
// way, a namespace an identifier.
type loader struct {
	mu     sync.Mutex
	groups map[string]*rulefmt.RuleGroups
	stored map[string]*rulefmt.RuleGroups // by namespace: the groups stored in the account (stored.go)
}

func (l *loader) set(groups map[string]*rulefmt.RuleGroups) {
	l.mu.Lock()
	l.groups = groups
	l.mu.Unlock()
}

// Load returns a deep enough copy of the groups of identifier: the manager keeps pointers
// into what it is given.
func (l *loader) Load(identifier string, _ bool) (*rulefmt.RuleGroups, []error) {
	l.mu.Lock()
	rgs := l.groups[identifier]
	if rgs == nil {
		rgs = l.stored[identifier]
	}
	l.mu.Unlock()
	if rgs == nil {
		return nil, []error{fmt.Errorf("%w: %s: not loaded", ErrBadRules, identifier)}
	}
	cp := &rulefmt.RuleGroups{Groups: slices.Clone(rgs.Groups)}
	return cp, nil
}

func (l *loader) Parse(query string) (parser.Expr, error) { return parser.ParseExpr(query) }
