package rounding

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

func TestFloor(t *testing.T) {
	at := time.Date(2015, 4, 28, 12, 4, 35, 123456789, time.UTC)
	tests := []struct {
		factor time.Duration
		want   time.Time
	}{
		{time.Nanosecond, at},
		{time.Millisecond, time.Date(2015, 4, 28, 12, 4, 35, 123000000, time.UTC)},
		{time.Second, time.Date(2015, 4, 28, 12, 4, 35, 0, time.UTC)},
		{time.Minute, time.Date(2015, 4, 28, 12, 4, 0, 0, time.UTC)},
		{4 * time.Minute, time.Date(2015, 4, 28, 12, 4, 0, 0, time.UTC)},
		{time.Hour, time.Date(2015, 4, 28, 12, 0, 0, 0, time.UTC)},
		{24 * time.Hour, time.Date(2015, 4, 28, 0, 0, 0, 0, time.UTC)},
		{7 * time.Millisecond, time.Unix(0, at.UnixNano()/int64(7*time.Millisecond)*int64(7*time.Millisecond)).UTC()},
	}
	for _, tt := range tests {
		t.Run(tt.factor.String(), func(t *testing.T) {
			require.Equal(t, tt.want, Floor(at, tt.factor))
		})
	}
	// A non-UTC location floors the same instant.
	ny := time.FixedZone("x", -5*3600)
	require.Equal(t, time.Date(2015, 4, 28, 12, 0, 0, 0, time.UTC), Floor(at.In(ny), time.Hour))
}

func TestKeyFormatWidthAndRange(t *testing.T) {
	tests := []struct {
		resolution time.Duration
		width      int
	}{
		{14 * time.Nanosecond, 20},
		{time.Millisecond, 15},
		{time.Second, 12},
		{time.Minute, 10},
		{time.Hour, 8},
	}
	for _, tt := range tests {
		f, err := NewKeyFormat(tt.resolution)
		require.NoError(t, err)
		require.Equal(t, tt.width, f.Width, tt.resolution)
		for _, at := range []time.Time{tablets.MinTime, tablets.MaxTime} {
			key, err := f.Format(at)
			require.NoError(t, err)
			require.Len(t, key, tt.width)
			back, err := f.Parse(key)
			require.NoError(t, err)
			require.Equal(t, Floor(at, tt.resolution), back)
		}
	}
	for _, bad := range []time.Duration{0, -time.Second, time.Nanosecond, 13 * time.Nanosecond} {
		_, err := NewKeyFormat(bad)
		require.ErrorIs(t, err, tablets.ErrInvalidOptions, bad)
	}
}

func TestRejectsOutOfRange(t *testing.T) {
	f, err := NewKeyFormat(time.Millisecond)
	require.NoError(t, err)
	for _, at := range []time.Time{
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		{},
	} {
		_, err := f.Format(at)
		require.ErrorIs(t, err, tablets.ErrInvalidTime, at)
	}
	require.ErrorIs(t, CheckRange(time.Unix(10, 0), time.Unix(9, 0)), tablets.ErrInvalidTime)
	require.NoError(t, CheckRange(time.Unix(9, 0), time.Unix(9, 0)))
}

func TestParseRejectsBadKeys(t *testing.T) {
	f, err := NewKeyFormat(time.Second)
	require.NoError(t, err)
	for _, key := range []string{"", "12345678901", "1234567890123", "00000000000a", "-00000000001", strings.Repeat("9", 12)} {
		_, err := f.Parse(key)
		require.Error(t, err, key)
	}
}

func TestKeyOrderIsTimeOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, res := range []time.Duration{14 * time.Nanosecond, time.Microsecond, time.Millisecond, time.Second, 4 * time.Minute} {
		f, err := NewKeyFormat(res)
		require.NoError(t, err)
		span := tablets.MaxTime.Unix()
		for range 2000 {
			a := time.Unix(rng.Int64N(span), rng.Int64N(1e9))
			b := time.Unix(rng.Int64N(span), rng.Int64N(1e9))
			ka, err := f.Format(a)
			require.NoError(t, err)
			kb, err := f.Format(b)
			require.NoError(t, err)
			fa, fb := Floor(a, res), Floor(b, res)
			require.Equal(t, fa.Compare(fb), strings.Compare(ka, kb), "%v %v", a, b)
		}
	}
}

func FuzzKeyCodec(f *testing.F) {
	f.Add(int64(0), int64(0), int64(1))
	f.Add(int64(1430222735), int64(123456789), int64(time.Millisecond))
	f.Add(tablets.MaxTime.Unix(), int64(999999999), int64(14))
	f.Add(int64(-1), int64(0), int64(time.Second))
	f.Fuzz(func(t *testing.T, sec, nsec, res int64) {
		if res <= 0 {
			res = -res%int64(time.Hour) + 1
		}
		format, err := NewKeyFormat(time.Duration(res))
		if err != nil {
			if !errors.Is(err, tablets.ErrInvalidOptions) || res >= 14 {
				t.Fatalf("resolution %d: %v", res, err)
			}
			return
		}
		at := time.Unix(sec, nsec)
		key, err := format.Format(at)
		if err != nil {
			if !errors.Is(err, tablets.ErrInvalidTime) {
				t.Fatalf("unexpected error %v", err)
			}
			if CheckTime(at) == nil {
				t.Fatalf("valid time %v rejected", at)
			}
			return
		}
		if len(key) != format.Width {
			t.Fatalf("key %q not %d wide", key, format.Width)
		}
		back, err := format.Parse(key)
		if err != nil {
			t.Fatal(err)
		}
		floor := Floor(at, time.Duration(res))
		if !back.Equal(floor) || back.After(at) || at.Sub(back) >= time.Duration(res) {
			t.Fatalf("round trip %v -> %q -> %v, floor %v", at, key, back, floor)
		}
		// Order: the next unit's key sorts after this one.
		next := back.Add(time.Duration(res))
		if CheckTime(next) == nil {
			nextKey, err := format.Format(next)
			if err != nil {
				t.Fatal(err)
			}
			if nextKey <= key {
				t.Fatalf("key order: %q then %q", key, nextKey)
			}
		}
	})
}

// A resolution too fine for 9999 is refused by NewKeyFormat and allowed by NewFineKeyFormat,
// whose keys end at 2^64-2 units: later times are ErrInvalidTime, earlier ones round-trip.
func TestFineKeyFormat(t *testing.T) {
	_, err := NewKeyFormat(time.Nanosecond)
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
	f, err := NewFineKeyFormat(time.Nanosecond)
	require.NoError(t, err)
	require.Equal(t, 20, f.Width)
	require.Equal(t, time.Date(2554, 7, 21, 23, 34, 33, 709551614, time.UTC), f.LastTime())
	u, err := f.Units(f.LastTime())
	require.NoError(t, err)
	require.Equal(t, f.Last, u)
	for _, after := range []time.Time{f.LastTime().Add(1), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), tablets.MaxTime} {
		_, err := f.Units(after)
		require.ErrorIs(t, err, tablets.ErrInvalidTime, "%v", after)
	}
	at := time.Date(2024, 5, 17, 9, 37, 13, 123456789, time.UTC)
	key, err := f.Format(at)
	require.NoError(t, err)
	back, err := f.Parse(key)
	require.NoError(t, err)
	require.True(t, at.Equal(back))
	_, err = f.ParseUnits("18446744073709551615")
	require.Error(t, err, "2^64-1 is past the last unit")
	// Coarse enough for 9999: the same as NewKeyFormat.
	ms, err := NewFineKeyFormat(time.Millisecond)
	require.NoError(t, err)
	want, _ := NewKeyFormat(time.Millisecond)
	require.Equal(t, want, ms)
}
