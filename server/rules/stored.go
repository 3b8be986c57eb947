package rules

import (
	"fmt"
	"maps"
	"slices"

	"github.com/prometheus/prometheus/model/rulefmt"
)

// SetStored replaces the rule groups stored in the account (Store.Load) that the manager
// evaluates beside its rule files. A namespace stands where a file does: it is the groups'
// file in /api/v1/rules, their rule_group label is "<namespace>;<group>", and it enters the
// hash that offsets their evaluation times. If the manager runs, the change applies at once,
// as a reload of files does: a group unchanged goes on, a changed one keeps the state of its
// alerts, one gone stops. A namespace named as one of the manager's rule files is not
// evaluated (the file's groups are), and the error says so; the others are. If the rule
// manager refuses the groups (an error wrapping ErrBadRules), the groups evaluated stay as
// they were.
func (m *Manager) SetStored(groups []StoredGroup) error {
	byNamespace := map[string]*rulefmt.RuleGroups{}
	for _, g := range groups {
		rgs := byNamespace[g.Namespace]
		if rgs == nil {
			rgs = &rulefmt.RuleGroups{}
			byNamespace[g.Namespace] = rgs
		}
		rgs.Groups = append(rgs.Groups, g.Group)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	before := m.loader.setStored(byNamespace)
	if m.running {
		if err := m.update(m.rm); err != nil {
			m.loader.setStored(before)
			return err
		}
	}
	var shadowed []string
	for _, ns := range slices.Sorted(maps.Keys(byNamespace)) {
		if slices.Contains(m.files, ns) {
			shadowed = append(shadowed, ns)
		}
	}
	if len(shadowed) > 0 {
		return fmt.Errorf("rules: stored namespaces %q are named as rule files: the files' groups are evaluated, not theirs", shadowed)
	}
	return nil
}

// identifiers are the rule files and then the stored namespaces not named as one of them,
// sorted: what the rule manager loads. Called with m.mu held.
func (m *Manager) identifiers() []string {
	ids := slices.Clone(m.files)
	for _, ns := range m.loader.namespaces() {
		if !slices.Contains(m.files, ns) {
			ids = append(ids, ns)
		}
	}
	return ids
}

// setStored replaces the stored groups the loader serves, and returns those it served.
func (l *loader) setStored(stored map[string]*rulefmt.RuleGroups) map[string]*rulefmt.RuleGroups {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.stored
	l.stored = stored
	return before
}

// namespaces are the namespaces of the stored groups, sorted.
func (l *loader) namespaces() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.stored))
}
