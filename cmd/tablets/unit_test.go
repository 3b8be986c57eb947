package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/basic"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

func TestParseUnix(t *testing.T) {
	for _, tc := range []struct {
		in, unit string
		want     time.Time
	}{
		{"1714521600", unitAuto, time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)},
		{"1714521600.25", unitAuto, time.Date(2024, 5, 1, 0, 0, 0, 250e6, time.UTC)},
		{"1714521600123", unitAuto, time.Date(2024, 5, 1, 0, 0, 0, 123e6, time.UTC)},
		{"1714521600123.5", unitAuto, time.Date(2024, 5, 1, 0, 0, 0, 123500e3, time.UTC)},
		{"1714521600123456", unitAuto, time.Date(2024, 5, 1, 0, 0, 0, 123456e3, time.UTC)},
		{"1714521600123456789", unitAuto, time.Date(2024, 5, 1, 0, 0, 0, 123456789, time.UTC)},
		{"99999999999", unitAuto, time.Unix(99999999999, 0).UTC()}, // just under 1e11: seconds, 5138
		{"100000000000", unitAuto, time.UnixMilli(1e11).UTC()},     // 1e11: milliseconds, 1973
		{"99999999999", unitS, time.Unix(99999999999, 0).UTC()},
		{"1714521600", unitMS, time.UnixMilli(1714521600).UTC()},
		{"0", unitAuto, time.Unix(0, 0).UTC()},
		{"1.7145216e9", unitAuto, time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)},
		{"1714521600.1234567891", unitS, time.Date(2024, 5, 1, 0, 0, 0, 123456789, time.UTC)},
	} {
		got, err := parseUnix(tc.in, tc.unit)
		require.NoError(t, err, tc.in)
		assert.True(t, tc.want.Equal(got), "%s %s: got %s want %s", tc.in, tc.unit, got, tc.want)
	}
	for _, bad := range []string{"", "abc", "1e400", "99999999999999999999999", "1.2.3"} {
		_, err := parseUnix(bad, unitAuto)
		assert.Error(t, err, bad)
	}
}

func TestParseFlagTime(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"now":                       now,
		"NOW":                       now,
		"-2h":                       now.Add(-2 * time.Hour),
		"+30m":                      now.Add(30 * time.Minute),
		"now-7d":                    now.Add(-7 * 24 * time.Hour),
		"now - 1w":                  now.Add(-7 * 24 * time.Hour),
		"-1d12h":                    now.Add(-36 * time.Hour),
		"-1.5d":                     now.Add(-36 * time.Hour),
		"2024-05-01":                time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC),
		"2024-05-01T10:00:00+02:00": time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC),
		"2024-05-01T10:00:00.5Z":    time.Date(2024, 5, 1, 10, 0, 0, 5e8, time.UTC),
		"2024-05-01 10:00:00":       time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC),
		"1714521600":                time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC),
		"1714521600000":             time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC),
	} {
		got, err := parseFlagTime(in, now)
		require.NoError(t, err, in)
		assert.True(t, want.Equal(got), "%s: got %s want %s", in, got, want)
	}
	for _, bad := range []string{"", "yesterday", "now+", "-2x", "2h", "2024-13-01"} {
		_, err := parseFlagTime(bad, now)
		assert.Error(t, err, bad)
	}
}

func TestPointReaders(t *testing.T) {
	read := func(format, in string) ([]tablets.Point, error) {
		br := bufio.NewReader(strings.NewReader(in))
		f, err := inputFormat(format, "", br)
		require.NoError(t, err)
		r := newPointReader(f, br, unitAuto)
		var pts []tablets.Point
		for {
			p, err := r.next()
			if err == io.EOF {
				return pts, nil
			}
			if err != nil {
				return pts, err
			}
			pts = append(pts, p)
		}
	}
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	// CSV: a header with other columns in another order, a BOM, comments, quoting.
	pts, err := read("", "\uFEFFvalue,host,time\n# a comment\n1.5,\"a,b\",2024-05-01T00:00:00Z\n-Inf,x,1714521601\n")
	require.NoError(t, err)
	require.Len(t, pts, 2)
	assert.Equal(t, tablets.Point{Time: t0, Value: 1.5}, pts[0])
	assert.True(t, math.IsInf(pts[1].Value, -1))
	assert.True(t, t0.Add(time.Second).Equal(pts[1].Time))
	// Auto-detected JSON lines after blank lines.
	pts, err = read("", "\n\n  {\"time\":\"2024-05-01T00:00:00Z\",\"value\":\"Infinity\"}\n")
	require.NoError(t, err)
	require.Len(t, pts, 1)
	assert.True(t, math.IsInf(pts[0].Value, 1))
	// Errors name the line.
	for in, want := range map[string]string{
		"time,value\n2024-05-01T00:00:00Z,1\n2024-05-01T00:00:01Z,\n": "line 3: bad value",
		"2024-05-01T00:00:00Z,1\nnope,1\n":                            "line 2: bad time",
		"2024-05-01T00:00:00Z,1\n\"unterminated,1\n":                  "line 2:",
		"{\"time\":1,\"value\":1}\n{\"time\":2}\n":                    `line 2: no "value"`,
		"{\"time\":1,\"value\":1}\n{\"time\":2,\"value\":\"x\"}\n":    "line 2: bad value",
		"{\"time\":1,\"value\":1}\n{oops}\n":                          "line 2: bad JSON",
		"[{\"time\":1,\"value\":1}]\n":                                "line 1: a JSON array",
		"{\"time\":true,\"value\":1}\n":                               "line 1: bad time",
	} {
		_, err := read("", in)
		var le *lineError
		require.True(t, errors.As(err, &le), "%q: %v", in, err)
		assert.Contains(t, err.Error(), want, in)
	}
	_, err = inputFormat("xml", "", bufio.NewReader(strings.NewReader("")))
	assert.Error(t, err)
}

