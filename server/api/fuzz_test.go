package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// FuzzParams: the parsers of the query API's parameters (times, durations and steps,
// match[] selectors) never panic, and what they accept is usable: a time or a duration
// parses again from its own formatting to itself, a matcher set has a matcher that does not
// match the empty string.
func FuzzParams(f *testing.F) {
	for _, s := range []string{"1700000000", "1700000000.123", "-1.5", "2023-11-14T22:13:20Z", "2023-11-14T22:13:20.5+02:00",
		promMinTimeFormatted, promMaxTimeFormatted, "1e300", "NaN", "Inf", "-0", "0x10", "5m", "1h30m", "1d", "1y2w", "0.001", "15",
		"9223372036.854775807", "up", `{job="api"}`, `up{job=~"a|b",instance!=""}`, `{__name__=~".*"}`, `{job=~"("}`, `{"http.status"="200"}`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if tm, err := parseTime(s); err == nil {
			again, err := parseTime(tm.Format(time.RFC3339Nano))
			if err != nil && tm.Year() >= 0 && tm.Year() <= 9999 {
				t.Fatalf("%q parsed to %v, which does not parse: %v", s, tm, err)
			}
			if err == nil && !again.Equal(tm) {
				t.Fatalf("%q parsed to %v, formatted and parsed to %v", s, tm, again)
			}
		}
		if d, err := parseDuration(s); err == nil {
			// No overflow: the sign is the text's.
			if negative := strings.HasPrefix(strings.TrimSpace(s), "-"); (d < 0 && !negative) || (d > 0 && negative) {
				t.Fatalf("%q parsed to %v", s, d)
			}
			if d >= 0 && d%time.Millisecond == 0 {
				again, err := parseDuration(model.Duration(d).String())
				if err != nil || again != d {
					t.Fatalf("%q parsed to %v, formatted and parsed to %v, %v", s, d, again, err)
				}
			}
		}
		if sets, err := parseMatchers([]string{s}); err == nil {
			if len(sets) != 1 {
				t.Fatalf("%q: %d matcher sets", s, len(sets))
			}
			nonEmpty := false
			for _, m := range sets[0] {
				nonEmpty = nonEmpty || !m.Matches("")
			}
			if !nonEmpty {
				t.Fatalf("%q selects everything", s)
			}
		}
	})
}

// FuzzQueryParams: whatever times, steps, lookback and match[] a client sends to the query
// API's endpoints, the answer is a JSON envelope, 200 or 400 (bad_data), never a panic; a
// 400 when a parameter does not parse.
func FuzzQueryParams(f *testing.F) {
	f.Add("1700003600", "1700000000", "1700003600", "15", "5m", "up")
	f.Add("", "2023-11-14T22:13:20Z", "2023-11-14T23:13:20Z", "1m", "", `{job="api"}`)
	f.Add("x", "1", "0", "0", "-1", `{job=~""}`)
	f.Add("-1e15", "-9e15", "9e15", "1e12", "1e-9", `{__name__=~"http.+",job!="web"}`)
	f.Add(promMinTimeFormatted, promMinTimeFormatted, promMaxTimeFormatted, "1y", "1d", `{"http.status"="200"}`)
	a, err := New(testStore(), &Options{Now: func() time.Time { return time.Unix(t0+duration, 0) }, Timeout: time.Minute})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { a.Close() })
	h := a.Handler()
	f.Fuzz(func(t *testing.T, at, start, end, step, lookback, match string) {
		for _, c := range []struct {
			path     string
			params   url.Values
			mustFail bool // a parameter the endpoint requires does not parse
		}{
			{"/api/v1/query", url.Values{"query": {"up"}, "time": {at}, "lookback_delta": {lookback}},
				(at != "" && !parses(parseTime, at)) || (lookback != "" && !parses(parseDuration, lookback))},
			{"/api/v1/query_range", url.Values{"query": {"sum(rate(http_requests_total[5m]))"}, "start": {start}, "end": {end}, "step": {step}},
				!parses(parseTime, start) || !parses(parseTime, end) || !parses(parseDuration, step)},
			{"/api/v1/series", url.Values{"match[]": {match}, "start": {start}, "end": {end}},
				(start != "" && !parses(parseTime, start)) || (end != "" && !parses(parseTime, end)) || !parses(parseMatchers1, match)},
			{"/api/v1/labels", url.Values{"match[]": {match}, "start": {start}}, (start != "" && !parses(parseTime, start)) || !parses(parseMatchers1, match)},
			{"/api/v1/label/job/values", url.Values{"match[]": {match}, "end": {end}}, (end != "" && !parses(parseTime, end)) || !parses(parseMatchers1, match)},
		} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.params.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			h.ServeHTTP(rec, req)
			var r response
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
				t.Fatalf("%s %v: not JSON: %s", c.path, c.params, rec.Body)
			}
			switch {
			case rec.Code == http.StatusOK && r.Status == "success" && !c.mustFail:
			case rec.Code == http.StatusBadRequest && r.ErrorType == "bad_data":
			default:
				t.Fatalf("%s %v: %d %s", c.path, c.params, rec.Code, rec.Body)
			}
		}
	})
}

func parses[T any](parse func(string) (T, error), s string) bool {
	_, err := parse(s)
	return err == nil
}

func parseMatchers1(s string) (any, error) { return parseMatchers([]string{s}) }

// TestParseOutOfRange: numbers Prometheus turns into arbitrary times or durations are 400s.
func TestParseOutOfRange(t *testing.T) {
	for _, s := range []string{"NaN", "Inf", "-Inf", "1e300", "-1e300", "9.3e15"} {
		_, err := parseTime(s)
		require.Error(t, err, "time %q", s)
	}
	for _, s := range []string{"NaN", "9223372036.854775807", "1e19", "-1e19"} {
		_, err := parseDuration(s)
		require.Error(t, err, "duration %q", s)
	}
	_, srv := newServer(t, testStore(), nil)
	code, r, body := do(t, srv, http.MethodGet, "/api/v1/query_range", url.Values{"query": {"up"}, "start": {"NaN"}, "end": {"1"}, "step": {"1"}})
	require.Equal(t, http.StatusBadRequest, code, "body: %s", body)
	require.Equal(t, `invalid parameter "start": cannot parse "NaN" to a valid timestamp: out of range`, r.Error)
}
