package labels

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"unicode/utf8"

	"github.com/seed71701133/tablets"
)

// MatchType is how a Matcher compares a label's value.
type MatchType int

// The match types of Prometheus' selectors.
const (
	MatchEqual     MatchType = iota // =
	MatchNotEqual                   // !=
	MatchRegexp                     // =~
	MatchNotRegexp                  // !~
)

func (t MatchType) String() string {
	switch t {
	case MatchEqual:
		return "="
	case MatchNotEqual:
		return "!="
	case MatchRegexp:
		return "=~"
	case MatchNotRegexp:
		return "!~"
	}
	return "MatchType(" + strconv.Itoa(int(t)) + ")"
}

// Matcher selects series by one label, with Prometheus' semantics: a series without the
// label has the value "" for it (so `a=""` matches series without a, and `a!="x"` and
// `a!~"x"` match them too). A regexp is RE2 syntax where "." also matches a newline,
// anchored at both ends: `a=~"b|c"` is `^(?s:b|c)$`.
type Matcher struct {
	Type        MatchType
	Name, Value string
}

func (m Matcher) String() string { return m.Name + m.Type.String() + strconv.Quote(m.Value) }

// Compiled is a checked Matcher, its regexp compiled.
type Compiled struct {
	Matcher
	re *regexp.Regexp
}

func (m *Compiled) Matches(v string) bool {
	switch m.Type {
	case MatchEqual:
		return v == m.Value
	case MatchNotEqual:
		return v != m.Value
	case MatchRegexp:
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

// MatchSet reports whether the label set matches every Compiled.
func MatchSet(ms []Compiled, ls Labels) bool {
	for i := range ms {
		if !ms[i].Matches(ls.Get(ms[i].Name)) {
			return false
		}
	}
	return true
}

// Compile checks and compiles matchers, wrapping tablets.ErrInvalidMatcher. With
// needSelective, at least one must not match the empty string (a selector that matches every
// series, including those without any of the labels, is refused as Prometheus does).
func Compile(ms []Matcher, needSelective bool) ([]Compiled, error) {
	out := make([]Compiled, len(ms))
	selective := false
	for i, m := range ms {
		if m.Name == "" {
			return nil, fmt.Errorf("%w: Compiled %d has an empty label name", tablets.ErrInvalidMatcher, i)
		}
		if !utf8.ValidString(m.Name) || !utf8.ValidString(m.Value) {
			return nil, fmt.Errorf("%w: Compiled %s is not valid UTF-8", tablets.ErrInvalidMatcher, m)
		}
		out[i].Matcher = m
		switch m.Type {
		case MatchEqual, MatchNotEqual:
		case MatchRegexp, MatchNotRegexp:
			// As Prometheus' labels.NewFastRegexMatcher: Perl syntax, "." matches "\n".
			parsed, err := syntax.Parse(m.Value, syntax.Perl|syntax.DotNL)
			if err != nil {
				return nil, fmt.Errorf("%w: Compiled %s: %v", tablets.ErrInvalidMatcher, m, err)
			}
			if out[i].re, err = regexp.Compile("^(?s:" + parsed.Simplify().String() + ")$"); err != nil {
				return nil, fmt.Errorf("%w: Compiled %s: %v", tablets.ErrInvalidMatcher, m, err)
			}
		default:
			return nil, fmt.Errorf("%w: Compiled %d has unknown type %d", tablets.ErrInvalidMatcher, i, m.Type)
		}
		if !out[i].Matches("") {
			selective = true
		}
	}
	if needSelective && !selective {
		return nil, fmt.Errorf("%w: a selector needs at least one Compiled that does not match the empty string", tablets.ErrInvalidMatcher)
	}
	return out, nil
}

// NameValues returns the metric names a Select can only match, if its matchers pin them
// down: an equality on MetricName, or a regexp on it that matches few strings (`a|b`); ""
// stands for label sets without a name. ok is false when any name may match.
func NameValues(ms []Compiled) (names []string, ok bool) {
	for _, m := range ms {
		if m.Name != MetricName {
			continue
		}
		switch m.Type {
		case MatchEqual:
			if m.Value != "" {
				return []string{m.Value}, true
			}
		case MatchRegexp:
			if set, ok := literalAlternation(m.Value); ok {
				return set, true
			}
		}
	}
	return nil, false
}

// literalAlternation returns the strings a regexp matches if they are few (at most
// maxLiteralSet), such as Grafana's `a|b|c` or `web-[12]`: the regexp's tree of literals,
// small character classes, concatenations and alternations, expanded.
func literalAlternation(expr string) ([]string, bool) {
	re, err := syntax.Parse(expr, syntax.Perl|syntax.DotNL)
	if err != nil {
		return nil, false
	}
	return finiteSet(re.Simplify())
}

const maxLiteralSet = 64

func finiteSet(re *syntax.Regexp) ([]string, bool) {
	if re.Flags&syntax.FoldCase != 0 {
		return nil, false
	}
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpLiteral:
		return []string{string(re.Rune)}, true
	case syntax.OpCapture:
		return finiteSet(re.Sub[0])
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if int(re.Rune[i+1]-re.Rune[i])+len(out) >= maxLiteralSet {
				return nil, false
			}
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				out = append(out, string(r))
			}
		}
		return out, true
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			set, ok := finiteSet(sub)
			if !ok || len(out)+len(set) > maxLiteralSet {
				return nil, false
			}
			out = append(out, set...)
		}
		return out, true
	case syntax.OpConcat:
		out := []string{""}
		for _, sub := range re.Sub {
			set, ok := finiteSet(sub)
			if !ok || len(out)*len(set) > maxLiteralSet {
				return nil, false
			}
			next := make([]string, 0, len(out)*len(set))
			for _, a := range out {
				for _, b := range set {
					next = append(next, a+b)
				}
			}
			out = next
		}
		return out, true
	}
	return nil, false
}
