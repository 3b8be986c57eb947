package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image"
	_ "image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

// The tests run the command in process, through run, against the test binary's shared
// Azurite (started on first use, stopped by azurite.Main).
func TestMain(m *testing.M) { azurite.Main(m) }

type result struct {
	stdout, stderr string
	code           int
}

// line returns stderr, failing unless it is exactly one line.
func (r result) line(t *testing.T) string {
	t.Helper()
	s := strings.TrimSuffix(r.stderr, "\n")
	require.NotEmpty(t, s, "stderr is empty")
	require.NotContains(t, s, "\n", "stderr is more than one line: %q", r.stderr)
	return s
}

// tablets runs the command with env (nil: none at all) and stdin.
func cli(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	return tabletsCtx(t, context.Background(), env, stdin, args...)
}

func tabletsCtx(t *testing.T, ctx context.Context, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &out, &errOut, func(k string) string { return env[k] })
	return result{out.String(), errOut.String(), code}
}

// ok runs the command and requires success.
func ok(t *testing.T, env map[string]string, stdin string, args ...string) string {
	t.Helper()
	r := cli(t, env, stdin, args...)
	require.Equal(t, 0, r.code, "tablets %s: stderr %q", strings.Join(args, " "), r.stderr)
	return r.stdout
}

// account returns the environment naming the shared Azurite and a fresh table name, whose
// table (if the test creates it) is deleted when the test ends.
func account(t *testing.T) (map[string]string, string) {
	t.Helper()
	srv := azurite.Shared(t)
	table := azurite.NewTableName()
	t.Cleanup(func() {
		c, err := srv.NewClient(table, nil)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = c.Delete(ctx, nil)
		}
	})
	return map[string]string{envConnectionString: srv.ConnectionString}, table
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// Values whose shortest decimal form is long, tiny, huge, negative, integral, or not finite.
var awkward = []string{"0.1", "-2.5", "3", "1e-300", "1.7976931348623157e+308", "123456789.12345679",
	"0.30000000000000004", "-0", "NaN", "+Inf", "-Inf", "5e-324"}

func TestWriteQueryRoundTrip(t *testing.T) {
	for _, layout := range []string{"basic", "advanced"} {
		t.Run(layout, func(t *testing.T) {
			t.Parallel()
			env, table := account(t)
			start := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
			var csvIn strings.Builder
			csvIn.WriteString("time,value\n")
			var want []string
			for i, v := range awkward {
				ts := start.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
				fmt.Fprintf(&csvIn, "%s,%s\n", ts, v)
				f, err := strconv.ParseFloat(v, 64)
				require.NoError(t, err)
				if v == "-0" {
					f = 0 // Azurite (JavaScript) does not keep the sign of zero
				}
				want = append(want, ts+","+formatValue(f))
			}
			file := writeFile(t, "points.csv", csvIn.String())
			common := []string{"--table", table, "--layout", layout, "--series", "room 1"}
			out := ok(t, env, "", append([]string{"write", "--file", file}, common...)...)
			assert.Contains(t, out, fmt.Sprintf("wrote %d points", len(awkward)))

			rng := []string{"--from", "2024-05-01T00:00:00Z", "--to", "2024-05-02"}
			got := ok(t, env, "", append(append([]string{"query", "--format", "csv"}, common...), rng...)...)
			assert.Equal(t, "time,value\n"+strings.Join(want, "\n")+"\n", got)

			// JSON lines: the same values, non-finite ones as strings.
			got = ok(t, env, "", append(append([]string{"query", "--format", "json"}, common...), rng...)...)
			lines := strings.Split(strings.TrimSpace(got), "\n")
			require.Len(t, lines, len(awkward))
			for i, l := range lines {
				var rec struct {
					Series string
					Time   time.Time
					Value  json.RawMessage
				}
				require.NoError(t, json.Unmarshal([]byte(l), &rec), l)
				assert.Equal(t, "room 1", rec.Series)
				assert.True(t, rec.Time.Equal(start.Add(time.Duration(i)*time.Second)), l)
				wantV, _ := strconv.ParseFloat(awkward[i], 64)
				var v float64
				if rec.Value[0] == '"' {
					var s string
					require.NoError(t, json.Unmarshal(rec.Value, &s))
					v, _ = nonFinite(s)
				} else {
					require.NoError(t, json.Unmarshal(rec.Value, &v))
				}
				if math.IsNaN(wantV) {
					assert.True(t, math.IsNaN(v), l)
				} else {
					assert.Equal(t, wantV, v, l) // -0 == 0
				}
			}

			// The table format, and the CSV output imports back as is (into another series).
			got = ok(t, env, "", append(append([]string{"query"}, common...), rng...)...)
			assert.Contains(t, got, "2024-05-01T00:00:04Z")
			assert.Contains(t, got, "1.7976931348623157e+308")
			csvOut := ok(t, env, "", append(append([]string{"query", "--format", "csv"}, common...), rng...)...)
			ok(t, env, csvOut, "write", "--table", table, "--layout", layout, "--series", "copy")
			again := ok(t, env, "", append([]string{"query", "--format", "csv", "--table", table, "--layout", layout, "--series", "copy"}, rng...)...)
			assert.Equal(t, csvOut, again)
		})
	}
}

