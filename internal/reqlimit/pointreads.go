package reqlimit

import (
	"net/http"
	"net/http/httptrace"
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

// PointReadBuckets are the upper bounds of the point reads' histograms.
var PointReadBuckets = [...]time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second,
}

// Point read phases: where a point read's time went, as the HTTP client saw it.
const (
	// PhaseConnection is from sending until the client had a connection: one idle in its
	// pool, or a new one dialed.
	PhaseConnection = iota
	// PhaseAnswer is from the request written until the first byte of the answer: the
	// account's time, its queue, and the network.
	PhaseAnswer
	// PhaseBody is from the first byte until the body was read to its end: the rest of
	// the answer, and the reader's pace.
	PhaseBody
	Phases // how many
)

// PhaseNames are the phases' names, by their constants.
var PhaseNames = [Phases]string{PhaseConnection: "connection", PhaseAnswer: "answer", PhaseBody: "body"}

// histogram counts durations in PointReadBuckets and one past the last, and their sum.
type histogram struct {
	counts [len(PointReadBuckets) + 1]atomic.Int64
	sum    atomic.Int64 // nanoseconds
}

func (h *histogram) observe(took time.Duration) {
	i := 0
	for i < len(PointReadBuckets) && took > PointReadBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(took))
}

func (h *histogram) stats() PointReadStats {
	s := PointReadStats{Counts: make([]int64, len(h.counts)), Sum: time.Duration(h.sum.Load())}
	for i := range s.Counts {
		s.Counts[i] = h.counts[i].Load()
	}
	return s
}

// pointReads are the point reads' times, whole and by phase.
type pointReads struct {
	whole  histogram
	phases [Phases]histogram
}

// observe counts a point read that took took, split in phases (none if the client never
// got a connection, or never wrote the request).
func (p *pointReads) observe(took time.Duration, phases []time.Duration) {
	p.whole.observe(took)
	for i, d := range phases {
		p.phases[i].observe(d)
	}
}

// phaseTimes are when a request's phases ended, as nanoseconds of the Unix clock (zero:
// not yet), set by the HTTP client's trace hooks.
type phaseTimes struct {
	gotConn, wrote, firstByte atomic.Int64
}

func (p *phaseTimes) trace() *httptrace.ClientTrace {
	now := func(a *atomic.Int64) { a.CompareAndSwap(0, time.Now().UnixNano()) }
	return &httptrace.ClientTrace{
		GotConn:              func(httptrace.GotConnInfo) { now(&p.gotConn) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { now(&p.wrote) },
		GotFirstResponseByte: func() { now(&p.firstByte) },
	}
}

// split is the phases of a request sent at began and done at end, or nil if it never got
// as far as its answer's first byte.
func (p *phaseTimes) split(began, end time.Time) []time.Duration {
	gotConn, wrote, firstByte := p.gotConn.Load(), p.wrote.Load(), p.firstByte.Load()
	if gotConn == 0 || wrote == 0 || firstByte == 0 {
		return nil
	}
	out := make([]time.Duration, Phases)
	out[PhaseConnection] = max(time.Duration(gotConn-began.UnixNano()), 0)
	out[PhaseAnswer] = max(time.Duration(firstByte-wrote), 0)
	out[PhaseBody] = max(time.Duration(end.UnixNano()-firstByte), 0)
	return out
}

// PointReadStats is a histogram of point reads' times: Counts[i] the reads over
// PointReadBuckets[i-1] and at most PointReadBuckets[i], the last those over every bound.
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

// PointReads returns the histogram of the point reads since the Transport was made, from
// sending until their response was read.
func (t *Transport) PointReads() PointReadStats { return t.pointReads.whole.stats() }

// PointReadPhases returns the histograms of the point reads' phases since the Transport
// was made, by phase (PhaseConnection...): those that got an answer's first byte.
func (t *Transport) PointReadPhases() [Phases]PointReadStats {
	var out [Phases]PointReadStats
	for i := range out {
		out[i] = t.pointReads.phases[i].stats()
	}
	return out
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
