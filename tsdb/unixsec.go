package tsdb

import "time"

// Unix seconds, as the staging's arrival buckets and the fold count them (the tiers have
// their own: package internal/tiers).

// floorSec rounds Unix seconds s down to a multiple of d (whole seconds).
func floorSec(s uint64, d time.Duration) uint64 { n := uint64(d / time.Second); return s / n * n }

func unix(t time.Time) uint64 { return uint64(t.Unix()) }
func at(s uint64) time.Time   { return time.Unix(int64(s), 0).UTC() }