func TestJSONLinesAndTwoSeries(t *testing.T) {
	t.Parallel()
	env, table := account(t)
	// Numeric times: seconds, milliseconds (by magnitude) and a fractional second; a JSON
	// lines file recognized by its first byte on stdin.
	s1 := `{"time":1714521600,"value":1}
{"time":1714521601000,"value":2.5}

{"time":"2024-05-01T00:00:02Z","value":"NaN"}
`
	s2 := `{"time": 1714521600.5, "value": -1}
{"value": 7, "time": "2024-05-01T00:00:03.25Z"}
`
	ok(t, env, s1, "write", "--table", table, "--series", "s1", "--layout", "basic")
	ok(t, env, s2, "write", "--table", table, "--series", "s2", "--layout", "basic")
	got := ok(t, env, "", "query", "--table", table, "--series", "s1,s2", "--layout", "basic",
		"--from", "1714521600", "--to", "2024-05-01T01:00:00Z", "--format", "csv")
	assert.Equal(t, `time,series,value
2024-05-01T00:00:00Z,s1,1
2024-05-01T00:00:01Z,s1,2.5
2024-05-01T00:00:02Z,s1,NaN
2024-05-01T00:00:00.5Z,s2,-1
2024-05-01T00:00:03.25Z,s2,7
`, got)
	// Repeated flags and a table with a series column.
	got = ok(t, env, "", "query", "--table", table, "--series", "s2", "--series", "s1", "--layout", "basic",
		"--from", "2024-05-01", "--to", "2024-05-02")
	assert.Contains(t, got, "SERIES")
	assert.Equal(t, 6, strings.Count(got, "\n"), got)
}

func TestQueryStep(t *testing.T) {
	t.Parallel()
	env, table := account(t)
	// Ten minutes at 1 Hz, value = seconds since the start.
	var b strings.Builder
	start := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 600; i++ {
		fmt.Fprintf(&b, "%d,%d\n", start.Unix()+int64(i), i)
	}
	ok(t, env, b.String(), "write", "--table", table, "--series", "x", "--format", "csv")
	q := []string{"query", "--table", table, "--series", "x", "--from", "2024-05-01", "--to", "2024-05-01T00:10:00Z",
		"--step", "1m", "--format", "csv"}
	for _, tc := range []struct {
		agg  string
		want func(m int) float64
	}{
		{"avg", func(m int) float64 { return float64(60*m) + 29.5 }},
		{"max", func(m int) float64 { return float64(60*m + 59) }},
		{"count", func(m int) float64 { return 60 }},
		{"first", func(m int) float64 { return float64(60 * m) }},
		{"p50", func(m int) float64 { return float64(60*m) + 29.5 }},
	} {
		got := ok(t, env, "", append(q, "--agg", tc.agg)...)
		var want strings.Builder
		want.WriteString("time,value\n")
		for m := 0; m < 10; m++ {
			fmt.Fprintf(&want, "%s,%s\n", start.Add(time.Duration(m)*time.Minute).Format(time.RFC3339), formatValue(tc.want(m)))
		}
		assert.Equal(t, want.String(), got, tc.agg)
	}
	// Several series with a step: each series downsampled on its own.
	ok(t, env, "2024-05-01T00:00:30Z,100\n", "write", "--table", table, "--series", "y")
	got := ok(t, env, "", "query", "--table", table, "--series", "x,y", "--from", "2024-05-01", "--to", "2024-05-01T00:02:00Z",
		"--step", "1h", "--agg", "sum", "--format", "json")
	assert.Equal(t, `{"series":"x","time":"2024-05-01T00:00:00Z","value":7140}
{"series":"y","time":"2024-05-01T00:00:00Z","value":100}
`, got)
	r := cli(t, env, "", append(q, "--agg", "p200")...)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.line(t), "--agg")
}