func TestOneLine(t *testing.T) {
	u, _ := url.Parse("https://acct.table.core.windows.net/t()?sig=secret")
	re := &azcore.ResponseError{ErrorCode: "TableNotFound", StatusCode: 404,
		RawResponse: &http.Response{StatusCode: 404, Request: &http.Request{Method: "GET", URL: u}}}
	err := fmt.Errorf("query many: %w", re)
	msg := oneLine(err)
	assert.Equal(t, "query many: HTTP 404 TableNotFound (GET https://acct.table.core.windows.net/t())", msg)
	assert.Equal(t, "a; b: c", oneLine(errors.New("a\n  b:\n------\nc\n")))
}

func TestSpanName(t *testing.T) {
	assert.Equal(t, "24h", spanName(86400))
	assert.Equal(t, "2h", spanName(7200))
	assert.Equal(t, "15m", spanName(900))
	assert.Equal(t, "1.5h", spanName(5400))
	assert.Equal(t, "86,400", thousands(86400))
	assert.Equal(t, "-1,000,000", thousands(-1000000))
	assert.Equal(t, "1.2 MB", humanBytes(1234567))
	assert.Equal(t, "999 B", humanBytes(999))
}

// TestCounter checks the demo's counting transport against the azurite Checker's counts.
func TestCounter(t *testing.T) {
	srv := azurite.Shared(t)
	_, table := account(t)
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	ctr := &counter{next: checker}
	sc, err := connFlags{connectionString: srv.ConnectionString}.serviceClient(ctr)
	require.NoError(t, err)
	client := sc.NewClient(table)
	ctx := context.Background()
	require.NoError(t, tablets.EnsureTable(ctx, client))
	store, err := basic.New(client, nil)
	require.NoError(t, err)
	pts := make([]tablets.Point, 1234)
	for i := range pts {
		pts[i] = tablets.Point{Time: time.Unix(int64(1714521600+i), 0), Value: float64(i) + 0.5}
	}
	before := ctr.snapshot()
	require.NoError(t, store.Write(ctx, "s", pts...))
	c := ctr.snapshot().sub(before)
	st := checker.Stats()
	assert.Equal(t, int64(13), c.Requests)
	assert.Equal(t, st.Batches, c.Requests)
	assert.Equal(t, int64(1235), c.EntitiesSent, "the points and the series' Latest hint")
	assert.Equal(t, st.BatchOperations, c.EntitiesSent)
	assert.Equal(t, st.EntityBytes, c.EntityBytes, "the entities' JSON, counted the same way")
	assert.Greater(t, c.BytesSent, st.EntityBytes, "bodies are bigger than the entities in them")
	assert.Greater(t, c.BytesReceived, int64(0))

	before = ctr.snapshot()
	n := 0
	for _, err := range store.Query(ctx, "s", time.Unix(0, 0), time.Unix(1714521600+5000, 0)) {
		require.NoError(t, err)
		n++
	}
	c = ctr.snapshot().sub(before)
	assert.Equal(t, 1234, n)
	assert.Equal(t, int64(2), c.Requests) // pages of 1,000
	assert.Equal(t, int64(1234), c.EntitiesReceived)
	assert.Equal(t, int64(0), c.BytesSent)
}

// A staging partition count that is not a power of two is a usage error, before any request.
func TestServeStagingPartitionsChecked(t *testing.T) {
	for _, n := range []string{"3", "-1", "512"} {
		r := cli(t, map[string]string{}, "", "serve", "--db", "metrics", "--staging-partitions", n)
		assert.Equal(t, exitUsage, r.code, "--staging-partitions %s", n)
		assert.Contains(t, r.stderr, "StagingPartitions", "--staging-partitions %s", n)
	}
}

func TestServeAccountRequestsChecked(t *testing.T) {
	for _, flag := range []string{"--account.max-requests-in-flight", "--background.max-jobs", "--staging.max-read-bytes"} {
		for _, n := range []string{"0", "-4"} {
			r := cli(t, map[string]string{}, "", "serve", "--db", "metrics", flag, n)
			assert.Equal(t, exitUsage, r.code, "%s %s", flag, n)
			assert.Contains(t, r.stderr, flag+" must be positive", "%s %s", flag, n)
		}
	}
}
