package rounding

import (
	"testing"
	"time"
)

// Compare a change with:
//
//	go test -run '^$' -bench . -count 6 ./rounding | tee new.txt && benchstat old.txt new.txt

func BenchmarkKeyRoundTrip(b *testing.B) {
	f, err := NewKeyFormat(time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2024, 3, 1, 12, 4, 35, 250e6, time.UTC)
	buf := make([]byte, 0, 32)
	b.ReportAllocs()
	for b.Loop() {
		u, _ := f.Units(at)
		buf = f.AppendUnits(buf[:0], u)
		if _, err := f.ParseUnitsBytes(buf); err != nil {
			b.Fatal(err)
		}
		at = at.Add(time.Millisecond)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/point")
}

func BenchmarkFloor(b *testing.B) {
	at := time.Date(2024, 3, 1, 12, 4, 35, 250e6, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		at = Floor(at, 4*time.Minute).Add(4*time.Minute + time.Second)
	}
}
