package rules

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"gopkg.in/yaml.v3"
)

// ParseGroup parses and checks one rule group, the body of the ruler API's "set rule group"
// (the YAML of one group, as `mimirtool rules` sends it): one YAML document, unknown fields
// refused, and every check Prometheus makes of a group of a rule file (a name; each rule's
// record or alert, expression, labels, annotations and templates; the group's labels). The
// error wraps ErrBadRules; it names the group and the rule as a rule file's errors do, with
// the line and column in doc where the parser says.
func ParseGroup(doc []byte) (g rulefmt.RuleGroup, err error) {
	defer func() {
		// yaml.v3 is a parser of untrusted text: a panic in it is a document refused.
		if v := recover(); v != nil {
			g, err = rulefmt.RuleGroup{}, fmt.Errorf("%w: the YAML does not parse: %v", ErrBadRules, v)
		}
	}()
	if len(bytes.TrimSpace(doc)) == 0 {
		return rulefmt.RuleGroup{}, fmt.Errorf("%w: an empty rule group", ErrBadRules)
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&g); err != nil {
		return rulefmt.RuleGroup{}, fmt.Errorf("%w: %v", ErrBadRules, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return rulefmt.RuleGroup{}, fmt.Errorf("%w: more than one YAML document: the body is one rule group", ErrBadRules)
	}
	var node rulefmt.RuleGroupNode
	if err := yaml.Unmarshal(doc, &node); err != nil {
		return rulefmt.RuleGroup{}, fmt.Errorf("%w: %v", ErrBadRules, err)
	}
	if errs := checkGroup(g, node); len(errs) > 0 {
		return rulefmt.RuleGroup{}, joinBad(errs)
	}
	return g, nil
}

// checkGroup checks g as rulefmt checks a group of a file (RuleGroups.Validate), node giving
// the positions of its rules in the document.
func checkGroup(g rulefmt.RuleGroup, node rulefmt.RuleGroupNode) []error {
	var errs []error
	if g.Name == "" {
		errs = append(errs, fmt.Errorf("%d:%d: the group has no name", node.Line, node.Column))
	}
	for k, v := range g.Labels {
		if !model.LabelName(k).IsValid() || k == model.MetricNameLabel {
			errs = append(errs, fmt.Errorf("group %q: invalid label name: %s", g.Name, k))
		}
		if !model.LabelValue(v).IsValid() {
			errs = append(errs, fmt.Errorf("group %q: invalid label value: %s", g.Name, v))
		}
	}
	if len(node.Rules) != len(g.Rules) { // both decoded from one document
		return append(errs, fmt.Errorf("group %q: the rules did not decode alike", g.Name))
	}
	for i, r := range g.Rules {
		for _, we := range r.Validate(node.Rules[i]) {
			name := r.Alert
			if name == "" {
				name = r.Record
			}
			errs = append(errs, &rulefmt.Error{Group: g.Name, Rule: i + 1, RuleName: name, Err: we})
		}
	}
	return errs
}

// joinBad makes one error of errs, wrapping ErrBadRules once, each on a line.
func joinBad(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w: %s", ErrBadRules, strings.Join(msgs, "; "))
}

// NamespaceFile is the rule groups of one namespace, read from a file by ParseNamespaceFile.
type NamespaceFile struct {
	Namespace string
	Groups    []rulefmt.RuleGroup
}

// ParseNamespaceFile reads a file of rule groups for the ruler API, in either format
// `mimirtool rules` and Prometheus use: mimirtool's, a top-level `namespace:` beside
// `groups:`, or a plain Prometheus rule file, whose namespace is the file's base name
// without its extension (alerts.yml: alerts). Each group is checked as ParseGroup checks
// one, group names are unique in a file, and unknown fields are refused. The errors wrap
// ErrBadRules and name the file.
func ParseNamespaceFile(file string, doc []byte) (nf NamespaceFile, err error) {
	defer func() {
		if v := recover(); v != nil {
			nf, err = NamespaceFile{}, fmt.Errorf("%w: %s: the YAML does not parse: %v", ErrBadRules, file, v)
		}
	}()
	var f struct {
		Namespace *string             `yaml:"namespace"`
		Groups    []rulefmt.RuleGroup `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return NamespaceFile{}, fmt.Errorf("%w: %s: %v", ErrBadRules, file, err)
	}
	var nodes struct {
		Groups []rulefmt.RuleGroupNode `yaml:"groups"`
	}
	if err := yaml.Unmarshal(doc, &nodes); err != nil {
		return NamespaceFile{}, fmt.Errorf("%w: %s: %v", ErrBadRules, file, err)
	}
	nf.Namespace = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	if f.Namespace != nil {
		nf.Namespace = *f.Namespace
	}
	if err := checkName("namespace", nf.Namespace); err != nil {
		return NamespaceFile{}, fmt.Errorf("%w: %s: %v", ErrBadRules, file, err)
	}
	var errs []error
	seen := map[string]bool{}
	for i, g := range f.Groups {
		if seen[g.Name] {
			errs = append(errs, fmt.Errorf("%d:%d: group name %q is repeated in the namespace", nodes.Groups[i].Line, nodes.Groups[i].Column, g.Name))
		}
		seen[g.Name] = true
		if i < len(nodes.Groups) {
			errs = append(errs, checkGroup(g, nodes.Groups[i])...)
		}
	}
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return NamespaceFile{}, fmt.Errorf("%w: %s: %s", ErrBadRules, file, strings.Join(msgs, "; "))
	}
	nf.Groups = f.Groups
	return nf, nil
}
