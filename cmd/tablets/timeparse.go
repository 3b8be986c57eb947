package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/seed71701133/tablets"
)

// Time units of numeric times.
const (
	unitAuto = "auto"
	unitS    = "s"
	unitMS   = "ms"
	unitUS   = "us"
	unitNS   = "ns"
)

var unitsPerSecond = map[string]int64{unitS: 1, unitMS: 1e3, unitUS: 1e6, unitNS: 1e9}

// The magnitudes at which --time-unit auto switches unit: a number below 1e11 is seconds
// (1e11 s is the year 5138, 1e11 ms is March 1973), below 1e14 milliseconds, below 1e17
// microseconds, else nanoseconds.
const (
	autoMillis = 1e11
	autoMicros = 1e14
	autoNanos  = 1e17
)

const timeUnitHelp = `With --time-unit auto (the default) the unit follows the
magnitude of the integer part: below 1e11 seconds (up to the year 5138), below 1e14
milliseconds, below 1e17 microseconds, else nanoseconds; so 1714521600, 1714521600000 and
1714521600.5 all work. A fraction is allowed in every unit. Pass --time-unit s, ms, us or
ns to force one.`

func checkUnit(unit string) error {
	if unit == unitAuto {
		return nil
	}
	if _, ok := unitsPerSecond[unit]; !ok {
		return fmt.Errorf("unknown time unit %q (want auto, s, ms, us or ns)", unit)
	}
	return nil
}

var numberRE = regexp.MustCompile(`^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$`)

// isNumber reports whether s looks like a decimal number.
func isNumber(s string) bool { return numberRE.MatchString(s) }

// parseUnix reads a decimal Unix time in unit (or by magnitude for unitAuto), exactly to the
// nanosecond (extra digits are truncated).
func parseUnix(s, unit string) (time.Time, error) {
	if !isNumber(s) {
		return time.Time{}, fmt.Errorf("%q is not a number", s)
	}
	if strings.ContainsAny(s, "eE") {
		// Exponent notation: go through float64 (exact enough for seconds, which is what
		// such numbers usually are) and back to plain decimal.
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return time.Time{}, fmt.Errorf("%q is out of range", s)
		}
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	neg := false
	switch s[0] {
	case '-':
		neg = true
		s = s[1:]
	case '+':
		s = s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" {
		intPart = "0"
	}
	n, err := strconv.ParseUint(intPart, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is out of range", s)
	}
	if unit == unitAuto {
		switch {
		case n < autoMillis:
			unit = unitS
		case n < autoMicros:
			unit = unitMS
		case n < autoNanos:
			unit = unitUS
		default:
			unit = unitNS
		}
	}
	per := uint64(unitsPerSecond[unit])
	nsPerUnit := uint64(1e9) / per
	sec := n / per
	nsec := (n % per) * nsPerUnit
	// The fraction of a unit, to the nanosecond: as many digits as nsPerUnit has zeros.
	digits := len(strconv.FormatUint(nsPerUnit, 10)) - 1
	if len(frac) > digits {
		frac = frac[:digits]
	}
	if frac != "" {
		frac += strings.Repeat("0", digits-len(frac))
		f, _ := strconv.ParseUint(frac, 10, 64)
		nsec += f
	}
	if sec > math.MaxInt64/2 {
		return time.Time{}, fmt.Errorf("%q is out of range", s)
	}
	if neg {
		return time.Unix(-int64(sec), -int64(nsec)).UTC(), nil
	}
	return time.Unix(int64(sec), int64(nsec)).UTC(), nil
}

// Layouts of absolute times, tried in order; those without a zone are UTC.
var timeLayouts = []string{
	time.RFC3339, // also reads fractional seconds
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02",
}

// parseAbsTime reads an absolute time: RFC 3339 (or one of the close forms above) or a
// number (a Unix time, see parseUnix).
func parseAbsTime(s, unit string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New("empty time")
	}
	if isNumber(s) {
		return parseUnix(s, unit)
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time (want RFC 3339 like 2024-05-01T12:00:00Z, or Unix seconds or milliseconds)", s)
}

// parseFlagTime reads a --from or --to: "now", a duration relative to now ("-2h", "+30m",
// "now-1d"), or an absolute time.
func parseFlagTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	rel, isRel := strings.CutPrefix(strings.ToLower(s), "now")
	if isRel && rel == "" {
		return now, nil
	}
	if !isRel && (strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+")) && !isNumber(s) {
		rel, isRel = s, true
	}
	if isRel {
		rel = strings.ReplaceAll(rel, " ", "")
		d, err := parseDuration(rel)
		if err != nil || !(strings.HasPrefix(rel, "-") || strings.HasPrefix(rel, "+")) {
			return time.Time{}, fmt.Errorf("%q is not a relative time (want now, -2h, +30m, now-7d, ...)", s)
		}
		return now.Add(d), nil
	}
	return parseAbsTime(s, unitAuto)
}

var dayWeekRE = regexp.MustCompile(`(\d+(?:\.\d+)?)([dw])`)

// parseDuration is time.ParseDuration plus the units d (24h) and w (7d).
func parseDuration(s string) (time.Duration, error) {
	var convErr error
	s = dayWeekRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := dayWeekRE.FindStringSubmatch(m)
		n, err := strconv.ParseFloat(sub[1], 64)
		if err != nil {
			convErr = err
		}
		h := n * 24
		if sub[2] == "w" {
			h *= 7
		}
		return strconv.FormatFloat(h, 'f', -1, 64) + "h"
	})
	if convErr != nil {
		return 0, convErr
	}
	return time.ParseDuration(s)
}

// checkRange validates a [from, to) range for a store.
func checkRange(from, to time.Time) error {
	if !from.Before(to) {
		return fmt.Errorf("empty range: --from %s is not before --to %s", fmtTime(from), fmtTime(to))
	}
	if from.Before(tablets.MinTime) {
		return fmt.Errorf("--from %s is before %s, the earliest time a store holds", fmtTime(from), fmtTime(tablets.MinTime))
	}
	return nil
}

// checkStorable reports a time a store cannot hold.
func checkStorable(t time.Time) error {
	if t.Before(tablets.MinTime) || t.After(tablets.MaxTime) {
		return fmt.Errorf("time %s is outside [1970-01-01, 9999-12-31], the times a store holds", fmtTime(t))
	}
	return nil
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
