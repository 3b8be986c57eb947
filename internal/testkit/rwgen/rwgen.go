// Package rwgen is a load generator that speaks Prometheus remote write 1.0: it sends
// requests of many series, as a Prometheus' queue shards do, and measures what was accepted.
// Part of the test kit (internal/testkit): only tests and other kit packages import it.
package rwgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// Config shapes the load.
type Config struct {
	URL               string // the remote-write endpoint
	Series            int    // distinct series, spread over Metrics metric names
	Metrics           int
	SamplesPerRequest int // Prometheus' max_samples_per_send (default 2000)
	Shards            int // concurrent senders (Prometheus' shards)
	Interval          time.Duration
	// Requests is how many requests each shard sends (0, with Stop set: until Stop).
	Requests int
	Start    time.Time // the first sample's time; successive rounds step by Interval
	Client   *http.Client
	// Value, if set, is the value of series i's sample of round r (default: a counter per
	// series, rising by a random step each round).
	Value func(series, round int) float64
	// Retry sends a request again while it is answered 5xx or not at all (the connection
	// failed), after a back-off of 30 ms doubling to 1 s, as Prometheus does, until it is
	// answered otherwise or ctx is done. Without it each request is sent once.
	Retry bool
	// Answered, if set, is called after each attempt with its request and answer: the HTTP
	// status, or 0 and the error. Shards call it concurrently; it must not keep or change
	// the request.
	Answered func(req *prompb.WriteRequest, status int, err error)
	// Stop, if set, ends the run when closed: each shard sends no new request (the one in
	// flight is still answered, and retried).
	Stop <-chan struct{}
}

// Result is what the run measured.
type Result struct {
	Requests, Samples int64 // accepted (2xx)
	Failed            int64 // requests not accepted in the end (with Retry: after their retries)
	Retried           int64 // attempts sent again (Retry)
	Elapsed           time.Duration
	Status            map[int]int64 // every attempt's answer; 0: no answer
}

// SamplesPerSecond is the accepted samples over the elapsed time.
func (r Result) SamplesPerSecond() float64 { return float64(r.Samples) / r.Elapsed.Seconds() }

// Run sends the load and waits for every answer. Series are split among shards by index, so
// that a series' samples come in time order, as Prometheus sends them. The error is the first
// failure to get an answer (a request not accepted in the end), if any.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Series < 1 || cfg.Shards < 1 || cfg.SamplesPerRequest < 1 || cfg.Requests < 0 || (cfg.Requests == 0 && cfg.Stop == nil) ||
		cfg.Metrics < 1 || cfg.Interval <= 0 {
		return Result{}, fmt.Errorf("rwgen: bad config %+v", cfg)
	}
	client := cfg.Client
	if client == nil {
		client = http.DefaultClient
	}
	var res Result
	var mu sync.Mutex
	res.Status = map[int]int64{}
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for shard := range cfg.Shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := newShard(cfg, shard)
			for sent := 0; cfg.Requests == 0 || sent < cfg.Requests; sent++ {
				if stopped(cfg.Stop) {
					return
				}
				req, body, n := g.next()
				code, err := sendRetrying(ctx, client, cfg, req, body, func(code int, retried bool) {
					mu.Lock()
					res.Status[code]++
					if retried {
						res.Retried++
					}
					mu.Unlock()
				})
				mu.Lock()
				if err == nil && code/100 == 2 {
					res.Requests++
					res.Samples += int64(n)
				} else {
					res.Failed++
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
					}
				}
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		return res, err
	}
	return res, nil
}

// Back-off of retried requests (Prometheus' min_backoff and, lower, its max_backoff).
const (
	minBackoff = 30 * time.Millisecond
	maxBackoff = time.Second
)

// sendRetrying sends a request, and again while cfg.Retry says so, calling cfg.Answered and
// count after each attempt. It returns the last attempt's answer.
func sendRetrying(ctx context.Context, client *http.Client, cfg Config, req *prompb.WriteRequest, body []byte,
	count func(code int, retried bool)) (int, error) {
	backoff := minBackoff
	for {
		code, err := send(ctx, client, cfg.URL, body)
		if cfg.Answered != nil {
			cfg.Answered(req, code, err)
		}
		again := cfg.Retry && (err != nil || code >= 500) && ctx.Err() == nil
		count(code, again)
		if !again {
			return code, err
		}
		select {
		case <-ctx.Done():
			return code, err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// shard makes the requests of one sender: its series, a sample each per round.
type shard struct {
	cfg    Config
	series []prompb.TimeSeries
	ids    []int // each series' number among all
	round  int
	next0  int
	rng    *rand.Rand
	values []float64
}

func newShard(cfg Config, index int) *shard {
	s := &shard{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(index), 7))}
	for i := index; i < cfg.Series; i += cfg.Shards {
		s.series = append(s.series, prompb.TimeSeries{Labels: []prompb.Label{
			{Name: "__name__", Value: "rwgen_metric_" + strconv.Itoa(i%cfg.Metrics)},
			{Name: "instance", Value: Instance(i)},
			{Name: "job", Value: "rwgen"},
		}})
		s.ids = append(s.ids, i)
		s.values = append(s.values, 0)
	}
	return s
}

// Instance is the instance label of series i.
func Instance(i int) string { return "host-" + strconv.Itoa(i) + ":9100" }

// SeriesOf is the number of the series whose instance label is instance (ok false if it is
// none of Instance's).
func SeriesOf(instance string) (int, bool) {
	rest, ok := strings.CutPrefix(instance, "host-")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, ":9100")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(num)
	return i, err == nil && i >= 0 && Instance(i) == instance
}

// next is the shard's next request, its snappy-compressed body and its sample count:
// SamplesPerRequest samples from consecutive series, a round's time each.
func (s *shard) next() (*prompb.WriteRequest, []byte, int) {
	req := &prompb.WriteRequest{}
	n := 0
	for n < s.cfg.SamplesPerRequest && len(s.series) > 0 {
		i := s.next0
		ts := s.cfg.Start.Add(time.Duration(s.round) * s.cfg.Interval).UnixMilli()
		var v float64
		if s.cfg.Value != nil {
			v = s.cfg.Value(s.ids[i], s.round)
		} else {
			s.values[i] += float64(s.rng.IntN(100)) // a counter
			v = s.values[i]
		}
		ser := s.series[i]
		ser.Samples = []prompb.Sample{{Value: v, Timestamp: ts}}
		req.Timeseries = append(req.Timeseries, ser)
		n++
		s.next0++
		if s.next0 == len(s.series) {
			s.next0 = 0
			s.round++
		}
	}
	raw, err := req.Marshal()
	if err != nil {
		panic(err) // a WriteRequest of valid fields always marshals
	}
	return req, snappy.Encode(nil, raw), n
}

func send(ctx context.Context, client *http.Client, url string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