func TestPlot(t *testing.T) {
	t.Parallel()
	env, table := account(t)
	var a, b strings.Builder
	start := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 7200; i++ {
		ts := start.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		fmt.Fprintf(&a, "%s,%g\n", ts, math.Sin(float64(i)/600)+float64(i%7)/10)
		if i%60 == 0 && (i < 3000 || i > 5000) { // a gap in the middle
			fmt.Fprintf(&b, "%s,%g\n", ts, math.Cos(float64(i)/900))
		}
	}
	ok(t, env, a.String(), "write", "--table", table, "--series", "a")
	ok(t, env, b.String(), "write", "--table", table, "--series", "b")
	dir := t.TempDir()
	png := filepath.Join(dir, "chart.png")
	out := ok(t, env, "", "plot", "--table", table, "--series", "a,b", "--from", "2024-05-01", "--to", "2024-05-01T02:00:00Z",
		"--out", png, "--width", "640", "--height", "320")
	assert.Contains(t, out, fmt.Sprintf("%s points", thousands(int64(strings.Count(a.String()+b.String(), "\n")))))
	f, err := os.Open(png)
	require.NoError(t, err)
	defer f.Close()
	img, format, err := image.Decode(f)
	require.NoError(t, err)
	assert.Equal(t, "png", format)
	assert.Equal(t, image.Rect(0, 0, 640, 320), img.Bounds())
	colored := 0 // pixels of a series' color, not gray
	for y := 0; y < 320; y++ {
		for x := 0; x < 640; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if max(r, g, b)-min(r, g, b) > 0x2000 {
				colored++
			}
		}
	}
	assert.Greater(t, colored, 1000, "the chart has no colored lines")

	svg := filepath.Join(dir, "chart.svg")
	ok(t, env, "", "plot", "--table", table, "--series", "a", "--from", "2024-05-01", "--to", "2024-05-01T02:00:00Z",
		"--out", svg, "--title", "a <&> title")
	data, err := os.ReadFile(svg)
	require.NoError(t, err)
	dec := xml.NewDecoder(bytes.NewReader(data))
	var root xml.StartElement
	for {
		tok, err := dec.Token()
		require.NoError(t, err, "no root element")
		if se, isStart := tok.(xml.StartElement); isStart {
			root = se
			break
		}
	}
	assert.Equal(t, "svg", root.Name.Local)
	for { // the whole document parses
		if _, err := dec.Token(); err != nil {
			assert.Equal(t, "EOF", err.Error())
			break
		}
	}

	r := cli(t, env, "", "plot", "--table", table, "--series", "a", "--from", "2020-01-01", "--to", "2020-01-02", "--out", svg)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.line(t), "no points")
	r = cli(t, env, "", "plot", "--table", table, "--series", "a", "--out", filepath.Join(dir, "chart.gif"))
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.line(t), ".png or .svg")
}

