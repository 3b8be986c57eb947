package main

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets/tsdb"
)

// --query.max-source-resolution: raw (or 0s), auto or a positive duration; nothing else.
func TestParseResolution(t *testing.T) {
	for in, want := range map[string]time.Duration{"raw": tsdb.RawResolution, "0s": tsdb.RawResolution, "auto": tsdb.AnyResolution, "5m": 5 * time.Minute, "1h": time.Hour} {
		if got, err := parseResolution(in); err != nil || got != want {
			t.Errorf("parseResolution(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1m", "fine", "RAW"} {
		if got, err := parseResolution(in); err == nil {
			t.Errorf("parseResolution(%q) = %v, want an error", in, got)
		}
	}
}

// The folds that may run at once share the background's half of the account's requests:
// 16 writers each at the defaults (64 requests, 4 jobs, 2 of them folds), never more than a
// fold's default, never none.
func TestFoldWriters(t *testing.T) {
	for _, c := range []struct{ requests, jobs, want int }{
		{64, 4, 16}, {64, 1, 32}, {64, 2, 32}, {256, 4, 32}, {16, 4, 4}, {4, 8, 1}, {1, 1, 1},
	} {
		if got := foldWriters(c.requests, c.jobs); got != c.want {
			t.Errorf("foldWriters(%d, %d) = %d, want %d", c.requests, c.jobs, got, c.want)
		}
	}
}

// A cache not sized by its flag takes its share of the memory limit where that is less
// than its default, and at least 1 MiB.
func TestSharedCacheBytes(t *testing.T) {
	for _, c := range []struct{ def, limit, share, want int64 }{
		{256 << 20, 1 << 62, 8, 256 << 20}, // no limit to speak of: the default
		{256 << 20, 1 << 30, 8, 128 << 20}, // 1 GiB: an eighth
		{256 << 20, 4 << 30, 8, 256 << 20}, // 4 GiB: the default is less
		{64 << 20, 16 << 20, 32, 1 << 20},  // 16 MiB: at least 1 MiB
	} {
		if got := sharedCacheBytes(c.def, c.limit, c.share); got != c.want {
			t.Errorf("sharedCacheBytes(%d, %d, %d) = %d, want %d", c.def, c.limit, c.share, got, c.want)
		}
	}
}
