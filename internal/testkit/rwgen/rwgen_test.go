package rwgen

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// decode reads a remote-write request's body.
func decode(t *testing.T, r *http.Request) *prompb.WriteRequest {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Error(err)
		return nil
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		t.Error(err)
		return nil
	}
	var req prompb.WriteRequest
	if err := req.Unmarshal(raw); err != nil {
		t.Error(err)
		return nil
	}
	return &req
}

// With Retry, a request answered 503 is sent again until it is accepted; every sample of a
// series comes in round order with the value Value gives; Answered sees every attempt.
func TestRunRetriesAndValues(t *testing.T) {
	var calls atomic.Int64
	var mu sync.Mutex
	got := map[int][]prompb.Sample{} // by series, as accepted
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := decode(t, r)
		if calls.Add(1)%3 == 1 { // the 1st, 4th, ... attempt fails
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, ts := range req.Timeseries {
			var inst string
			for _, l := range ts.Labels {
				if l.Name == "instance" {
					inst = l.Value
				}
			}
			i, ok := SeriesOf(inst)
			if !ok {
				t.Errorf("instance %q is no series'", inst)
			}
			got[i] = append(got[i], ts.Samples...)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	start := time.UnixMilli(1_700_000_000_000)
	value := func(i, r int) float64 { return float64(i*1000 + r) }
	var answered [2]atomic.Int64 // failed, accepted
	res, err := Run(context.Background(), Config{URL: srv.URL, Series: 10, Metrics: 2, SamplesPerRequest: 4, Shards: 2,
		Interval: time.Second, Requests: 5, Start: start, Value: value, Retry: true,
		Answered: func(_ *prompb.WriteRequest, status int, err error) {
			if err != nil {
				t.Error(err)
			}
			if status == http.StatusNoContent {
				answered[1].Add(1)
			} else {
				answered[0].Add(1)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 10 || res.Samples != 40 || res.Failed != 0 {
		t.Errorf("result %+v, want 10 requests, 40 samples accepted, none failed", res)
	}
	if res.Retried != answered[0].Load() || res.Retried == 0 || res.Status[503] != res.Retried || res.Status[204] != 10 {
		t.Errorf("result %+v; Answered saw %d failed, %d accepted", res, answered[0].Load(), answered[1].Load())
	}
	// Each shard has 5 series: 20 samples are 4 rounds of them.
	for i := range 10 {
		if len(got[i]) != 4 {
			t.Errorf("series %d: %d samples, want 4", i, len(got[i]))
			continue
		}
		for r, s := range got[i] {
			if want := start.Add(time.Duration(r) * time.Second).UnixMilli(); s.Timestamp != want || s.Value != value(i, r) {
				t.Errorf("series %d round %d: %d %v, want %d %v", i, r, s.Timestamp, s.Value, want, value(i, r))
			}
		}
	}
}

// Stop ends an unbounded run; without Retry a failed request counts as failed, once.
func TestRunStopAndFailures(t *testing.T) {
	stop := make(chan struct{})
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 20 {
			close(stop)
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	res, err := Run(context.Background(), Config{URL: srv.URL, Series: 4, Metrics: 1, SamplesPerRequest: 2, Shards: 1,
		Interval: time.Second, Stop: stop})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 20 || res.Requests != 0 || res.Retried != 0 || res.Status[500] != 20 {
		t.Errorf("result %+v, want 20 failed requests, none retried", res)
	}
	if _, err := Run(context.Background(), Config{URL: srv.URL, Series: 4, Metrics: 1, SamplesPerRequest: 2, Shards: 1,
		Interval: time.Second}); err == nil {
		t.Error("no Requests and no Stop: no error")
	}
}

func TestSeriesOf(t *testing.T) {
	for _, i := range []int{0, 7, 12345} {
		if got, ok := SeriesOf(Instance(i)); !ok || got != i {
			t.Errorf("SeriesOf(Instance(%d)) = %d, %v", i, got, ok)
		}
	}
	for _, s := range []string{"", "host-:9100", "host-1", "host-01:9100", "host--1:9100", "x-1:9100"} {
		if i, ok := SeriesOf(s); ok {
			t.Errorf("SeriesOf(%q) = %d, true", s, i)
		}
	}
}
