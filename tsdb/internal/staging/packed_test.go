package staging

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
)

// Packed staged points read back bit for bit, trimmed to any range as pointsIn trims the
// points themselves: times before 1970 and at the ends of the time range, NaNs of any
// payload (Prometheus' stale marker), infinities, irregular gaps.
func TestPackedPointsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	stale := math.Float64frombits(0x7ff0000000000002)
	for trial := range 200 {
		n := rng.IntN(300)
		start := rng.Int64N(4e12) - 2e12 // around 1970, both sides
		switch trial {
		case 0:
			start = tablets.MinTime.UnixMilli() + 1
		case 1:
			start = tablets.MaxTime.UnixMilli() - int64(n)*20_000 - 1
		}
		var pts []tablets.Point
		ms := start
		for range n {
			v := float64(rng.IntN(1000)) / 10
			switch rng.IntN(10) {
			case 0:
				v = stale
			case 1:
				v = math.Inf(-1)
			case 2:
				v = rng.NormFloat64()
			}
			pts = append(pts, tablets.Point{Time: time.UnixMilli(ms).UTC(), Value: v})
			ms += 1 + rng.Int64N(20_000)
		}
		var scratch PackScratch
		packed := scratch.Pack(pts)
		if n > 20 && len(packed) > 12*n {
			t.Errorf("trial %d: %d points packed in %d bytes", trial, n, len(packed))
		}
		ranges := [][2]time.Time{{tablets.MinTime, tablets.MaxTime}}
		for range 5 {
			a, b := time.UnixMilli(start+rng.Int64N(ms-start+2)-1), time.UnixMilli(start+rng.Int64N(ms-start+2)-1)
			if b.Before(a) {
				a, b = b, a
			}
			ranges = append(ranges, [2]time.Time{a.Add(time.Duration(rng.IntN(2)) * time.Microsecond), b})
		}
		for _, r := range ranges {
			got, err := packed.In(r[0], r[1])
			if err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
			want := pointsIn(pts, r[0], r[1])
			if len(got) != len(want) {
				t.Fatalf("trial %d, [%v, %v): %d points, want %d", trial, r[0], r[1], len(got), len(want))
			}
			for i := range got {
				if !got[i].Time.Equal(want[i].Time) || got[i].Time.Location() != time.UTC ||
					math.Float64bits(got[i].Value) != math.Float64bits(want[i].Value) {
					t.Fatalf("trial %d: point %d is %v %x, want %v %x", trial, i, got[i].Time, math.Float64bits(got[i].Value), want[i].Time, math.Float64bits(want[i].Value))
				}
			}
		}
	}
	var scratch PackScratch
	if p := scratch.Pack(nil); p != nil {
		t.Errorf("no points packed in %d bytes", len(p))
	}
	if got, err := Packed(nil).In(tablets.MinTime, tablets.MaxTime); got != nil || err != nil {
		t.Errorf("nothing packed reads %v, %v", got, err)
	}
}

// A series scraped every 15 s packs in a few bytes a point, not the 32 of a tablets.Point.
func TestPackedPointsSize(t *testing.T) {
	var pts []tablets.Point
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	for i := range 300 {
		pts = append(pts, tablets.Point{Time: start.Add(time.Duration(i)*15*time.Second + time.Duration(i%3)*time.Millisecond), Value: float64(1000 + 7*i)})
	}
	var scratch PackScratch
	if p := scratch.Pack(pts); len(p) > 3*len(pts) {
		t.Errorf("300 points of a counter scraped every 15 s packed in %d bytes", len(p))
	}
}

// pointsIn is the part of pts (sorted) in [from, to): what Packed.In must return.
func pointsIn(pts []tablets.Point, from, to time.Time) []tablets.Point {
	var in []tablets.Point
	for _, p := range pts {
		if !p.Time.Before(from) && p.Time.Before(to) {
			in = append(in, p)
		}
	}
	return in
}
