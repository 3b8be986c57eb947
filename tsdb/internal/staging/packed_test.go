package staging

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
)

// Packed staged points read back bit for bit, trimmed to any range as pointsIn trims the
// points themselves, whether kept plain or encoded: times before 1970 and at the ends of
// the time range, NaNs of any payload (Prometheus' stale marker), infinities, irregular
// gaps.
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
		// Even trials keep their points plain, odd ones encode them.
		scratch := PackScratch{PlainLeft: (1 - trial%2) * n}
		packed := scratch.Pack(pts)
		if n > 0 && packed.Plain() != (trial%2 == 0) || scratch.PlainLeft != 0 {
			t.Fatalf("trial %d: %d points plain %v, %d plain left", trial, n, packed.Plain(), scratch.PlainLeft)
		}
		if n > 20 && trial%2 == 1 && packed.Bytes() > 12*n {
			t.Errorf("trial %d: %d points packed in %d bytes", trial, n, packed.Bytes())
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
	scratch := PackScratch{PlainLeft: 10}
	if p := scratch.Pack(nil); p.Bytes() != 0 || p.Plain() || scratch.PlainLeft != 10 {
		t.Errorf("no points packed in %d bytes (plain %v), %d plain left", p.Bytes(), p.Plain(), scratch.PlainLeft)
	}
	if got, err := (Packed{}).In(tablets.MinTime, tablets.MaxTime); got != nil || err != nil {
		t.Errorf("nothing packed reads %v, %v", got, err)
	}
}

// A read keeps its first PlainLeft points plain, series by series: a series that does not
// fit is encoded, and a smaller one after it may still fit. What In gives of a plain
// series is read-only: an append to it copies.
func TestPackedPlainBudget(t *testing.T) {
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	series := func(n int) []tablets.Point {
		pts := make([]tablets.Point, n)
		for i := range pts {
			pts[i] = tablets.Point{Time: start.Add(time.Duration(i) * 15 * time.Second), Value: float64(i)}
		}
		return pts
	}
	scratch := PackScratch{PlainLeft: 100}
	var got []bool
	for _, n := range []int{60, 50, 30, 10, 1} {
		got = append(got, scratch.Pack(series(n)).Plain())
	}
	if want := []bool{true, false, true, true, false}; !slices.Equal(got, want) || scratch.PlainLeft != 0 {
		t.Errorf("plain: %v, want %v; %d left", got, want, scratch.PlainLeft)
	}
	pts := series(10)
	p := (&PackScratch{PlainLeft: 10}).Pack(pts)
	in, err := p.In(start.Add(15*time.Second), start.Add(45*time.Second))
	if err != nil || len(in) != 2 || in[0].Value != 1 || in[1].Value != 2 {
		t.Fatalf("In: %v, %v", in, err)
	}
	_ = append(in, tablets.Point{Value: -1})
	if pts[3].Value != 3 {
		t.Errorf("an append to what In gave changed the packed points: %v", pts[3])
	}
	if in, _ := p.In(start.Add(time.Millisecond), start.Add(15*time.Second)); len(in) != 0 {
		t.Errorf("In between two points: %v", in)
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
	if p := scratch.Pack(pts); p.Plain() || p.Bytes() > 3*len(pts) {
		t.Errorf("300 points of a counter scraped every 15 s packed in %d bytes (plain %v)", p.Bytes(), p.Plain())
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
