package tsdb

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
)

// heapObjects is the bytes of the heap's objects now, live and not yet swept.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapPeak samples the heap's objects (live and not yet swept) every millisecond until
// stop is called, and returns the most it saw.
func heapPeak() (stop func() uint64) {
	var most atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := heapObjects(); v > most.Load() {
				most.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); <-finished; return most.Load() }
}

// BenchmarkFoldMemory is what a Fold of one arrival bucket holds and allocates: 6,000
// series (TABLETS_FOLD_SERIES) of 40 points at 15 s, staged on Azurite, folded by another
// process. peak-MiB is the most heap objects (live, and garbage not yet swept) above the
// start; alloc-B/point what it allocated a point folded. With TABLETS_FOLD_HEAP=file, the
// allocation profiles before (file.base) and after the Fold, for pprof -base.
func BenchmarkFoldMemory(b *testing.B) {
	if testing.Short() {
		b.Skip("Azurite")
	}
	seriesN := 6000
	if v, err := strconv.Atoi(os.Getenv("TABLETS_FOLD_SERIES")); err == nil {
		seriesN = v
	}
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
		db, svc, _ := stagingDB(b, "foldmem", &now)
		start := now
		for step := range 40 {
			at := start.Add(time.Duration(step) * 15 * time.Second)
			for lo := 0; lo < seriesN; lo += 1000 {
				var batch []SeriesPoints
				for s := lo; s < min(seriesN, lo+1000); s++ {
					batch = append(batch, SeriesPoints{Series: fmt.Sprintf("series%06d", s), Points: []tablets.Point{{Time: at, Value: float64(step*seriesN + s)}}})
				}
				if err := db.WriteMany(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
		}
		now = now.Add(time.Hour)
		folder, err := Open(ctx, svc, db.Name(), &db.opts)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		base := heapObjects()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		writeAllocs(b, ".base")
		stop := heapPeak()
		b.StartTimer()
		rep, err := folder.Fold(ctx)
		b.StopTimer()
		peak := stop()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Points != 40*seriesN {
			b.Fatalf("folded %+v", rep)
		}
		b.ReportMetric((float64(peak)-float64(base))/float64(1<<20), "peak-MiB") // a collection may take it below base
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(rep.Points), "alloc-B/point")
		b.ReportMetric(float64(rep.Rounds), "rounds")
		writeAllocs(b, "")
	}
}

// writeAllocs writes the allocation profile to TABLETS_FOLD_HEAP + suffix, if set.
func writeAllocs(b *testing.B, suffix string) {
	b.Helper()
	path := os.Getenv("TABLETS_FOLD_HEAP")
	if path == "" {
		return
	}
	out, err := os.Create(path + suffix)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	if err := pprof.Lookup("allocs").WriteTo(out, 0); err != nil {
		b.Fatal(err)
	}
}
