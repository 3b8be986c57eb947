package remote

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/tsdb"
)

// hits counts LimitHit's calls by limit.
type hits struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *hits) hit(limit string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[limit]++
}

func (h *hits) get() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.n {
		out[k] = v
	}
	return out
}

// liveConfig is a configuration a test replaces, as a reload does.
type liveConfig struct{ p atomic.Pointer[limits.Config] }

func (c *liveConfig) set(l limits.Limits, status int) {
	c.p.Store(&limits.Config{Limits: l, Requests: limits.Requests{RateLimitedStatus: status}})
}

func (c *liveConfig) get() *limits.Config { return c.p.Load() }

// seriesV1 is a 1.0 request of n series of the metric, samples samples each.
func seriesV1(metric string, n, samples int) *prompb.WriteRequest {
	req := &prompb.WriteRequest{}
	for i := range n {
		ts := prompb.TimeSeries{Labels: v1Labels("__name__", metric, "i", strings.Repeat("x", i+1))}
		for j := range samples {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: 1700000000000 + int64(j)*1000, Value: float64(j)})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	return req
}

func TestWriteMaxSeriesPerRequest(t *testing.T) {
	sink, counted, cfg := &fakeSink{}, &hits{}, &liveConfig{}
	cfg.set(limits.Limits{MaxSeriesPerRequest: 3}, 503)
	h := newWrite(t, sink, &WriteOptions{Limits: cfg.get, LimitHit: counted.hit})

	w := post(t, h, "", "", encodeV1(t, seriesV1("up", 4, 1)))
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "4 series, over the tenant's max_series_per_request of 3")
	assert.Zero(t, sink.calls(), "nothing of a refused request is stored")
	assert.Equal(t, map[string]int{"max_series_per_request": 1}, counted.get())

	// 2.0: the same, with the written headers saying nothing was.
	b := newV2()
	for i := range 4 {
		b.series([]writev2.Sample{{Timestamp: 1700000000000, Value: 1}}, "__name__", "up", "i", strings.Repeat("x", i+1))
	}
	w = post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.Equal(t, "0", w.Header().Get(HeaderSamplesWritten))
	assert.Equal(t, "0", w.Header().Get(HeaderHistogramsWritten))
	assert.Zero(t, sink.calls())

	// At the limit: stored. A reload lifting it applies to the next request.
	require.Equal(t, http.StatusNoContent, post(t, h, "", "", encodeV1(t, seriesV1("up", 3, 1))).Code)
	cfg.set(limits.Limits{MaxSeriesPerRequest: 4}, 503)
	require.Equal(t, http.StatusNoContent, post(t, h, "", "", encodeV1(t, seriesV1("up", 4, 1))).Code)
	assert.Len(t, sink.written(), 4)
	assert.Equal(t, map[string]int{"max_series_per_request": 2}, counted.get())
}

