package rounding

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/seed71701133/tablets"
)

// CheckTime reports whether t is inside the supported range [tablets.MinTime, tablets.MaxTime].
// The error wraps tablets.ErrInvalidTime.
func CheckTime(t time.Time) error {
	if t.Before(tablets.MinTime) || t.After(tablets.MaxTime) {
		return fmt.Errorf("%w: %s is outside 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59Z", tablets.ErrInvalidTime, t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// CheckRange validates a half-open range [from, to): both ends in range and from <= to.
func CheckRange(from, to time.Time) error {
	if err := CheckTime(from); err != nil {
		return err
	}
	if err := CheckTime(to); err != nil {
		return err
	}
	if from.After(to) {
		return fmt.Errorf("%w: from %s is after to %s", tablets.ErrInvalidTime,
			from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// nanos returns t as nanoseconds since the epoch in 128 bits (hi, lo); t must be >= epoch.
// int64 nanoseconds end in 2262, so years up to 9999 need more than 64 bits.
func nanos(t time.Time) (hi, lo uint64) {
	hi, lo = bits.Mul64(uint64(t.Unix()), uint64(time.Second))
	var carry uint64
	lo, carry = bits.Add64(lo, uint64(t.Nanosecond()), 0)
	return hi + carry, lo
}

// units returns floor((t - epoch) / unit) for t >= epoch and unit > 0.
func units(t time.Time, unit time.Duration) uint64 {
	hi, lo := nanos(t)
	d := uint64(unit)
	if hi >= d {
		// Only for units of a few nanoseconds past year 9999: unreachable for checked
		// times, and Div64 would panic.
		return 0
	}
	q, _ := bits.Div64(hi, lo, d)
	return q
}

// fromUnits returns epoch + n*unit.
func fromUnits(n uint64, unit time.Duration) time.Time {
	hi, lo := bits.Mul64(n, uint64(unit))
	// Split into seconds and nanoseconds: divide the 128-bit product by 1e9. hi is below
	// 1e9 for every time up to 9999; the modulo only keeps misuse from panicking.
	sec, nsec := bits.Div64(hi%uint64(time.Second), lo, uint64(time.Second))
	return time.Unix(int64(sec), int64(nsec)).UTC()
}

// Floor rounds t down to a multiple of factor counted from the Unix epoch. t must be in the
// supported range (see CheckTime); factor must be positive.
func Floor(t time.Time, factor time.Duration) time.Time {
	if factor <= 0 || t.Before(tablets.MinTime) {
		return t.UTC()
	}
	return fromUnits(units(t, factor), factor)
}

// KeyFormat is a fixed-width decimal key: the number of Resolution units since the epoch,
// zero-padded to Width digits, wide enough for every time up to Last.
type KeyFormat struct {
	Resolution time.Duration
	Width      int
	// Last is the last unit a key holds: that of 9999-12-31T23:59:59.999999999, or, for a
	// resolution too fine for 9999 in 64 bits (NewFineKeyFormat), 2^64-2.
	Last uint64
}

// NewKeyFormat returns the key format for a resolution. The error wraps
// tablets.ErrInvalidOptions when resolution is not positive or finer than 14ns (keys are
// 64-bit unit counts, and must reach 9999-12-31).
func NewKeyFormat(resolution time.Duration) (KeyFormat, error) {
	if resolution <= 0 {
		return KeyFormat{}, fmt.Errorf("%w: resolution %v must be positive", tablets.ErrInvalidOptions, resolution)
	}
	if hi, _ := nanos(tablets.MaxTime); hi >= uint64(resolution) {
		// Key arithmetic is 64-bit: the unit count of 9999-12-31 must fit.
		return KeyFormat{}, fmt.Errorf("%w: resolution %v is too fine: keys for times up to 9999 need at least %v", tablets.ErrInvalidOptions, resolution, time.Duration(hi+1))
	}
	maxUnits := units(tablets.MaxTime, resolution)
	return KeyFormat{Resolution: resolution, Width: len(strconv.FormatUint(maxUnits, 10)), Last: maxUnits}, nil
}

// NewFineKeyFormat is NewKeyFormat, but a resolution too fine for 9999 (under 14ns) is
// allowed: its keys end at 2^64-2 units (at 1ns, 2554-07-21T23:34:33.709551614Z), and Units
// rejects later times with an error wrapping tablets.ErrInvalidTime.
func NewFineKeyFormat(resolution time.Duration) (KeyFormat, error) {
	if resolution <= 0 {
		return KeyFormat{}, fmt.Errorf("%w: resolution %v must be positive", tablets.ErrInvalidOptions, resolution)
	}
	if hi, _ := nanos(tablets.MaxTime); hi < uint64(resolution) {
		return NewKeyFormat(resolution)
	}
	last := uint64(math.MaxUint64 - 1)
	return KeyFormat{Resolution: resolution, Width: len(strconv.FormatUint(last, 10)), Last: last}, nil
}

// LastTime is the time of the last unit a key holds.
func (f KeyFormat) LastTime() time.Time { return fromUnits(f.Last, f.Resolution) }

// Units returns the number of resolution units from the epoch to t (t truncated down).
func (f KeyFormat) Units(t time.Time) (uint64, error) {
	if err := CheckTime(t); err != nil {
		return 0, err
	}
	if hi, _ := nanos(t); hi >= uint64(f.Resolution) || units(t, f.Resolution) > f.Last {
		return 0, fmt.Errorf("%w: %s is after %s, the last time a %v resolution holds in 64 bits", tablets.ErrInvalidTime,
			t.UTC().Format(time.RFC3339Nano), f.LastTime().Format(time.RFC3339Nano), f.Resolution)
	}
	return units(t, f.Resolution), nil
}

// Time returns the time of a unit count.
func (f KeyFormat) Time(n uint64) time.Time { return fromUnits(n, f.Resolution) }

// Format returns the key of t (t truncated to the resolution).
func (f KeyFormat) Format(t time.Time) (string, error) {
	n, err := f.Units(t)
	if err != nil {
		return "", err
	}
	return string(f.AppendUnits(make([]byte, 0, f.Width), n)), nil
}

// AppendUnits appends the fixed-width key of a unit count to dst.
func (f KeyFormat) AppendUnits(dst []byte, n uint64) []byte {
	var buf [20]byte
	s := strconv.AppendUint(buf[:0], n, 10)
	for i := len(s); i < f.Width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// ParseUnits parses a key written by this format back into its unit count.
func (f KeyFormat) ParseUnits(key string) (uint64, error) {
	return f.ParseUnitsBytes([]byte(key))
}

// ParseUnitsBytes is ParseUnits for a key in bytes; it does not allocate unless it fails.
func (f KeyFormat) ParseUnitsBytes(key []byte) (uint64, error) {
	if len(key) != f.Width {
		return 0, fmt.Errorf("rounding: key %q is not %d digits", key, f.Width)
	}
	var n uint64
	for _, c := range key {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("rounding: key %q is not decimal", key)
		}
		hi, lo := bits.Mul64(n, 10)
		lo, carry := bits.Add64(lo, uint64(c-'0'), 0)
		if hi != 0 || carry != 0 {
			return 0, fmt.Errorf("rounding: key %q overflows", key)
		}
		n = lo
	}
	if n > f.Last {
		return 0, fmt.Errorf("rounding: key %q is after the last time of the format", key)
	}
	return n, nil
}

// Parse parses a key written by this format back into its time.
func (f KeyFormat) Parse(key string) (time.Time, error) {
	n, err := f.ParseUnits(key)
	if err != nil {
		return time.Time{}, err
	}
	return fromUnits(n, f.Resolution), nil
}
