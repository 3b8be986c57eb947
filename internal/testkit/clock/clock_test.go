package clock

import (
	"sync"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	var zero Clock
	if !zero.Now().IsZero() {
		t.Fatalf("zero Clock reads %v; want the zero time", zero.Now())
	}
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	c := New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("New(%v).Now() = %v", start, got)
	}
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("a read moved the clock: %v, want %v", got, start)
	}
	c.Add(90 * time.Second)
	if got, want := c.Now(), start.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("after Add(90s): %v, want %v", got, want)
	}
	c.Add(-time.Hour)
	if got, want := c.Now(), start.Add(90*time.Second-time.Hour); !got.Equal(want) {
		t.Fatalf("after Add(-1h): %v, want %v", got, want)
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("after Set: %v, want %v", got, start)
	}
}

// Moves and reads from many goroutines add up (run under -race).
func TestClockConcurrent(t *testing.T) {
	start := time.Unix(1000, 0)
	c := New(start)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Add(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(800*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after 800 concurrent Add(1ms): %v, want %v", got, want)
	}
}
