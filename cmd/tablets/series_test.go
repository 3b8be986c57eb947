package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

// Labelled series in a --db database: write by label set, list them with series and labels,
// query and plot them by selector.
func TestLabelledSeries(t *testing.T) {
	t.Parallel()
	env, _ := account(t)
	db := "lab" + strings.ToLower(azurite.NewTableName()[1:9])
	flags := []string{"--db", db}
	now := time.Now().UTC().Truncate(time.Minute)
	ts := func(ago int) string { return now.Add(-time.Duration(ago) * time.Minute).Format(time.RFC3339) }
	points := func(vals ...int) string { // at 30, 20 and 10 minutes ago
		var b strings.Builder
		for i, v := range vals {
			fmt.Fprintf(&b, "%s,%d\n", ts(30-10*i), v)
		}
		return b.String()
	}
	keyRe := regexp.MustCompile(`\(series (l[0-9a-f]{32})\)`)
	write := func(set string, vals ...int) string {
		out := ok(t, env, points(vals...), append([]string{"write", "--labels", set}, flags...)...)
		assert.Regexp(t, fmt.Sprintf(`^wrote %d points to \S+\{.*\} \(series l[0-9a-f]{32}\) of database %s `, len(vals), db), out)
		m := keyRe.FindStringSubmatch(out)
		require.NotNil(t, m, "the key of the series: %s", out)
		return m[1]
	}
	const (
		apiA = `up{instance="a", job="api"}`
		apiB = `up{instance="b", job="api"}`
		web  = `http_requests_total{code="500", job="web"}`
	)
	keyA := write(`up{job="api",instance="a"}`, 1, 2, 3)
	keyB := write(`{instance="b", __name__="up", job="api", zone=""}`, 10, 20, 30) // any order; zone="" is no label
	keyW := write(`http_requests_total{job="web",code="500"}`, 5, 6, 7)
	assert.Len(t, map[string]bool{keyA: true, keyB: true, keyW: true}, 3)
	// The same label set again: the same series (its points replaced: upserts).
	assert.Equal(t, keyA, write(`up{instance="a",job="api"}`, 1, 2, 3))
	// A series named by --series has no labels: the label commands do not see it.
	ok(t, env, points(100), append([]string{"write", "--series", "plain"}, flags...)...)

	// series: the table, then CSV and JSON lines of a union of selectors.
	out := ok(t, env, "", append([]string{"series", `up{job="api"}`}, flags...)...)
	assert.Equal(t, fmt.Sprintf("SERIES%s  LABELS\n%s  %s\n%s  %s\n", strings.Repeat(" ", 27), keyA, apiA, keyB, apiB), out)
	out = ok(t, env, "", append([]string{"series", `{job="web"}`, `up{instance=~"a|c"}`, `{job="web"}`, "--format", "csv"}, flags...)...)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err, out)
	assert.Equal(t, [][]string{{"series", "labels"}, {keyW, web}, {keyA, apiA}}, recs, "union, each once, sorted by labels")
	out = ok(t, env, "", append([]string{"series", `{__name__=~".+"}`, "--format", "json"}, flags...)...)
	assert.Equal(t, fmt.Sprintf(`{"series":"%s","labels":{"__name__":"http_requests_total","code":"500","job":"web"}}
{"series":"%s","labels":{"__name__":"up","instance":"a","job":"api"}}
{"series":"%s","labels":{"__name__":"up","instance":"b","job":"api"}}
`, keyW, keyA, keyB), out)
	// Nothing matches: no output, a note on stderr; a range before the points: nothing either.
	r := cli(t, env, "", append([]string{"series", `up{job="nope"}`}, flags...)...)
	assert.Equal(t, 0, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.line(t), `no series matches up{job="nope"}`)
	out = ok(t, env, "", append([]string{"series", "up", "--from", "2020-01-01", "--to", "2020-01-02", "--format", "csv"}, flags...)...)
	assert.Equal(t, "series,labels\n", out)

	// labels: names, values, restricted by --match.
	assert.Equal(t, "__name__\ncode\ninstance\njob\n", ok(t, env, "", append([]string{"labels"}, flags...)...))
	assert.Equal(t, "api\nweb\n", ok(t, env, "", append([]string{"labels", "job"}, flags...)...))
	assert.Equal(t, "http_requests_total\nup\n", ok(t, env, "", append([]string{"labels", "__name__"}, flags...)...))
	assert.Equal(t, "__name__\ninstance\njob\n", ok(t, env, "", append([]string{"labels", "--match", `up{job="api",instance="a"}`}, flags...)...))
	assert.Equal(t, "value\n500\n", ok(t, env, "", append([]string{"labels", "code", "--match", "up", "--match", `{job="web"}`, "--format", "csv"}, flags...)...))
	assert.Equal(t, "{\"value\":\"a\"}\n{\"value\":\"b\"}\n", ok(t, env, "", append([]string{"labels", "instance", "--format", "json"}, flags...)...))
	r = cli(t, env, "", append([]string{"labels", "zone"}, flags...)...)
	assert.Equal(t, 0, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.line(t), `no series with label "zone"`)

	// query by selector: every point, each series shown by its labels (a series column even
	// for one series).
	out = ok(t, env, "", append([]string{"query", `up{job="api"}`, "--from", "-1h", "--format", "csv"}, flags...)...)
	recs, err = csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err, out)
	assert.Equal(t, [][]string{{"time", "series", "value"},
		{ts(30), apiA, "1"}, {ts(20), apiA, "2"}, {ts(10), apiA, "3"},
		{ts(30), apiB, "10"}, {ts(20), apiB, "20"}, {ts(10), apiB, "30"}}, recs)
	out = ok(t, env, "", append([]string{"query", `http_requests_total{code=~"5.."}`, "--from", "-1h"}, flags...)...)
	assert.Equal(t, fmt.Sprintf("%-30s  %-*s  VALUE\n", "TIME", len(web), "SERIES")+
		fmt.Sprintf("%-30s  %s  5\n%-30s  %s  6\n%-30s  %s  7\n", ts(30), web, ts(20), web, ts(10), web), out)
	// With a step (from the raw points: the range is not rolled up), in JSON lines. The step's
	// windows start at multiples of it from 1970: the last before these points began in 2015,
	// the next in 2038 (with 1000h one began at 2026-12-04T16:00Z, between two points).
	out = ok(t, env, "", append([]string{"query", `{job=~"api|web"}`, `{instance="b"}`, "--from", "-1h", "--step", "200000h", "--agg", "sum", "--format", "json"}, flags...)...)
	var sums []string
	for line := range strings.Lines(out) {
		var rec struct {
			Series string
			Value  float64
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		sums = append(sums, fmt.Sprintf("%s=%g", rec.Series, rec.Value))
	}
	assert.Equal(t, []string{web + "=18", apiA + "=6", apiB + "=60"}, sums, out)
	// --series still works, by key too.
	out = ok(t, env, "", append([]string{"query", "--series", "plain", "--from", "-1h", "--format", "csv"}, flags...)...)
	assert.Equal(t, "time,value\n"+ts(30)+",100\n", out)
	out = ok(t, env, "", append([]string{"query", "--series", keyB, "--from", "-1h", "--format", "csv"}, flags...)...)
	assert.Equal(t, "time,value\n"+ts(30)+",10\n"+ts(20)+",20\n"+ts(10)+",30\n", out)
	// No series matches: an empty result, not an error.
	r = cli(t, env, "", append([]string{"query", `up{job="nope"}`, "--from", "-1h"}, flags...)...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.line(t), "no series matches")
	out = ok(t, env, "", append([]string{"query", `up{job="nope"}`, "--from", "-1h", "--format", "csv"}, flags...)...)
	assert.Equal(t, "time,series,value\n", out)

	// plot by selector.
	png := filepath.Join(t.TempDir(), "up.png")
	out = ok(t, env, "", append([]string{"plot", `up{job="api"}`, "--from", "-1h", "--out", png, "--width", "400", "--height", "200"}, flags...)...)
	assert.Contains(t, out, "wrote "+png)
	assert.Contains(t, out, "6 points")
	f, err := os.Open(png)
	require.NoError(t, err)
	defer f.Close()
	img, format, err := image.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, "png", format)
	assert.Equal(t, image.Rect(0, 0, 400, 200), img.Bounds())
	r = cli(t, env, "", append([]string{"plot", `up{job="nope"}`, "--from", "-1h", "--out", png}, flags...)...)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.line(t), `no series matches up{job="nope"}`)
}