func TestBadLine(t *testing.T) {
	t.Parallel()
	env, table := account(t)
	var b strings.Builder
	b.WriteString("time,value\n")
	for i := 0; i < 25; i++ {
		fmt.Fprintf(&b, "2024-05-01T00:00:%02dZ,%d\n", i, i)
	}
	b.WriteString("2024-05-01T00:00:30Z,twelve\n") // line 27
	b.WriteString("2024-05-01T00:00:31Z,31\n")
	file := writeFile(t, "bad.csv", b.String())
	// Chunks of 10: two Writes went out before the bad line, the last 5 points are written
	// when it is found.
	r := cli(t, env, "", "write", "--table", table, "--series", "s", "--file", file, "--chunk", "10")
	assert.Equal(t, exitError, r.code)
	msg := r.line(t)
	assert.Contains(t, msg, "line 27")
	assert.Contains(t, msg, `"twelve"`)
	assert.Contains(t, msg, "25 points before it were stored")
	got := ok(t, env, "", "query", "--table", table, "--series", "s", "--from", "2024-05-01", "--to", "2024-05-02", "--format", "csv")
	assert.Equal(t, 26, strings.Count(got, "\n"), "header and the 25 points before the bad line")

	// Bad JSON lines: the line number counts blank lines; a bad time.
	r = cli(t, env, "{\"time\":1714521600,\"value\":1}\n\n{\"time\":\"yesterday\",\"value\":2}\n",
		"write", "--table", table, "--series", "j")
	assert.Equal(t, exitError, r.code)
	msg = r.line(t)
	assert.Contains(t, msg, "line 3")
	assert.Contains(t, msg, "1 point before it was stored")
	// A time before 1970 is a bad line too, not a failed Write.
	r = cli(t, env, "1969-12-31T23:59:59Z,1\n", "write", "--table", table, "--series", "j", "--format", "csv")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.line(t), "line 1")
	// A CSV line with three fields.
	r = cli(t, env, "2024-05-01T00:00:00Z,1\n2024-05-01T00:00:01Z,1,2\n", "write", "--table", table, "--series", "j")
	assert.Contains(t, r.line(t), "line 2: 3 fields")
	r = cli(t, env, "1\n", "write", "--table", table, "--series", "j")
	assert.Contains(t, r.line(t), "line 1: 1 field, want 2")
}

func TestLatestAndDelete(t *testing.T) {
	t.Parallel()
	env, table := account(t)
	var b strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&b, "2024-05-01T00:%02d:00Z,%d\n", i, i)
	}
	for _, layout := range []string{"basic", "advanced"} {
		series := "s-" + layout
		ok(t, env, b.String(), "write", "--table", table, "--series", series, "--layout", layout)
		got := ok(t, env, "", "latest", "--table", table, "--series", series, "--layout", layout, "-n", "3", "--format", "csv")
		assert.Equal(t, "time,value\n2024-05-01T00:19:00Z,19\n2024-05-01T00:18:00Z,18\n2024-05-01T00:17:00Z,17\n", got, layout)
		ok(t, env, "", "delete", "--table", table, "--series", series, "--layout", layout,
			"--from", "2024-05-01T00:05:00Z", "--to", "2024-05-01T00:18:00Z")
		got = ok(t, env, "", "query", "--table", table, "--series", series, "--layout", layout,
			"--from", "2024-05-01", "--to", "2024-05-02", "--format", "csv", "--step", "1h", "--agg", "count")
		assert.Equal(t, "time,value\n2024-05-01T00:00:00Z,7\n", got, layout)
		r := cli(t, env, "", "delete", "--table", table, "--series", series, "--layout", layout, "--from", "2024-05-01")
		assert.Equal(t, exitUsage, r.code)
		assert.Contains(t, r.line(t), "--from and --to are required")
	}
}

