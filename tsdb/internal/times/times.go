// Package times holds the time helpers of tsdb's parts: Unix seconds as the tiers' windows,
// the staging's arrival buckets and the rollup count them, and the earlier and later of two
// times. It is a leaf.
package times

import "time"

// FloorSec rounds Unix seconds s down to a multiple of d (whole seconds).
func FloorSec(s uint64, d time.Duration) uint64 { n := uint64(d / time.Second); return s / n * n }

// Unix is t in Unix seconds (t not before the epoch).
func Unix(t time.Time) uint64 { return uint64(t.Unix()) }

// At is Unix seconds s as a time, UTC.
func At(s uint64) time.Time { return time.Unix(int64(s), 0).UTC() }

// Later is the later of a and b.
func Later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Earlier is the earlier of a and b.
func Earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// MilliRange is a range of Unix milliseconds, [From, To).
type MilliRange struct{ From, To int64 }