func TestWriteIngestionRate(t *testing.T) {
	sink, counted, cfg := &fakeSink{}, &hits{}, &liveConfig{}
	clock := clock.New(time.Unix(1_700_000_000, 0))
	cfg.set(limits.Limits{IngestionRate: 2, IngestionBurstSize: 10}, 503)
	h := newWrite(t, sink, &WriteOptions{Limits: cfg.get, LimitHit: counted.hit, Now: clock.Now})

	// 8 of the 10 tokens: stored.
	require.Equal(t, http.StatusNoContent, post(t, h, "", "", encodeV1(t, seriesV1("a", 2, 4))).Code)
	require.Equal(t, 1, sink.calls()/2)
	// 5 more: 3 missing at 2/s, 1.5 s: Retry-After 2, nothing stored.
	calls := sink.calls()
	w := post(t, h, "", "", encodeV1(t, seriesV1("b", 1, 5)))
	require.Equal(t, http.StatusServiceUnavailable, w.Code, w.Body.String())
	assert.Equal(t, "2", w.Header().Get("Retry-After"))
	assert.Contains(t, w.Body.String(), "ingestion_rate of 2 samples/s")
	assert.Equal(t, calls, sink.calls(), "a rate-limited request stores nothing")
	assert.Equal(t, map[string]int{"ingestion_rate": 1}, counted.get())

	// 1.5 s later it fits, exactly.
	clock.Add(1500 * time.Millisecond)
	require.Equal(t, http.StatusNoContent, post(t, h, "", "", encodeV1(t, seriesV1("b", 1, 5))).Code)

	// 429 when configured so; 2.0 keeps its headers.
	cfg.set(limits.Limits{IngestionRate: 2, IngestionBurstSize: 10}, 429)
	b := newV2()
	b.series([]writev2.Sample{{Timestamp: 1700000000000, Value: 1}}, "__name__", "c")
	w = post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusTooManyRequests, w.Code, w.Body.String())
	assert.Equal(t, "1", w.Header().Get("Retry-After"), "0.5 s rounds up to 1")
	assert.Equal(t, "0", w.Header().Get(HeaderSamplesWritten))

	// Through WriteTimeSeries (OTLP's way in): the same status and wait.
	_, err := h.WriteTimeSeries(context.Background(), seriesV1("c", 1, 1).Timeseries)
	var se *StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, StatusError{Status: http.StatusTooManyRequests, Msg: se.Msg, RetryAfter: 1}, *se)

	// More than the bucket holds can never fit: 400, no Retry-After.
	w = post(t, h, "", "", encodeV1(t, seriesV1("d", 1, 11)))
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.Empty(t, w.Header().Get("Retry-After"))
	assert.Contains(t, w.Body.String(), "ingestion_burst_size of 10")

	// A reload raising the rate applies at once: 2 s at 100/s refill what 2/s would not.
	cfg.set(limits.Limits{IngestionRate: 100}, 503) // burst: 10 s of it
	clock.Add(2 * time.Second)
	require.Equal(t, http.StatusNoContent, post(t, h, "", "", encodeV1(t, seriesV1("e", 1, 11))).Code)
	assert.Equal(t, map[string]int{"ingestion_rate": 4}, counted.get())
	// No configuration: no limit.
	cfg.p.Store(nil)
	require.Equal(t, http.StatusNoContent, post(t, h, "", "", encodeV1(t, seriesV1("f", 1, 5000))).Code)
	assert.Len(t, sink.written(), 5)
}

// A request refused at the in-flight gate gives its tokens back: the sender retries it.
func TestWriteIngestionRateGateRefunds(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	sink := &fakeSink{writeFn: func(ctx context.Context, _ []tsdb.SeriesPoints) error {
		entered <- struct{}{}
		<-release
		return nil
	}}
	cfg := &liveConfig{}
	clock := clock.New(time.Unix(1_700_000_000, 0))
	cfg.set(limits.Limits{IngestionRate: 1, IngestionBurstSize: 10}, 503)
	h := newWrite(t, sink, &WriteOptions{Limits: cfg.get, Now: clock.Now, MaxSamplesInFlight: 4})

	done := make(chan int)
	go func() {
		n, err := h.WriteTimeSeries(context.Background(), seriesV1("a", 1, 4).Timeseries)
		if err != nil {
			n.Samples = -1
		}
		done <- n.Samples
	}()
	<-entered // holds the 4 samples in flight, and 4 tokens
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := h.WriteTimeSeries(ctx, seriesV1("b", 1, 4).Timeseries)
		errc <- err
	}()
	waitFor(t, func() bool { return h.Stats().RequestsWaiting == 1 })
	cancel()
	err := <-errc
	var se *StatusError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, http.StatusServiceUnavailable, se.Status)
	require.Zero(t, se.RetryAfter)
	close(release)
	require.Equal(t, 4, <-done)
	// 6 tokens are left, not 2: the refused request gave its 4 back.
	_, err = h.WriteTimeSeries(context.Background(), seriesV1("c", 1, 4).Timeseries)
	require.NoError(t, err)
}