// A --db database: write, query, latest and delete across its raw tables; retain drops the
// old ones and a write there is refused.
func TestDatabase(t *testing.T) {
	t.Parallel()
	env, _ := account(t)
	db := "cli" + strings.ToLower(azurite.NewTableName()[1:9])
	now := time.Now().UTC().Truncate(time.Hour)
	var b strings.Builder
	for h := 72; h >= 1; h-- {
		fmt.Fprintf(&b, "%s,%d\n", now.Add(-time.Duration(h)*time.Hour).Format(time.RFC3339), h)
	}
	flags := []string{"--db", db, "--raw-period", "24h"}
	ok(t, env, b.String(), append([]string{"write", "--series", "cpu"}, flags...)...)
	got := ok(t, env, "", append([]string{"latest", "--series", "cpu", "-n", "2", "--format", "csv"}, flags...)...)
	assert.Equal(t, fmt.Sprintf("time,value\n%s,1\n%s,2\n", now.Add(-time.Hour).Format(time.RFC3339), now.Add(-2*time.Hour).Format(time.RFC3339)), got)
	// One window holds every point: its step's windows start at multiples of it from 1970,
	// in 2015 and 2038 (with 1000h one began at 2026-12-04T16:00Z, among the points).
	got = ok(t, env, "", append([]string{"query", "--series", "cpu", "--from", "-80h", "--to", "now", "--format", "csv", "--step", "200000h", "--agg", "count"}, flags...)...)
	assert.Contains(t, got, ",72\n", "72 points across the raw tables")

	// Rollup, then an aggregate read: the same counts, percentiles from the sketches.
	out := ok(t, env, "", append([]string{"rollup", "--from", "-80h", "--to", "now"}, flags...)...)
	assert.Contains(t, out, "rolled up")
	got = ok(t, env, "", append([]string{"query", "--series", "cpu", "--from", "-80h", "--to", "now", "--format", "csv", "--step", "200000h", "--agg", "count"}, flags...)...)
	assert.Contains(t, got, ",72\n", "72 points, from the tiers and the raw points")
	got = ok(t, env, "", append([]string{"query", "--series", "cpu", "--from", "-80h", "--to", "now", "--format", "csv", "--step", "200000h", "--agg", "max"}, flags...)...)
	assert.Contains(t, got, ",72\n", "the largest value")

	png := filepath.Join(t.TempDir(), "db.png")
	out = ok(t, env, "", append([]string{"plot", "--series", "cpu", "--from", "-80h", "--to", "now", "--out", png}, flags...)...)
	assert.Contains(t, out, "72 points")
	_, err := os.Stat(png)
	require.NoError(t, err)

	out = ok(t, env, "", append([]string{"retain", "--raw-retention", "48h"}, flags...)...)
	assert.Contains(t, out, "dropped "+db+"r")
	r := cli(t, env, "1000000000,1\n", append([]string{"write", "--series", "cpu", "--raw-retention", "48h"}, flags...)...)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.stderr, "expired")

	r = cli(t, env, "", "latest", "--series", "cpu", "--db", db, "--table", "abc")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.line(t), "--table and --db are exclusive")
	r = cli(t, env, "", "latest", "--series", "cpu", "--db", "1bad")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.line(t), "letters and digits")
	r = cli(t, env, "", "latest", "--series", "cpu", "--table", "abc", "--raw-period", "1h")
	assert.Equal(t, exitUsage, r.code)
	r = cli(t, env, "", "retain", "--db", db)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.line(t), "--raw-retention is required")
}

func TestErrors(t *testing.T) {
	t.Parallel()
	// No account for a command that needs one: one clear line, no usage dump.
	for _, args := range [][]string{
		{"query", "--table", "abc", "--series", "s"},
		{"write", "--table", "abc", "--series", "s"},
		{"plot", "--table", "abc", "--series", "s", "--out", "x.png"},
		{"latest", "--table", "abc", "--series", "s"},
		{"delete", "--table", "abc", "--series", "s", "--from", "-1h", "--to", "now"},
	} {
		r := cli(t, nil, "", args...)
		assert.Equal(t, exitError, r.code, args)
		assert.Contains(t, r.line(t), "no storage account: set $AZURE_TABLES_CONNECTION_STRING", args)
		assert.Empty(t, r.stdout, args)
	}
	// Usage errors: status 2, one line.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"query", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"query", "--table", "abc"}, "--series is required"},
		{[]string{"query", "--table", "a_b", "--series", "s"}, "not a valid table name"},
		{[]string{"query", "--table", "abc", "--series", "s", "--from", "yesterday"}, "--from"},
		{[]string{"query", "--table", "abc", "--series", "s", "--from", "now", "--to", "-1h"}, "empty range"},
		{[]string{"query", "--table", "abc", "--series", "s", "--layout", "fancy"}, `unknown --layout "fancy"`},
		{[]string{"write", "--table", "abc", "--series", "s", "--time-unit", "days"}, "time unit"},
		{[]string{"query", "extra"}, "unexpected argument"},
	} {
		r := cli(t, nil, "", tc.args...)
		assert.Equal(t, exitUsage, r.code, tc.args)
		assert.Contains(t, r.line(t), tc.want, tc.args)
		assert.NotContains(t, r.stdout+r.stderr, "Usage:", tc.args)
	}
	r := cli(t, nil, "", "query", "--table", "abc", "--series", "s", "--layout", "advanced", "--row-factor", "7m")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.line(t), "RowFactor")
}

