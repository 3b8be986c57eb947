package reqlimit

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Point reads are the account's cheapest requests: one entity by its keys. What they take
// is what a request waits at the account behind everything queued there, whichever server
// sent it, so the Transport keeps a histogram of them (of every class): an operator's
// measure of the account's queue. In the soak with three servers on Azurite (docs/soak.md,
// run 116), half the point reads took over 50 ms more than the fastest, all through the
// load, while the servers' background work held at most a few slots: the queue was the
// queries' and the writes' own.

// PointReadBuckets are the upper bounds of the point reads' histogram.
var PointReadBuckets = []time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second,
}

// pointReads is the histogram: a count for each bucket and one past the last, and the sum.
type pointReads struct {
	counts [13]atomic.Int64 // len(PointReadBuckets)+1
	sum    atomic.Int64     // nanoseconds
}

func (p *pointReads) observe(took time.Duration) {
	i := 0
	for i < len(PointReadBuckets) && took > PointReadBuckets[i] {
		i++
	}
	p.counts[i].Add(1)
	p.sum.Add(int64(took))
}

// PointReadStats is the histogram of the point reads' times, from sending until their
// response was read: Counts[i] the reads over PointReadBuckets[i-1] and at most
// PointReadBuckets[i], the last those over every bound.
type PointReadStats struct {
	Counts []int64
	Sum    time.Duration
}

// Count is the point reads in every bucket.
func (s PointReadStats) Count() int64 {
	var n int64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// PointReads returns the histogram of the point reads since the Transport was made.
func (t *Transport) PointReads() PointReadStats {
	s := PointReadStats{Counts: make([]int64, len(t.pointReads.counts)), Sum: time.Duration(t.pointReads.sum.Load())}
	for i := range s.Counts {
		s.Counts[i] = t.pointReads.counts[i].Load()
	}
	return s
}

// isPointRead reports whether req reads one entity by its keys: a GET of
// Table(PartitionKey='…',RowKey='…').
func isPointRead(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	name := req.URL.Path[strings.LastIndexByte(req.URL.Path, '/')+1:]
	return strings.Contains(name, "(PartitionKey=")
}