func TestWriteLabelLimits(t *testing.T) {
	sink, counted, cfg := &fakeSink{}, &hits{}, &liveConfig{}
	cfg.set(limits.Limits{MaxLabelNamesPerSeries: 3, MaxLabelNameLength: 8, MaxLabelValueLength: 10}, 503)
	h := newWrite(t, sink, &WriteOptions{Limits: cfg.get, LimitHit: counted.hit})
	long := strings.Repeat("v", 1000)
	b := newV2()
	smp := []writev2.Sample{{Timestamp: 1700000000000, Value: 1}, {Timestamp: 1700000001000, Value: 2}}
	b.series(smp, "__name__", "ok", "job", "a", "empty", "") // 2 labels once the empty one is dropped
	b.series(smp, "__name__", "many", "a", "1", "b", "2", "c", "3")
	b.series(smp, "__name__", "name", "longlabel", "1")
	b.series(smp, "__name__", "value", "job", long)
	b.series(smp, "__name__", "ok", "job", "b", "c", "0123456789")
	w := post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	body := w.Body.String()
	assert.Contains(t, body, "stored 4 of 10 float samples; 6 samples rejected")
	assert.Contains(t, body, `series of "many": 4 labels, over the tenant's max_label_names_per_series of 3`)
	assert.Contains(t, body, `series of "name": label name "longlabel" is 9 bytes, over the tenant's max_label_name_length of 8`)
	assert.Contains(t, body, `series of "value": the value of label "job" is 1000 bytes, over the tenant's max_label_value_length of 10`)
	assert.NotContains(t, body, long[:100], "the refusal does not echo the long value")
	assert.Equal(t, "4", w.Header().Get(HeaderSamplesWritten))
	got := sink.written()
	assert.Len(t, got, 2, "the valid series are stored")
	assert.Len(t, got[`ok{job="a"}`], 2)
	assert.Len(t, got[`ok{c="0123456789", job="b"}`], 2)
	assert.Equal(t, map[string]int{"max_label_names_per_series": 1, "max_label_name_length": 1, "max_label_value_length": 1}, counted.get())
	assert.Equal(t, uint64(6), h.Stats().SamplesRejected)

	// A reload lifting the limits applies at once.
	cfg.set(limits.Limits{}, 503)
	require.Equal(t, http.StatusNoContent, post(t, h, ctV2, "snappy", b.encode(t)).Code)
	assert.Len(t, sink.written(), 5)
}

func TestQuoteCuts(t *testing.T) {
	assert.Equal(t, `"abc"`, quote("abc"))
	s := strings.Repeat("a", 63) + "é" + "tail"
	q := quote(s)
	assert.Equal(t, `"`+strings.Repeat("a", 63)+`"...`, q, "cut before a character split in two")
	assert.LessOrEqual(t, len(quote(strings.Repeat("z", math.MaxInt16))), maxQuoted+5)
}

func TestReadMaxSeriesPerSelect(t *testing.T) {
	store := testStore()
	counted, cfg := &hits{}, &liveConfig{}
	cfg.set(limits.Limits{MaxSeriesPerSelect: 1}, 503)
	h := newRead(t, store, &ReadOptions{Limits: cfg.get, LimitHit: counted.hit})
	req := func(types ...prompb.ReadRequest_ResponseType) []byte {
		return readRequest(t, &prompb.ReadRequest{Queries: []*prompb.Query{
			{StartTimestampMs: 0, EndTimestampMs: 10_000, Matchers: []*prompb.LabelMatcher{eq("__name__", "mem")}},
			{StartTimestampMs: 0, EndTimestampMs: 10_000, Matchers: []*prompb.LabelMatcher{eq("host", "a")}}, // cpu and disk
		}, AcceptedResponseTypes: types})
	}
	for _, types := range [][]prompb.ReadRequest_ResponseType{nil, {prompb.ReadRequest_STREAMED_XOR_CHUNKS}} {
		w := postRead(t, h, req(types...))
		require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
		assert.Contains(t, w.Body.String(), "query 1: selects more than the tenant's max_series_per_select of 1 series")
	}
	assert.Equal(t, map[string]int{"max_series_per_select": 2}, counted.get())

	cfg.set(limits.Limits{MaxSeriesPerSelect: 2}, 503)
	w := postRead(t, h, req())
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	w = postRead(t, h, req(prompb.ReadRequest_STREAMED_XOR_CHUNKS))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Len(t, readFrames(t, w.Body.Bytes()), 3)
	assert.Equal(t, map[string]int{"max_series_per_select": 2}, counted.get())
}
