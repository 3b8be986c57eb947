package labels

import (
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	promlabels "github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
)

// The encoding and the key of a label set are forever: these bytes must not change.
func TestLabelsGolden(t *testing.T) {
	ls := FromStrings("job", "api", "__name__", "up")
	enc := Append(nil, ls)
	require.Equal(t, "0102085f5f6e616d655f5f027570036a6f6203617069", hex.EncodeToString(enc))
	// sha256 of those bytes starts 31b6fcee16e88a9a05158678b02cd548 (sha256sum agrees).
	require.Equal(t, "l31b6fcee16e88a9a05158678b02cd548", Key(ls))
	back, err := Decode(enc)
	require.NoError(t, err)
	require.Equal(t, ls, back)
	require.Equal(t, `up{job="api"}`, ls.String())
}

func TestCanonicalLabels(t *testing.T) {
	a, err := Canonical(Labels{{"job", "api"}, {"__name__", "up"}, {"zone", ""}})
	require.NoError(t, err)
	b, err := Canonical(Labels{{"__name__", "up"}, {"job", "api"}})
	require.NoError(t, err)
	require.Equal(t, a, b, "order and empty values do not change the set")
	require.Equal(t, Key(a), Key(b))

	for name, ls := range map[string]Labels{
		"empty":          {},
		"only empties":   {{"a", ""}},
		"empty name":     {{"", "x"}, {"a", "b"}},
		"duplicate":      {{"a", "1"}, {"a", "2"}},
		"bad UTF-8 name": {{"a\xff", "1"}},
		"bad UTF-8":      {{"a", "\xc3"}},
		"too large":      {{"a", strings.Repeat("x", MaxSize)}},
	} {
		_, err := Canonical(ls)
		require.ErrorIs(t, err, tablets.ErrInvalidLabels, name)
	}
	_, err = Canonical(Labels{{"a", strings.Repeat("é", 20000)}}) // 40 KB: fits
	require.NoError(t, err)
}

// Every key fits every layout: 33 characters of [0-9a-f] after "l", whatever the labels hold.
func TestSeriesKeyShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		ls, err := Canonical(randomLabels(rng))
		require.NoError(t, err)
		k := Key(ls)
		require.True(t, IsKey(k), k)
		require.NoError(t, entity.ValidateKey(k))
	}
	require.False(t, IsKey("l31b6fcee16e88a9a05158678b02cd54"))
	require.False(t, IsKey("L31b6fcee16e88a9a05158678b02cd548"))
	require.False(t, IsKey("l31b6fcee16e88a9a05158678b02cd54g"))
}

// The matchers agree with Prometheus' own labels.Matcher on every value, and so on label
// sets (absent labels are "").
func TestMatchersAgreeWithPrometheus(t *testing.T) {
	values := []string{"", "a", "b", "ab", "abc", "web-1", "web-10", "Web-1", "api", "a\nb", "é", "日本", "x.y", "a|b", "/\\#?", "'", "\x00", "aaa"}
	patterns := []string{"a", "", "a|b", "ab|a", "web-.*", "web-[0-9]", ".*", ".+", "a.b", "(?i)web-1", "^a$", "a$|b", "[^a]+", "é|日本", "\\p{Han}+", "a*", "x\\.y", "a\\|b", ".", "(a|b)c?", "web-1|web-10"}
	for _, p := range patterns {
		for _, typ := range []MatchType{MatchEqual, MatchNotEqual, MatchRegexp, MatchNotRegexp} {
			ms, err := Compile([]Matcher{{typ, "l", p}}, false)
			require.NoError(t, err)
			pm, err := promlabels.NewMatcher(promlabels.MatchType(typ), "l", p)
			require.NoError(t, err)
			for _, v := range values {
				require.Equal(t, pm.Matches(v), ms[0].Matches(v), "%s on %q", ms[0].Matcher, v)
			}
		}
	}
	for _, bad := range []Matcher{{MatchRegexp, "l", "(a"}, {MatchNotRegexp, "l", "a**"}, {MatchEqual, "", "a"}, {MatchType(9), "l", "a"}, {MatchEqual, "l", "\xff"}} {
		_, err := Compile([]Matcher{bad, {MatchEqual, "x", "y"}}, true)
		require.ErrorIs(t, err, tablets.ErrInvalidMatcher, bad.String())
	}
	// A selector needs one matcher that does not match "".
	for _, ms := range [][]Matcher{{{MatchEqual, "a", ""}}, {{MatchNotEqual, "a", "x"}}, {{MatchRegexp, "a", ".*"}}, {{MatchNotRegexp, "a", "x"}, {MatchRegexp, "b", "x?"}}, nil} {
		_, err := Compile(ms, true)
		require.ErrorIs(t, err, tablets.ErrInvalidMatcher, "%v", ms)
	}
	for _, ms := range [][]Matcher{{{MatchEqual, "a", "x"}}, {{MatchRegexp, "a", ".+"}}, {{MatchNotEqual, "a", ""}}, {{MatchNotRegexp, "a", ""}}} {
		_, err := Compile(ms, true)
		require.NoError(t, err, "%v", ms)
	}
}

func TestNameValues(t *testing.T) {
	for expr, want := range map[string][]string{
		"up":            {"up"},
		"up|down":       {"up", "down"},
		"a|b|日本":        {"a", "b", "日本"},
		"up.*":          nil,
		"(?i)up":        nil,
		"up|":           {"up", ""},
		"web-[12]|x":    {"web-1", "web-2", "x"},
		"(a|b)(c|d)":    {"ac", "ad", "bc", "bd"},
		"[a-z]+":        nil,
		"http_requests": {"http_requests"},
	} {
		ms, err := Compile([]Matcher{{MatchRegexp, MetricName, expr}}, false)
		require.NoError(t, err)
		got, ok := NameValues(ms)
		require.Equal(t, want != nil, ok, expr)
		if ok {
			// The set is exactly the regexp's matches.
			slices.Sort(got)
			slices.Sort(want)
			require.Equal(t, want, got, expr)
			for _, s := range got {
				require.True(t, ms[0].Matches(s), "%q does not match %s", s, expr)
			}
		}
	}
	ms, _ := Compile([]Matcher{{MatchEqual, "job", "x"}, {MatchEqual, MetricName, "up"}}, false)
	got, ok := NameValues(ms)
	require.True(t, ok)
	require.Equal(t, []string{"up"}, got)
	ms, _ = Compile([]Matcher{{MatchNotEqual, MetricName, "up"}}, false)
	_, ok = NameValues(ms)
	require.False(t, ok)
}

// randomLabels is a label set with values holding every character keys forbid, unicode and
// long values.
func randomLabels(rng *rand.Rand) Labels {
	alphabet := []string{"a", "b", "/", "\\", "#", "?", "'", "\"", "\x00", "\x1f", "\x7f", "\n", "é", "日", "😀", "|", "~", " "}
	n := 1 + rng.IntN(5)
	ls := Labels{{MetricName, []string{"up", "http_requests_total", "a/b"}[rng.IntN(3)]}}
	for i := range n {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		if rng.IntN(50) == 0 {
			b.WriteString(strings.Repeat("long", 2000))
		}
		ls = append(ls, Label{string(rune('a' + i)), b.String()})
	}
	for _, l := range ls {
		if !utf8.ValidString(l.Value) {
			panic("invalid")
		}
	}
	return ls
}