func TestServiceErrors(t *testing.T) {
	t.Parallel()
	// The service says no (a wrong account key): the SDK's multi-line report becomes one line.
	srv := azurite.Shared(t)
	bad := strings.Replace(srv.ConnectionString, azurite.AccountKey, "AAAA"+azurite.AccountKey[4:], 1)
	r := cli(t, map[string]string{envConnectionString: bad}, "", "latest", "--table", "abc", "--series", "s")
	assert.Equal(t, exitError, r.code)
	msg := r.line(t)
	assert.Contains(t, msg, "HTTP 403")
	assert.NotContains(t, msg, "RESPONSE")
	// A table that does not exist.
	r = cli(t, map[string]string{envConnectionString: srv.ConnectionString}, "", "query", "--table", "nosuchtable", "--series", "s")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.line(t), "HTTP 404 TableNotFound")
	// Azure AD over plain HTTP is refused before any token is asked for.
	r = cli(t, nil, "", "latest", "--table", "abc", "--series", "s", "--account-url", srv.Endpoint)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.line(t), "https")
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"", "demo", "write", "query", "plot", "latest", "delete"} {
		args := []string{"--help"}
		if sub != "" {
			args = []string{sub, "--help"}
		}
		r := cli(t, nil, "", args...)
		assert.Equal(t, 0, r.code, sub)
		assert.Contains(t, r.stdout, "Usage:", sub)
		assert.Contains(t, r.stdout, strings.TrimSpace("tablets "+sub), sub)
		assert.Empty(t, r.stderr, sub)
		if sub != "" {
			r2 := cli(t, nil, "", "help", sub)
			assert.Equal(t, r.stdout, r2.stdout, sub)
		}
	}
}

// TestDemo runs the demo as a person would, with no account: it starts its own Azurite.
// (--local ignores the account in the environment: the path of an empty environment.)
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Azurite; skipped under -short")
	}
	r := cli(t, map[string]string{envConnectionString: "AccountName=not;AccountKey=used"}, "", "demo", "--hours", "1", "--local")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "local Azurite")
	rows := map[string]bool{}
	for _, l := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && (f[2] == "basic" || f[2] == "advanced") {
			rows[f[0]+" "+f[1]+" "+f[2]] = true
			assert.Equal(t, "3,600", f[3], l)
		}
	}
	assert.Equal(t, map[string]bool{"write 1h basic": true, "write 1h advanced": true,
		"query 1h basic": true, "query 1h advanced": true}, rows, r.stdout)
	assert.Contains(t, r.stdout, "advanced vs basic:")
}

// TestDemoAccount runs the demo on an account: it works in its own tables and deletes them,
// also when interrupted.
func TestDemoAccount(t *testing.T) {
	srv := azurite.Shared(t)
	env := map[string]string{envConnectionString: srv.ConnectionString}
	demoTables := func() []string {
		sc, err := srv.NewServiceClient(nil)
		require.NoError(t, err)
		var names []string
		filter := "TableName ge 'tabletsdemo' and TableName lt 'tabletsdemp'"
		p := sc.NewListTablesPager(&aztables.ListTablesOptions{Filter: &filter})
		for p.More() {
			page, err := p.NextPage(context.Background())
			require.NoError(t, err)
			for _, tb := range page.Tables {
				names = append(names, *tb.Name)
			}
		}
		return names
	}
	require.Empty(t, demoTables())

	r := cli(t, env, "", "demo", "--hours", "0.5", "--basic-hours", "0.25", "--db-days", "2")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "write 15m")
	assert.Contains(t, r.stdout, "write 30m")
	assert.Contains(t, r.stdout, "127.0.0.1")
	assert.Regexp(t, `1h windows from the raw points +48 `, r.stdout)
	assert.Regexp(t, `1h windows from the hour tier +48 +3 `, r.stdout, "the tier answers in three requests: its blocks, the dirty markers and the staged points")
	assert.Empty(t, demoTables(), "the database's tables too")

	// Ctrl-C once the basic layout has stored its first hour of two: exit 130, no write
	// after it, no table printed, the tables deleted.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var written []string
	ctx = withDemoWritten(ctx, func(layout string, points int) {
		written = append(written, fmt.Sprintf("%s %d", layout, points))
		if layout == "basic" && points >= 3600 {
			cancel()
		}
	})
	r = tabletsCtx(t, ctx, env, "", "demo", "--hours", "2")
	assert.Equal(t, exitInterrupted, r.code, r.stderr)
	assert.Equal(t, []string{"basic 3600"}, written, "the write after the interrupt was not made")
	assert.Contains(t, r.stderr, "basic: writing 7,200 points...")
	assert.NotContains(t, r.stderr, "advanced:")
	assert.Contains(t, r.stderr, "tablets: interrupted")
	assert.Empty(t, r.stdout, "the table is printed only when every layout is done")
	assert.Empty(t, demoTables())
}
