package soak

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// Prometheus' remote-write queue defaults (queue_config), which the writer follows.
const (
	maxSamplesPerSend = 2000
	batchSendDeadline = 5 * time.Second
	minBackoff        = 30 * time.Millisecond
	maxBackoff        = 5 * time.Second
	remoteTimeout     = 30 * time.Second
)

// sample is one sample waiting to be sent: its series and time; its value is the series'
// Value at that time.
type sample struct {
	series int32
	ts     int64
}

// WriteStats are one tenant's writes.
type WriteStats struct {
	Sent int64 `json:"samples_sent"` // samples scraped and queued, backfill included
	// Backfilled counts the samples of the history written before the load (Config.Backfill),
	// BackfillAcked those of them acknowledged.
	Backfilled    int64         `json:"samples_backfilled"`
	BackfillAcked int64         `json:"samples_backfilled_acked"`
	Acked         int64         `json:"samples_acked"`   // in requests answered 2xx
	Dropped       int64         `json:"samples_dropped"` // in requests answered 4xx (not 429): not retried
	Requests      int64         `json:"requests_acked"`  // requests answered 2xx
	Retries       int64         `json:"retries"`         // attempts sent again
	Status        map[int]int64 `json:"status"`          // every attempt's answer; 0: none (a connection error)
	Pending       int64         `json:"samples_unsent"`  // still queued or unanswered at the end
}

// acked is what the server acknowledged of one series: how many samples, over which times.
type acked struct {
	n           int32
	first, last int64
}

// writer remote-writes one tenant's series as a Prometheus does: it scrapes each target on
// its schedule and queues the samples to shards (by series, so that a series' samples go
// in time order), each sending requests of up to maxSamplesPerSend samples, or fewer after
// batchSendDeadline, and retrying 5xx, 429 and connection failures with back-off.
type writer struct {
	series Series
	url    string
	header string // X-Scope-OrgID, "" for none
	client *http.Client
	shards []*shard

	mu    sync.Mutex
	stats WriteStats
	acked []acked
}

type shard struct {
	mu      sync.Mutex
	queue   []sample
	oldest  time.Time // when queue's first sample was queued
	wake    chan struct{}
	stopped bool
}

func newWriter(series Series, url, header string, client *http.Client, shards int) *writer {
	w := &writer{series: series, url: url, header: header, client: client, acked: make([]acked, series.Len())}
	w.stats.Status = map[int]int64{}
	for range shards {
		w.shards = append(w.shards, &shard{wake: make(chan struct{}, 1)})
	}
	return w
}

// run scrapes until stop is closed, then sends what is queued until it is all answered or
// ctx ends. Each shard's requests are sent by its own goroutine.
func (w *writer) run(ctx context.Context, start time.Time, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for _, sh := range w.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.send(ctx, sh)
		}()
	}
	w.scrape(start, stop)
	for _, sh := range w.shards {
		sh.mu.Lock()
		sh.stopped = true
		sh.mu.Unlock()
		sh.signal()
	}
	wg.Wait()
	w.mu.Lock()
	for _, sh := range w.shards {
		w.stats.Pending += int64(len(sh.queue))
	}
	w.mu.Unlock()
}

// scrape queues each target's samples at its scrape times, from start until stop.
func (w *writer) scrape(start time.Time, stop <-chan struct{}) {
	next := make([]int64, w.series.Targets)
	for t := range next {
		next[t] = w.series.FirstScrape(t, start)
	}
	iv := w.series.Interval.Milliseconds()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		now := time.Now().UnixMilli()
		var n int64
		for t := range next {
			for ; next[t] <= now; next[t] += iv {
				for k := range seriesPerTarget {
					i := t*seriesPerTarget + k
					w.shardOf(i).push(sample{int32(i), next[t]})
					n++
				}
			}
		}
		w.mu.Lock()
		w.stats.Sent += n
		w.mu.Unlock()
	}
}

func (w *writer) shardOf(series int) *shard {
	h := fnv.New32a()
	fmt.Fprint(h, series)
	return w.shards[h.Sum32()%uint32(len(w.shards))]
}

