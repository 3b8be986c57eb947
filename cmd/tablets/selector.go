package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/promstore"
	"github.com/seed71701133/tablets/tsdb"
)

// selectorHelp explains selectors in the help of the commands that take them.
const selectorHelp = `A selector is a Prometheus series selector: a metric name, label matchers in braces, or
both: up, up{job="api"}, {__name__=~"http_.*", code=~"5.."}, up{job!="test", zone!~"eu-.*"}.
Matchers are = (equal), != (not equal), =~ (regexp) and !~ (not regexp); a regexp is RE2,
anchored at both ends; a series without a label has "" for it. At least one matcher must not
match "" (a selector matching every series is refused, as Prometheus does). Quote the
selector for the shell: 'up{job="api"}'.`

// parseSelector parses a Prometheus series selector ('up{job="api"}') into tsdb matchers.
// Bad syntax, an invalid matcher, and a selector whose every matcher matches "" are errors.
func parseSelector(s string) ([]tsdb.Matcher, error) {
	pms, err := parser.ParseMetricSelector(s)
	if err != nil {
		return nil, fmt.Errorf("selector %s: %v", s, err)
	}
	ms := make([]tsdb.Matcher, 0, len(pms))
	selective := false
	for _, pm := range pms {
		m, err := toMatcher(pm)
		if err != nil {
			return nil, fmt.Errorf("selector %s: %v", s, err)
		}
		ms = append(ms, m)
		if !pm.Matches("") {
			selective = true
		}
	}
	if !selective {
		return nil, fmt.Errorf("selector %s: needs at least one matcher that does not match the empty string (such as a metric name, or job=\"api\" or job=~\".+\")", s)
	}
	return ms, nil
}

// toMatcher converts a Prometheus label matcher.
func toMatcher(pm *labels.Matcher) (tsdb.Matcher, error) {
	m, err := promstore.MatcherToTSDB(pm)
	if err != nil {
		return tsdb.Matcher{}, err
	}
	switch {
	case m.Name == "":
		return tsdb.Matcher{}, fmt.Errorf("matcher %s: empty label name", pm)
	case !utf8.ValidString(m.Name) || !utf8.ValidString(m.Value):
		return tsdb.Matcher{}, fmt.Errorf("matcher %s: not valid UTF-8", pm)
	}
	return m, nil
}

// parseSelectorArgs parses the selectors of a command line, each a usage error if bad.
func parseSelectorArgs(cmd *cobra.Command, sels []string) ([][]tsdb.Matcher, error) {
	out := make([][]tsdb.Matcher, 0, len(sels))
	for _, s := range sels {
		ms, err := parseSelector(s)
		if err != nil {
			return nil, usageErrorf(cmd, "%v", err)
		}
		out = append(out, ms)
	}
	return out, nil
}

// parseLabelSet parses a label set written as a selector of = matchers only:
// 'up{job="api", instance="a"}' is {__name__="up", instance="a", job="api"}. A label with an
// empty value is no label (as in Prometheus); the set must not be empty.
func parseLabelSet(s string) (tsdb.Labels, error) {
	pms, err := parser.ParseMetricSelector(s)
	if err != nil {
		return nil, fmt.Errorf("label set %s: %v", s, err)
	}
	pairs := make([]string, 0, 2*len(pms))
	for _, pm := range pms {
		m, err := toMatcher(pm)
		if err != nil {
			return nil, fmt.Errorf("label set %s: %v", s, err)
		}
		if m.Type != tsdb.MatchEqual {
			return nil, fmt.Errorf("label set %s: %s is not a label: only = is allowed in a label set", s, m)
		}
		if m.Value != "" {
			pairs = append(pairs, m.Name, m.Value)
		}
	}
	ls := tsdb.LabelsFromStrings(pairs...)
	if err := ls.Validate(); err != nil {
		return nil, fmt.Errorf("label set %s: %v", s, strings.TrimPrefix(err.Error(), tablets.ErrInvalidLabels.Error()+": "))
	}
	return ls, nil
}

