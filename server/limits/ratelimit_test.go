package limits

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/testkit/clock"
)

func TestBucketRefillsAtTheRate(t *testing.T) {
	clock := clock.New(time.Unix(1000, 0))
	b := NewBucket(clock.Now)
	// A new bucket is full: the whole burst at once, then nothing.
	if ok, _ := b.Take(100, 10, 100); !ok {
		t.Fatal("a full bucket refused its burst")
	}
	ok, wait := b.Take(5, 10, 100)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("empty bucket: Take(5) = %v, %v; want false, 500ms", ok, wait)
	}
	clock.Add(499 * time.Millisecond)
	if ok, wait := b.Take(5, 10, 100); ok || wait != time.Millisecond {
		t.Fatalf("after 499ms: Take(5) = %v, %v; want false, 1ms", ok, wait)
	}
	clock.Add(time.Millisecond)
	if ok, _ := b.Take(5, 10, 100); !ok {
		t.Fatal("after 500ms at 10/s, 5 tokens are not there")
	}
	// A long idle time fills the bucket to its size, no more.
	clock.Add(time.Hour)
	if ok, _ := b.Take(100, 10, 100); !ok {
		t.Fatal("an idle bucket is not full")
	}
	if ok, _ := b.Take(1, 10, 100); ok {
		t.Fatal("a bucket held more than its size")
	}
}

func TestBucketReloadApplies(t *testing.T) {
	clock := clock.New(time.Unix(1000, 0))
	b := NewBucket(clock.Now)
	if ok, _ := b.Take(50, 10, 100); !ok {
		t.Fatal("refused")
	}
	// The configuration shrinks the bucket: the 50 tokens left are cut to 20.
	if ok, _ := b.Take(21, 10, 20); ok {
		t.Fatal("a shrunk bucket kept its tokens")
	}
	if ok, _ := b.Take(20, 10, 20); !ok {
		t.Fatal("a shrunk bucket lost its tokens")
	}
	// A higher rate refills faster at once.
	clock.Add(time.Second)
	if ok, _ := b.Take(20, 20, 20); !ok {
		t.Fatal("the new rate does not apply")
	}
	// Rate 0 is no limit.
	if ok, _ := b.Take(1_000_000, 0, 0); !ok {
		t.Fatal("rate 0 limited")
	}
}

func TestBucketReturnAndClockBack(t *testing.T) {
	clock := clock.New(time.Unix(1000, 0))
	b := NewBucket(clock.Now)
	b.Take(10, 1, 10)
	b.Return(4, 10)
	if ok, _ := b.Take(5, 1, 10); ok {
		t.Fatal("Return gave back more than it was given")
	}
	if ok, _ := b.Take(4, 1, 10); !ok {
		t.Fatal("Return did not give the tokens back")
	}
	clock.Add(-time.Hour) // a clock going back earns nothing and breaks nothing
	if ok, wait := b.Take(1, 1, 10); ok || wait != time.Second {
		t.Fatalf("clock back: Take(1) = %v, %v; want false, 1s", ok, wait)
	}
	clock.Add(time.Hour + time.Second)
	if ok, _ := b.Take(1, 1, 10); !ok {
		t.Fatal("the bucket did not refill after the clock came back")
	}
}

func TestBurstAndRetryAfter(t *testing.T) {
	for _, c := range []struct {
		l    Limits
		want int
	}{
		{Limits{}, 0},
		{Limits{IngestionRate: 100}, 1000},
		{Limits{IngestionRate: 100, IngestionBurstSize: 7}, 7},
		{Limits{IngestionRate: 0.01}, 1},
		{Limits{IngestionRate: 0.25}, 3},
		{Limits{IngestionBurstSize: 7}, 0},
	} {
		if got := c.l.Burst(); got != c.want {
			t.Errorf("%+v.Burst() = %d, want %d", c.l, got, c.want)
		}
	}
	for _, c := range []struct {
		wait time.Duration
		want int
	}{{time.Nanosecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {0, 1}, {90 * time.Second, 90}} {
		if got := RetryAfter(c.wait); got != c.want {
			t.Errorf("RetryAfter(%v) = %d, want %d", c.wait, got, c.want)
		}
	}
}