func (sh *shard) push(s sample) {
	sh.mu.Lock()
	if len(sh.queue) == 0 {
		sh.oldest = time.Now()
	}
	sh.queue = append(sh.queue, s)
	full := len(sh.queue) >= maxSamplesPerSend
	sh.mu.Unlock()
	if full {
		sh.signal()
	}
}

func (sh *shard) signal() {
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// take waits for a batch: maxSamplesPerSend samples, or fewer once the oldest has waited
// batchSendDeadline or the shard is stopped. It returns nil when the shard is stopped and
// empty.
func (sh *shard) take(ctx context.Context) []sample {
	for {
		sh.mu.Lock()
		n := len(sh.queue)
		if n >= maxSamplesPerSend || (n > 0 && (sh.stopped || time.Since(sh.oldest) >= batchSendDeadline)) {
			n = min(n, maxSamplesPerSend)
			batch := append([]sample(nil), sh.queue[:n]...)
			sh.queue = append(sh.queue[:0], sh.queue[n:]...)
			sh.oldest = time.Now()
			sh.mu.Unlock()
			return batch
		}
		if n == 0 && sh.stopped {
			sh.mu.Unlock()
			return nil
		}
		wait := batchSendDeadline
		if n > 0 {
			wait = batchSendDeadline - time.Since(sh.oldest)
		}
		sh.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-sh.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// send sends the shard's batches, one at a time, each until it is answered for good.
func (w *writer) send(ctx context.Context, sh *shard) {
	for {
		batch := sh.take(ctx)
		if batch == nil {
			return
		}
		w.record(batch, w.deliver(ctx, batch))
	}
}

// record counts batch's answer: acknowledged (2xx), dropped (4xx) or pending (0: ctx ended
// while retrying).
func (w *writer) record(batch []sample, code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case code/100 == 2:
		w.stats.Acked += int64(len(batch))
		w.stats.Requests++
		for _, s := range batch {
			a := &w.acked[s.series]
			if a.n == 0 || s.ts < a.first {
				a.first = s.ts
			}
			a.last = max(a.last, s.ts)
			a.n++
		}
	case code/100 == 4:
		w.stats.Dropped += int64(len(batch))
	default:
		w.stats.Pending += int64(len(batch))
	}
}

// deliver sends one request until it is answered 2xx or 4xx (not 429), returning that
// status, or 0 when ctx ends first.
func (w *writer) deliver(ctx context.Context, batch []sample) int {
	body := w.encode(batch)
	backoff := minBackoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			w.mu.Lock()
			w.stats.Retries++
			w.mu.Unlock()
		}
		code, retryAfter, err := w.post(ctx, body)
		w.mu.Lock()
		w.stats.Status[code]++
		w.mu.Unlock()
		if err == nil && code/100 == 2 || code/100 == 4 && code != http.StatusTooManyRequests {
			return code
		}
		if ctx.Err() != nil {
			return 0
		}
		wait := backoff
		if retryAfter > 0 {
			wait = retryAfter
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// encode is a remote write 1.0 request of batch, snappy-compressed: a time series per run
// of consecutive samples of one series.
func (w *writer) encode(batch []sample) []byte {
	req := &prompb.WriteRequest{}
	for j, s := range batch {
		if j == 0 || batch[j-1].series != s.series {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: w.series.Labels(int(s.series))})
		}
		ts := &req.Timeseries[len(req.Timeseries)-1]
		ts.Samples = append(ts.Samples, prompb.Sample{Value: w.series.Value(int(s.series), s.ts), Timestamp: s.ts})
	}
	raw, err := req.Marshal()
	if err != nil {
		panic(err) // a WriteRequest of valid fields always marshals
	}
	return snappy.Encode(nil, raw)
}

// post sends body once: the status (0 on a connection failure) and the Retry-After.
func (w *writer) post(ctx context.Context, body []byte) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	req.Header.Set("User-Agent", "tablets-soak")
	if w.header != "" {
		req.Header.Set(tenantHeader, w.header)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")), nil
}

// retryAfter reads a Retry-After header: seconds or an HTTP date (0: none).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// snapshot copies the stats.
func (w *writer) snapshot() WriteStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Status = map[int]int64{}
	for k, v := range w.stats.Status {
		s.Status[k] = v
	}
	return s
}
