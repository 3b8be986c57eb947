package main

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/tsdb"
)

func TestParseSelector(t *testing.T) {
	byName := func(ms []tsdb.Matcher) map[string]tsdb.Matcher {
		out := map[string]tsdb.Matcher{}
		for _, m := range ms {
			out[m.Name+m.Type.String()] = m
		}
		return out
	}
	ms, err := parseSelector(`http_requests_total{code=~"5..", job="api", env!="test", path!~"/health.*"}`)
	require.NoError(t, err)
	assert.Equal(t, map[string]tsdb.Matcher{
		"__name__=": {Type: tsdb.MatchEqual, Name: "__name__", Value: "http_requests_total"},
		"code=~":    {Type: tsdb.MatchRegexp, Name: "code", Value: "5.."},
		"job=":      {Type: tsdb.MatchEqual, Name: "job", Value: "api"},
		"env!=":     {Type: tsdb.MatchNotEqual, Name: "env", Value: "test"},
		"path!~":    {Type: tsdb.MatchNotRegexp, Name: "path", Value: "/health.*"},
	}, byName(ms))

	for in, want := range map[string][]tsdb.Matcher{
		`up`:                     {{Type: tsdb.MatchEqual, Name: "__name__", Value: "up"}},
		`  up  `:                 {{Type: tsdb.MatchEqual, Name: "__name__", Value: "up"}},
		`{__name__=~"up|down"}`:  {{Type: tsdb.MatchRegexp, Name: "__name__", Value: "up|down"}},
		`{job="a\nb"}`:           {{Type: tsdb.MatchEqual, Name: "job", Value: "a\nb"}},
		`{job=~".+"}`:            {{Type: tsdb.MatchRegexp, Name: "job", Value: ".+"}},
		`{"my.metric"}`:          {{Type: tsdb.MatchEqual, Name: "__name__", Value: "my.metric"}},
		`{job="api", job!="x",}`: {{Type: tsdb.MatchEqual, Name: "job", Value: "api"}, {Type: tsdb.MatchNotEqual, Name: "job", Value: "x"}},
	} {
		got, err := parseSelector(in)
		require.NoError(t, err, in)
		assert.ElementsMatch(t, want, got, in)
	}

	for in, want := range map[string]string{
		``:                           "parse error",
		`up{`:                        "parse error",
		`up[5m]`:                     "parse error",
		`rate(up[5m])`:               "parse error",
		`up offset 5m`:               "parse error",
		`up{job=~"("}`:               "missing closing )",
		`{}`:                         "at least one matcher that does not match the empty string",
		`{job=""}`:                   "at least one matcher that does not match the empty string",
		`{job=~".*", env!="prod"}`:   "at least one matcher that does not match the empty string",
		`{job!~"x"}`:                 "at least one matcher that does not match the empty string",
		`{job="a\xffb"}`:             "not valid UTF-8",
		`up{job=~"api", x=~"a\xff"}`: "not valid UTF-8",
	} {
		_, err := parseSelector(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
		assert.Contains(t, err.Error(), "selector "+in, "the error names the selector")
	}
}

func TestToMatcher(t *testing.T) {
	for pt, want := range map[labels.MatchType]tsdb.MatchType{
		labels.MatchEqual:     tsdb.MatchEqual,
		labels.MatchNotEqual:  tsdb.MatchNotEqual,
		labels.MatchRegexp:    tsdb.MatchRegexp,
		labels.MatchNotRegexp: tsdb.MatchNotRegexp,
	} {
		pm, err := labels.NewMatcher(pt, "job", "a.*")
		require.NoError(t, err)
		m, err := toMatcher(pm)
		require.NoError(t, err)
		assert.Equal(t, tsdb.Matcher{Type: want, Name: "job", Value: "a.*"}, m)
		assert.Equal(t, pm.String(), m.String(), "the same text as Prometheus'")
	}
	_, err := toMatcher(nil)
	assert.Error(t, err)
	_, err = toMatcher(&labels.Matcher{Type: labels.MatchType(9), Name: "a", Value: "b"})
	assert.Error(t, err)
}

func TestParseLabelSet(t *testing.T) {
	ls, err := parseLabelSet(`up{job="api", instance="a"}`)
	require.NoError(t, err)
	assert.Equal(t, tsdb.LabelsFromStrings("__name__", "up", "instance", "a", "job", "api"), ls)
	assert.Equal(t, `up{instance="a", job="api"}`, ls.String())
	ls, err = parseLabelSet(`{job="api",zone=""}`) // an empty value is no label
	require.NoError(t, err)
	assert.Equal(t, tsdb.Labels{{Name: "job", Value: "api"}}, ls)
	ls, err = parseLabelSet(`node_load1`)
	require.NoError(t, err)
	assert.Equal(t, `node_load1{}`, ls.String())

	for in, want := range map[string]string{
		`up{job=~"api"}`:        `job=~"api" is not a label: only = is allowed`,
		`up{job!="api"}`:        "only = is allowed",
		`{job!~"x"}`:            "only = is allowed",
		`{}`:                    "empty label set",
		`{job=""}`:              "empty label set",
		`up{job="a",job="b"}`:   `duplicate label name "job"`,
		`up{__name__="down"}`:   `duplicate label name "__name__"`,
		`up{job="a`:             "parse error",
		`{job="\xff"}`:          "not valid UTF-8",
		`up{job="api"}[5m]`:     "parse error",
		`sum(up{job="api"})`:    "parse error",
		`up{job="api"} or down`: "parse error",
	} {
		_, err := parseLabelSet(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), want, in)
		assert.NotContains(t, err.Error(), "invalid options", in)
	}
}