// selectSeries returns the union of the series each selector selects in [from, to), sorted
// by labels as Prometheus sorts them. tsdb's refusal of a matcher is a usage error.
func selectSeries(ctx context.Context, cmd *cobra.Command, db *tsdb.DB, from, to time.Time, sels [][]tsdb.Matcher) ([]tsdb.SeriesInfo, error) {
	seen := map[string]bool{}
	var out []tsdb.SeriesInfo
	for _, ms := range sels {
		for si, err := range db.Select(ctx, from, to, ms...) {
			if errors.Is(err, tablets.ErrInvalidMatcher) {
				return nil, usageErrorf(cmd, "%v", err)
			}
			if err != nil {
				return nil, err
			}
			if !seen[si.Series] {
				seen[si.Series] = true
				out = append(out, si)
			}
		}
	}
	if len(sels) > 1 {
		slices.SortFunc(out, func(a, b tsdb.SeriesInfo) int { return tsdb.CompareLabels(a.Labels, b.Labels) })
	}
	return out, nil
}

// requireDB checks that a command that works on labels has a --db database and no --table.
func requireDB(cmd *cobra.Command, sf *storeFlags) error {
	switch {
	case sf.db == "" && sf.table != "":
		return usageErrorf(cmd, "labels are kept by --db databases only, not by a --table store")
	case sf.db == "":
		return usageErrorf(cmd, "--db is required")
	case sf.table != "":
		return usageErrorf(cmd, "--table and --db are exclusive")
	}
	return nil
}

// selectorsText names selectors in messages: `up{job="api"}` or `a or b`.
func selectorsText(sels []string) string {
	return strings.Join(sels, " or ")
}

// seriesChoice is what query and plot read: the --series names, or the series that
// selectors (positional arguments, with --db) select.
type seriesChoice struct {
	names     []string // --series
	selectors []string // as given
	sels      [][]tsdb.Matcher
}

// chooseSeries checks --series and the selectors of query and plot: one or the other, and
// selectors only with --db.
func chooseSeries(cmd *cobra.Command, sf *storeFlags, series, args []string) (seriesChoice, error) {
	if len(args) == 0 {
		if sf.db != "" && len(series) == 0 {
			return seriesChoice{}, usageErrorf(cmd, `--series or a selector (such as 'up{job="api"}') is required`)
		}
		names, err := seriesList(cmd, series)
		return seriesChoice{names: names}, err
	}
	if len(series) > 0 {
		return seriesChoice{}, usageErrorf(cmd, "--series and a selector (%s) are exclusive", args[0])
	}
	if sf.db == "" {
		return seriesChoice{}, usageErrorf(cmd, "unexpected argument %q: a selector needs --db (the series of a --table store have no labels; name them with --series)", args[0])
	}
	sels, err := parseSelectorArgs(cmd, args)
	if err != nil {
		return seriesChoice{}, err
	}
	return seriesChoice{selectors: args, sels: sels}, nil
}

// labelled reports whether the series are chosen by selectors.
func (c seriesChoice) labelled() bool { return len(c.sels) > 0 }

// what names the choice in messages.
func (c seriesChoice) what() string {
	if c.labelled() {
		return selectorsText(c.selectors)
	}
	return strings.Join(c.names, ", ")
}

// resolve returns the series keys to read and the names to show them by: the --series
// names, or the keys of the series the selectors select in [from, to) and their labels. For
// selectors, hist holds the keys of the series with histogram samples there; for --series
// names it is nil: unknown.
func (c seriesChoice) resolve(ctx context.Context, cmd *cobra.Command, store tablets.Store, from, to time.Time) (keys, shown []string, hist map[string]bool, err error) {
	if !c.labelled() {
		return c.names, c.names, nil, nil
	}
	db, ok := store.(*tsdb.DB)
	if !ok { // chooseSeries allows selectors with --db only
		return nil, nil, nil, usageErrorf(cmd, "a selector needs --db")
	}
	found, err := selectSeries(ctx, cmd, db, from, to, c.sels)
	if err != nil {
		return nil, nil, nil, err
	}
	hist = map[string]bool{}
	for _, s := range found {
		keys = append(keys, s.Series)
		shown = append(shown, s.Labels.String())
		if s.Histograms {
			hist[s.Series] = true
		}
	}
	return keys, shown, hist, nil
}
