package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/seed71701133/tablets"
)

// The parsers below reproduce Prometheus' web/api/v1 ones, so that clients see the same
// accepted syntax and the same error messages.

// Prometheus' bounds of an optional time range (series, labels, label values, exemplars):
// its defaults when start or end is absent. Clients such as Grafana send them back formatted
// as RFC 3339, so they parse. A read clamps them to the stores' range ([storeRange]).
var (
	promMinTime = time.Unix(math.MinInt64/1000+62135596801, 0).UTC()
	promMaxTime = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC()

	promMinTimeFormatted = promMinTime.Format(time.RFC3339Nano)
	promMaxTimeFormatted = promMaxTime.Format(time.RFC3339Nano)
)

// storeRange clamps [start, end] to the times the stores hold, [tablets.MinTime,
// tablets.MaxTime]; ok is false when none of it is left (the answer is then empty without
// asking the storage).
func storeRange(start, end time.Time) (from, to time.Time, ok bool) {
	from, to = start, end
	if from.Before(tablets.MinTime) {
		from = tablets.MinTime
	}
	if to.After(tablets.MaxTime) {
		to = tablets.MaxTime
	}
	return from, to, !to.Before(from)
}

// The bounds of a time in float seconds: Prometheus' range.
var (
	minUnixSeconds = float64(promMinTime.Unix())
	maxUnixSeconds = float64(promMaxTime.Unix())
)

// maxPointsPerSeries is Prometheus' limit on the resolution of a range query: 60s steps
// for a week or 1h steps for a year.
const maxPointsPerSeries = 11000

// parseTime accepts Unix seconds as a float (rounded to milliseconds) or RFC 3339.
// Unlike Prometheus, which turns them into arbitrary times, it refuses NaN, infinities and
// seconds beyond its own bounds of a time range.
func parseTime(s string) (time.Time, error) {
	if t, err := strconv.ParseFloat(s, 64); err == nil {
		if !(t >= minUnixSeconds && t <= maxUnixSeconds) { // also NaN
			return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp: out of range", s)
		}
		s, ns := math.Modf(t)
		ns = math.Round(ns*1000) / 1000
		return time.Unix(int64(s), int64(ns*float64(time.Second))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	// time.Parse only handles 4-digit years; accept Prometheus' boundary times anyway.
	switch s {
	case promMinTimeFormatted:
		return promMinTime, nil
	case promMaxTimeFormatted:
		return promMaxTime, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

// parseTimeParam parses the form value paramName, or returns def if it is absent.
func parseTimeParam(r *http.Request, paramName string, def time.Time) (time.Time, error) {
	val := r.FormValue(paramName)
	if val == "" {
		return def, nil
	}
	t, err := parseTime(val)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid time value for '%s': %w", paramName, err)
	}
	return t, nil
}

// parseDuration accepts float seconds or a Prometheus duration ("1m30s", "1d"). Unlike
// Prometheus it refuses NaN and 2^63 ns (float64(math.MaxInt64) is 2^63, one past the
// largest Duration), which Prometheus turns into the most negative Duration.
func parseDuration(s string) (time.Duration, error) {
	if d, err := strconv.ParseFloat(s, 64); err == nil {
		ts := d * float64(time.Second)
		if math.IsNaN(ts) {
			return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
		}
		if ts >= float64(math.MaxInt64) || ts < float64(math.MinInt64) {
			return 0, fmt.Errorf("cannot parse %q to a valid duration. It overflows int64", s)
		}
		return time.Duration(ts), nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
}

// parseMatchers parses match[] selectors. Like Prometheus it refuses a selector whose
// matchers all match the empty string: it would select every series in the store.
func parseMatchers(matchers []string) ([][]*labels.Matcher, error) {
	sets, err := parser.ParseMetricSelectors(matchers)
	if err != nil {
		return nil, err
	}
outer:
	for _, ms := range sets {
		for _, m := range ms {
			if m != nil && !m.Matches("") {
				continue outer
			}
		}
		return nil, errors.New("match[] must contain at least one non-empty matcher")
	}
	return sets, nil
}

// parseLimit parses the limit parameter; 0 means no limit. Its errors have Prometheus'
// messages and wrap tablets.ErrInvalidLimit.
func parseLimit(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	limit, err := strconv.Atoi(s)
	if err != nil {
		return 0, invalidLimit{err}
	}
	if limit < 0 {
		return 0, invalidLimit{errors.New("limit must be non-negative")}
	}
	return limit, nil
}

// invalidLimit is a bad limit parameter: its message is its cause's, as in Prometheus, and
// it matches tablets.ErrInvalidLimit.
type invalidLimit struct{ cause error }

func (e invalidLimit) Error() string   { return e.cause.Error() }
func (e invalidLimit) Unwrap() []error { return []error{tablets.ErrInvalidLimit, e.cause} }

// hintLimit asks the storage for one more than the API limit, so that truncation can be
// detected and reported as a warning.
func hintLimit(limit int) int {
	if limit > 0 && limit < math.MaxInt {
		return limit + 1
	}
	return limit
}

// millis converts a time to Prometheus' millisecond timestamps.
func millis(t time.Time) int64 {
	return t.Unix()*1000 + int64(t.Nanosecond())/int64(time.Millisecond)
}
