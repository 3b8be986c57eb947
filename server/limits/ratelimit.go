package limits

import (
	"math"
	"sync"
	"time"
)

// DefaultBurstSeconds is the size of a token bucket whose IngestionBurstSize is 0, in
// seconds of its IngestionRate.
const DefaultBurstSeconds = 10

// Burst is the size of the tenant's ingestion bucket, in samples: IngestionBurstSize, or
// DefaultBurstSeconds of IngestionRate (at least 1). 0 when IngestionRate is 0 (no limit).
func (l Limits) Burst() int {
	switch {
	case l.IngestionRate <= 0:
		return 0
	case l.IngestionBurstSize > 0:
		return l.IngestionBurstSize
	}
	return int(max(1, min(math.Ceil(DefaultBurstSeconds*l.IngestionRate), math.MaxInt32)))
}

// Bucket is a token bucket whose rate and size are given at each call, so that a
// configuration reloaded applies at once. A new bucket is full. The zero value is not
// usable: see NewBucket. It is safe for concurrent use.
type Bucket struct {
	now func() time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time // of the last refill; zero: never used, full
}

// NewBucket returns a full bucket reading time from now (nil: time.Now).
func NewBucket(now func() time.Time) *Bucket {
	if now == nil {
		now = time.Now
	}
	return &Bucket{now: now}
}

// Take takes n tokens from a bucket of burst tokens refilled at rate a second, if it holds
// them now. Otherwise it takes nothing and returns how long until it would hold them
// (always more than 0); a request for more than burst tokens never fits, which the caller
// checks first (it would get the time to fill a bucket larger than it is). A rate not above
// 0 means no limit: everything is taken at once.
func (b *Bucket) Take(n int, rate float64, burst int) (ok bool, wait time.Duration) {
	if rate <= 0 || n <= 0 {
		return true, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(rate, burst)
	if float64(n) <= b.tokens {
		b.tokens -= float64(n)
		return true, 0
	}
	missing := float64(n) - b.tokens
	return false, max(time.Nanosecond, time.Duration(math.Ceil(missing/rate*float64(time.Second))))
}

// Return puts back n tokens taken by a request that was then not served (never more than
// burst).
func (b *Bucket) Return(n int, burst int) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(float64(burst), b.tokens+float64(n))
}

// refill adds the tokens earned since the last call, up to burst (a bucket shrunk by a
// reload loses what no longer fits). A clock going back earns nothing.
func (b *Bucket) refill(rate float64, burst int) {
	now := b.now()
	if b.last.IsZero() {
		b.tokens, b.last = float64(burst), now
		return
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens += elapsed.Seconds() * rate
		b.last = now
	}
	b.tokens = min(b.tokens, float64(burst))
}

// RetryAfter is the Retry-After header of a wait: whole seconds, rounded up, at least 1.
func RetryAfter(wait time.Duration) int {
	return int(max(1, math.Ceil(wait.Seconds())))
}
