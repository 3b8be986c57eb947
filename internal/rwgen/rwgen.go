// Package rwgen is a load generator that speaks Prometheus remote write 1.0: it sends
// requests of many series, as a Prometheus' queue shards do, and measures what was accepted.
package rwgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
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
	// Requests is how many requests each shard sends.
	Requests int
	Start    time.Time // the first sample's time; successive rounds step by Interval
	Client   *http.Client
}

// Result is what the run measured.
type Result struct {
	Requests, Samples int64 // accepted (2xx)
	Failed            int64 // non-2xx answers
	Elapsed           time.Duration
	Status            map[int]int64
}

// SamplesPerSecond is the accepted samples over the elapsed time.
func (r Result) SamplesPerSecond() float64 { return float64(r.Samples) / r.Elapsed.Seconds() }

// Run sends the load and waits for every answer. Series are split among shards by index, so
// that a series' samples come in time order, as Prometheus sends them.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Series < 1 || cfg.Shards < 1 || cfg.SamplesPerRequest < 1 || cfg.Requests < 1 || cfg.Metrics < 1 || cfg.Interval <= 0 {
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
			for range cfg.Requests {
				body, n := g.next()
				code, err := send(ctx, client, cfg.URL, body)
				mu.Lock()
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					res.Failed++
				} else {
					res.Status[code]++
					if code/100 == 2 {
						res.Requests++
						res.Samples += int64(n)
					} else {
						res.Failed++
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

// shard makes the requests of one sender: its series, a sample each per round.
type shard struct {
	cfg    Config
	series []prompb.TimeSeries
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
			{Name: "instance", Value: "host-" + strconv.Itoa(i) + ":9100"},
			{Name: "job", Value: "rwgen"},
		}})
		s.values = append(s.values, 0)
	}
	return s
}

// next is the snappy-compressed body of the shard's next request and its sample count:
// SamplesPerRequest samples from consecutive series, a round's time each.
func (s *shard) next() ([]byte, int) {
	req := prompb.WriteRequest{}
	n := 0
	for n < s.cfg.SamplesPerRequest && len(s.series) > 0 {
		i := s.next0
		ts := s.cfg.Start.Add(time.Duration(s.round) * s.cfg.Interval).UnixMilli()
		s.values[i] += float64(s.rng.IntN(100)) // a counter
		ser := s.series[i]
		ser.Samples = []prompb.Sample{{Value: s.values[i], Timestamp: ts}}
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
	return snappy.Encode(nil, raw), n
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