func TestCompareLabels(t *testing.T) {
	a := tsdb.LabelsFromStrings("__name__", "up", "job", "api")
	b := tsdb.LabelsFromStrings("__name__", "up", "job", "web")
	c := tsdb.LabelsFromStrings("__name__", "up", "job", "api", "zone", "x")
	d := tsdb.LabelsFromStrings("job", "api")
	for _, tc := range []struct {
		x, y tsdb.Labels
		want int
	}{{a, a, 0}, {a, b, -1}, {b, a, 1}, {a, c, -1}, {c, b, -1}, {a, d, -1}} {
		assert.Equal(t, tc.want, tsdb.CompareLabels(tc.x, tc.y), "%s vs %s", tc.x, tc.y)
		pa, pb := promLabels(tc.x), promLabels(tc.y)
		assert.Equal(t, tc.want, sign(labels.Compare(pa, pb)), "as Prometheus orders %s and %s", tc.x, tc.y)
	}
}

func promLabels(ls tsdb.Labels) labels.Labels {
	var pairs []string
	for _, l := range ls {
		pairs = append(pairs, l.Name, l.Value)
	}
	return labels.FromStrings(pairs...)
}

func sign(n int) int { return min(max(n, -1), 1) }

// Selector and label-set mistakes are usage errors (status 2), found before any request:
// without an account, a good command line fails for want of one (status 1) instead.
func TestSelectorUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"series", "--db", "abc"}, "a selector is required"},
		{[]string{"series", "up"}, "--db is required"},
		{[]string{"series", "--table", "abc", "up"}, "--db databases only"},
		{[]string{"series", "--db", "abc", "--table", "abc", "up"}, "--table and --db are exclusive"},
		{[]string{"series", "--db", "abc", "up{"}, "selector up{: 1:4: parse error"},
		{[]string{"series", "--db", "abc", "up", `{job=~".*"}`}, "does not match the empty string"},
		{[]string{"series", "--db", "abc", "up", "--format", "xml"}, "unknown --format"},
		{[]string{"series", "--db", "abc", "up", "--from", "now", "--to", "-1h"}, "empty range"},
		{[]string{"series", "--db", "1abc", "up"}, "letters and digits"},
		{[]string{"labels", "a", "b", "--db", "abc"}, `unexpected argument "b"`},
		{[]string{"labels", "", "--db", "abc"}, "not a label name"},
		{[]string{"labels", "job"}, "--db is required"},
		{[]string{"labels", "--db", "abc", "--match", `{job=""}`}, "does not match the empty string"},
		{[]string{"labels", "--db", "abc", "--match", "up", "--match", "up{job="}, "parse error"},
		{[]string{"query", "--db", "abc", "--series", "s", "up"}, "--series and a selector (up) are exclusive"},
		{[]string{"query", "--table", "abc", "up"}, `unexpected argument "up": a selector needs --db`},
		{[]string{"query", "up"}, "a selector needs --db"},
		{[]string{"query", "--db", "abc"}, "--series or a selector"},
		{[]string{"query", "--db", "abc", "up{job=~\"(\"}"}, "missing closing )"},
		{[]string{"query", "--db", "abc", "{}"}, "does not match the empty string"},
		{[]string{"query", "--db", "abc", "up", "{}"}, "selector {}"},
		{[]string{"query", "--db", "abc", "up", "--agg", "p200"}, "--agg"},
		{[]string{"plot", "--db", "abc", "--series", "s", "up", "--out", "x.png"}, "exclusive"},
		{[]string{"plot", "--table", "abc", "up", "--out", "x.png"}, "a selector needs --db"},
		{[]string{"plot", "--db", "abc", `{a!="b"}`, "--out", "x.png"}, "does not match the empty string"},
		{[]string{"plot", "--db", "abc", "up", "--out", "x.gif"}, ".png or .svg"},
		{[]string{"write", "--table", "abc", "--labels", `up{job="api"}`}, "--labels needs --db"},
		{[]string{"write", "--db", "abc", "--labels", `up{job="api"}`, "--series", "s"}, "--series and --labels are exclusive"},
		{[]string{"write", "--db", "abc", "--labels", `up{job=~"api"}`}, "only = is allowed"},
		{[]string{"write", "--db", "abc", "--labels", `{}`}, "empty label set"},
		{[]string{"write", "--db", "abc", "--labels", `up{job="a",job="b"}`}, "duplicate label name"},
		{[]string{"write", "--db", "abc", "--labels", `up{`}, "--labels: label set up{"},
		{[]string{"write", "--db", "abc"}, "--series or --labels is required"},
	} {
		r := cli(t, nil, "", tc.args...)
		assert.Equal(t, exitUsage, r.code, "%q: %s", tc.args, r.stderr)
		if r.stderr != "" {
			msg := r.line(t)
			assert.Contains(t, msg, tc.want, tc.args)
			assert.Contains(t, msg, "(see 'tablets "+tc.args[0]+" --help')", tc.args)
		}
		assert.Empty(t, r.stdout, tc.args)
	}
	// Good command lines get as far as the account.
	for _, args := range [][]string{
		{"series", "--db", "abc", `up{job="api"}`, `{__name__=~"http_.+", code=~"5.."}`},
		{"labels", "--db", "abc"},
		{"labels", "job", "--db", "abc", "--match", `up{job="api",instance="a"}`},
		{"query", "--db", "abc", `http_requests_total{code=~"5.."}`, "--from", "-1h"},
		{"query", "--db", "abc", "--series", "s"},
		{"plot", "--db", "abc", `up{job!="x"}`, "--out", "x.png"},
		{"write", "--db", "abc", "--labels", `up{job="api", instance="a", zone=""}`},
	} {
		r := cli(t, nil, "", args...)
		assert.Equal(t, exitError, r.code, "%q: %s", args, r.stderr)
		assert.Contains(t, r.line(t), "no storage account", args)
	}
}

func TestLabelCommandsHelp(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"series", "labels", "query", "plot", "write"} {
		r := cli(t, nil, "", sub, "--help")
		assert.Equal(t, 0, r.code, sub)
		assert.Contains(t, r.stdout, "tablets "+sub+" --db NAME", sub)
		assert.Contains(t, r.stdout, `up{job="api"}`, sub)
		assert.Empty(t, r.stderr, sub)
	}
	r := cli(t, nil, "", "--help")
	for _, sub := range []string{"series", "labels"} {
		assert.True(t, strings.Contains(r.stdout, "\n  "+sub+" "), "the root help lists %s", sub)
	}
}
