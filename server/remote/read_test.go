package remote

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

type sample struct {
	t int64
	v float64
}

type memSeries struct {
	lset    labels.Labels
	samples []sample
}

// memQueryable is a storage.Queryable over a few series in memory. It returns its series
// in insertion order unless asked to sort, and every series that matches, even with no
// sample in the range (as an index coarser than the range would).
type memQueryable struct {
	series []memSeries
	err    error // from Select
	failAt int   // >0: the set fails after this many series

	mu    sync.Mutex
	hints []*storage.SelectHints
	sorts []bool
}

func (q *memQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return &memQuerier{q: q, mint: mint, maxt: maxt}, nil
}

type memQuerier struct {
	q          *memQueryable
	mint, maxt int64
}

func (m *memQuerier) Select(_ context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	m.q.mu.Lock()
	m.q.hints = append(m.q.hints, hints)
	m.q.sorts = append(m.q.sorts, sortSeries)
	m.q.mu.Unlock()
	if m.q.err != nil {
		return storage.ErrSeriesSet(m.q.err)
	}
	var out []storage.Series
	for _, s := range m.q.series {
		ok := true
		for _, mt := range ms {
			ok = ok && mt.Matches(s.lset.Get(mt.Name))
		}
		if !ok {
			continue
		}
		var in []sample
		for _, smp := range s.samples {
			if smp.t >= m.mint && smp.t <= m.maxt {
				in = append(in, smp)
			}
		}
		out = append(out, &memSer{s.lset, in})
	}
	if sortSeries {
		sort.SliceStable(out, func(i, j int) bool { return labels.Compare(out[i].Labels(), out[j].Labels()) < 0 })
	}
	return &memSet{series: out, i: -1, failAt: m.q.failAt}
}

func (m *memQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, errors.New("not used")
}

func (m *memQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, errors.New("not used")
}

func (m *memQuerier) Close() error { return nil }

type memSet struct {
	series []storage.Series
	i      int
	failAt int
}

func (s *memSet) Next() bool {
	if s.failAt > 0 && s.i+1 >= s.failAt {
		return false
	}
	s.i++
	return s.i < len(s.series)
}
func (s *memSet) At() storage.Series { return s.series[s.i] }
func (s *memSet) Err() error {
	if s.failAt > 0 && s.i+1 >= s.failAt {
		return errors.New("storage broke mid-way")
	}
	return nil
}
func (s *memSet) Warnings() annotations.Annotations { return nil }

type memSer struct {
	lset    labels.Labels
	samples []sample
}

func (s *memSer) Labels() labels.Labels                        { return s.lset }
func (s *memSer) Iterator(chunkenc.Iterator) chunkenc.Iterator { return iterOf(s.samples) }

// iterOf iterates samples through an XOR chunk of Prometheus' (a hand-written iterator
// would need a method named Seek, which go vet takes for io.Seeker's).
func iterOf(samples []sample) chunkenc.Iterator {
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		panic(err)
	}
	for _, smp := range samples {
		app.Append(smp.t, smp.v)
	}
	return c.Iterator(nil)
}

// testStore: cpu (300 samples, every 10 s, one a staleness marker), mem (3), disk (none in
// range after 1000), inserted unsorted.
func testStore() *memQueryable {
	var cpu []sample
	for i := range 300 {
		v := float64(i) * 0.25
		if i == 150 {
			v = staleNaN
		}
		cpu = append(cpu, sample{int64(i) * 10_000, v})
	}
	return &memQueryable{series: []memSeries{
		{labels.FromStrings("__name__", "mem", "host", "b"), []sample{{0, 1}, {10_000, math.Inf(1)}, {20_000, -3.5}}},
		{labels.FromStrings("__name__", "cpu", "host", "a"), cpu},
		{labels.FromStrings("__name__", "disk", "host", "a"), []sample{{500, 9}}},
	}}
}

func readRequest(t testing.TB, req *prompb.ReadRequest) []byte {
	t.Helper()
	data, err := req.Marshal()
	require.NoError(t, err)
	return snappy.Encode(nil, data)
}

func postRead(t testing.TB, h http.Handler, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/api/v1/read", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/x-protobuf")
	r.Header.Set("Content-Encoding", "snappy")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func newRead(t testing.TB, q storage.Queryable, opts *ReadOptions) *ReadHandler {
	t.Helper()
	h, err := NewReadHandler(q, opts)
	require.NoError(t, err)
	return h
}

func eq(name, value string) *prompb.LabelMatcher {
	return &prompb.LabelMatcher{Type: prompb.LabelMatcher_EQ, Name: name, Value: value}
}

// wantSeries is what the store holds for lset in [mint, maxt].
func wantSeries(q *memQueryable, lset labels.Labels, mint, maxt int64) []sample {
	for _, s := range q.series {
		if labels.Equal(s.lset, lset) {
			var out []sample
			for _, smp := range s.samples {
				if smp.t >= mint && smp.t <= maxt {
					out = append(out, smp)
				}
			}
			return out
		}
	}
	return nil
}

func requireSameSamples(t testing.TB, want []sample, got []sample) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].t, got[i].t, "sample %d", i)
		require.Equal(t, math.Float64bits(want[i].v), math.Float64bits(got[i].v), "sample %d at %d: value bits", i, want[i].t)
	}
}

func TestReadSamples(t *testing.T) {
	store := testStore()
	h := newRead(t, store, nil)
	req := &prompb.ReadRequest{Queries: []*prompb.Query{
		{StartTimestampMs: 1000, EndTimestampMs: 2_000_000, Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "__name__", Value: "cpu|mem|disk"}},
			Hints: &prompb.ReadHints{StartMs: 1000, EndMs: 2_000_000, StepMs: 15_000, Func: "rate", RangeMs: 60_000}},
		{StartTimestampMs: 0, EndTimestampMs: 10_000, Matchers: []*prompb.LabelMatcher{eq("__name__", "mem")}},
	}}
	w := postRead(t, h, readRequest(t, req))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "application/x-protobuf", w.Header().Get("Content-Type"))
	assert.Equal(t, "snappy", w.Header().Get("Content-Encoding"))
	data, err := snappy.Decode(nil, w.Body.Bytes())
	require.NoError(t, err)
	var resp prompb.ReadResponse
	require.NoError(t, resp.Unmarshal(data))
	require.Len(t, resp.Results, 2)

	// Query 0: sorted by labels; disk has nothing in range and is left out.
	got := resp.Results[0].Timeseries
	require.Len(t, got, 2)
	cpu, mem := labels.FromStrings("__name__", "cpu", "host", "a"), labels.FromStrings("__name__", "mem", "host", "b")
	assert.Equal(t, prompb.FromLabels(cpu, nil), got[0].Labels)
	assert.Equal(t, prompb.FromLabels(mem, nil), got[1].Labels)
	requireSameSamples(t, wantSeries(store, cpu, 1000, 2_000_000), fromProm(got[0].Samples))
	requireSameSamples(t, wantSeries(store, mem, 1000, 2_000_000), fromProm(got[1].Samples))
	// The range is inclusive at both ends, as Prometheus' is.
	got = resp.Results[1].Timeseries
	require.Len(t, got, 1)
	requireSameSamples(t, []sample{{0, 1}, {10_000, math.Inf(1)}}, fromProm(got[0].Samples))

	require.Len(t, store.hints, 2)
	assert.Equal(t, &storage.SelectHints{Start: 1000, End: 2_000_000, Step: 15_000, Func: "rate", Range: 60_000}, store.hints[0])
	assert.Equal(t, &storage.SelectHints{Start: 0, End: 10_000}, store.hints[1], "no hints: the query's range")
	assert.Equal(t, []bool{true, true}, store.sorts)
	assert.Equal(t, uint64(200+2+2), h.Stats().SamplesSent)
}

func fromProm(ss []prompb.Sample) []sample {
	out := make([]sample, len(ss))
	for i, s := range ss {
		out[i] = sample{s.Timestamp, s.Value}
	}
	return out
}

// readFrames parses a streamed response as Prometheus' ChunkedReader does, checking each
// frame's CRC.
func readFrames(t testing.TB, body []byte) []prompb.ChunkedReadResponse {
	t.Helper()
	r := bufio.NewReader(bytes.NewReader(body))
	var out []prompb.ChunkedReadResponse
	for {
		size, err := binary.ReadUvarint(r)
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		var sum uint32
		require.NoError(t, binary.Read(r, binary.BigEndian, &sum))
		data := make([]byte, size)
		_, err = io.ReadFull(r, data)
		require.NoError(t, err)
		require.Equal(t, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)), sum, "frame %d: CRC", len(out))
		var msg prompb.ChunkedReadResponse
		require.NoError(t, msg.Unmarshal(data))
		out = append(out, msg)
	}
}

// chunkSamples decodes an XOR chunk, checking its bounds.
func chunkSamples(t testing.TB, c prompb.Chunk) []sample {
	t.Helper()
	require.Equal(t, prompb.Chunk_XOR, c.Type)
	chk, err := chunkenc.FromData(chunkenc.EncXOR, c.Data)
	require.NoError(t, err)
	var out []sample
	it := chk.Iterator(nil)
	for it.Next() == chunkenc.ValFloat {
		ts, v := it.At()
		out = append(out, sample{ts, v})
	}
	require.NoError(t, it.Err())
	require.NotEmpty(t, out)
	require.LessOrEqual(t, len(out), SamplesPerChunk)
	assert.Equal(t, c.MinTimeMs, out[0].t)
	assert.Equal(t, c.MaxTimeMs, out[len(out)-1].t)
	return out
}

func TestReadStreamedChunks(t *testing.T) {
	store := testStore()
	h := newRead(t, store, nil)
	req := &prompb.ReadRequest{
		Queries: []*prompb.Query{
			{StartTimestampMs: 0, EndTimestampMs: math.MaxInt64, Matchers: []*prompb.LabelMatcher{eq("host", "a")}},
			{StartTimestampMs: 10_000, EndTimestampMs: 20_000, Matchers: []*prompb.LabelMatcher{eq("__name__", "mem")}},
		},
		AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS, prompb.ReadRequest_SAMPLES},
	}
	w := postRead(t, h, readRequest(t, req))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse", w.Header().Get("Content-Type"))
	assert.Empty(t, w.Header().Get("Content-Encoding"))
	frames := readFrames(t, w.Body.Bytes())
	require.Len(t, frames, 3, "cpu, disk, then mem")

	cpu, disk, mem := labels.FromStrings("__name__", "cpu", "host", "a"), labels.FromStrings("__name__", "disk", "host", "a"), labels.FromStrings("__name__", "mem", "host", "b")
	for i, want := range []struct {
		query  int64
		lset   labels.Labels
		chunks []int
		mint   int64
		maxt   int64
	}{
		{0, cpu, []int{120, 120, 60}, 0, math.MaxInt64},
		{0, disk, []int{1}, 0, math.MaxInt64},
		{1, mem, []int{2}, 10_000, 20_000},
	} {
		f := frames[i]
		assert.Equal(t, want.query, f.QueryIndex)
		require.Len(t, f.ChunkedSeries, 1)
		assert.Equal(t, prompb.FromLabels(want.lset, nil), f.ChunkedSeries[0].Labels)
		var all []sample
		var sizes []int
		for _, c := range f.ChunkedSeries[0].Chunks {
			s := chunkSamples(t, c)
			sizes = append(sizes, len(s))
			all = append(all, s...)
		}
		assert.Equal(t, want.chunks, sizes)
		requireSameSamples(t, wantSeries(store, want.lset, want.mint, want.maxt), all)
	}
}

func TestReadStreamedFrameSize(t *testing.T) {
	store := testStore()
	// Frames of about 300 bytes: each cpu chunk (some 700 bytes of random-ish values)
	// fills a frame by itself.
	h := newRead(t, store, &ReadOptions{MaxBytesInFrame: 300})
	req := &prompb.ReadRequest{
		Queries:               []*prompb.Query{{StartTimestampMs: 0, EndTimestampMs: math.MaxInt64, Matchers: []*prompb.LabelMatcher{eq("__name__", "cpu")}}},
		AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS},
	}
	w := postRead(t, h, readRequest(t, req))
	require.Equal(t, http.StatusOK, w.Code)
	frames := readFrames(t, w.Body.Bytes())
	require.Greater(t, len(frames), 1, "the series spans several frames")
	var all []sample
	for _, f := range frames {
		require.Len(t, f.ChunkedSeries, 1)
		for _, c := range f.ChunkedSeries[0].Chunks {
			all = append(all, chunkSamples(t, c)...)
		}
		// A frame exceeds the limit by at most its last chunk.
		last := f.ChunkedSeries[0].Chunks[len(f.ChunkedSeries[0].Chunks)-1]
		assert.Less(t, f.Size()-last.Size(), 300+100)
	}
	cpu := labels.FromStrings("__name__", "cpu", "host", "a")
	requireSameSamples(t, wantSeries(store, cpu, 0, math.MaxInt64), all)
}

func TestReadNegotiation(t *testing.T) {
	S, X := prompb.ReadRequest_SAMPLES, prompb.ReadRequest_STREAMED_XOR_CHUNKS
	for _, tc := range []struct {
		accepted []prompb.ReadRequest_ResponseType
		status   int
		ct       string
	}{
		{nil, 200, ContentTypeSamples},
		{[]prompb.ReadRequest_ResponseType{S, X}, 200, ContentTypeSamples},
		{[]prompb.ReadRequest_ResponseType{X, S}, 200, ContentTypeStreamed},
		{[]prompb.ReadRequest_ResponseType{7, X}, 200, ContentTypeStreamed},
		{[]prompb.ReadRequest_ResponseType{7}, 400, ""},
	} {
		t.Run(fmt.Sprint(tc.accepted), func(t *testing.T) {
			req := &prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: 0, EndTimestampMs: 100, Matchers: []*prompb.LabelMatcher{eq("__name__", "mem")}}}, AcceptedResponseTypes: tc.accepted}
			w := postRead(t, newRead(t, testStore(), nil), readRequest(t, req))
			require.Equal(t, tc.status, w.Code, w.Body.String())
			if tc.ct != "" {
				assert.Equal(t, tc.ct, w.Header().Get("Content-Type"))
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	okQuery := []*prompb.Query{{StartTimestampMs: 0, EndTimestampMs: math.MaxInt64, Matchers: []*prompb.LabelMatcher{eq("__name__", "cpu")}}}
	for _, tc := range []struct {
		name   string
		body   []byte
		store  func(*memQueryable)
		opts   *ReadOptions
		status int
	}{
		{"not snappy", []byte("plain text"), nil, nil, 400},
		{"not protobuf", snappy.Encode(nil, []byte{0xff, 0xff}), nil, nil, 400},
		{"bad regexp", readRequest(t, &prompb.ReadRequest{Queries: []*prompb.Query{{Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "a", Value: "(("}}}}}), nil, nil, 400},
		{"unknown matcher type", readRequest(t, &prompb.ReadRequest{Queries: []*prompb.Query{{Matchers: []*prompb.LabelMatcher{{Type: 9, Name: "a", Value: "b"}}}}}), nil, nil, 400},
		{"storage says bad input", readRequest(t, &prompb.ReadRequest{Queries: okQuery}), func(q *memQueryable) {
			q.err = fmt.Errorf("tsdb: %w: no matcher that does not match the empty string", tablets.ErrInvalidMatcher)
		}, nil, 400},
		{"storage throttled", readRequest(t, &prompb.ReadRequest{Queries: okQuery}), func(q *memQueryable) {
			q.err = fmt.Errorf("tsdb: index: %w", azureError(503, "ServerBusy"))
		}, nil, 503},
		{"storage unknown", readRequest(t, &prompb.ReadRequest{Queries: okQuery}), func(q *memQueryable) { q.err = errors.New("odd") }, nil, 500},
		{"sample limit", readRequest(t, &prompb.ReadRequest{Queries: okQuery}), nil, &ReadOptions{SampleLimit: 299}, 400},
		{"streamed, failing before the first frame", readRequest(t, &prompb.ReadRequest{Queries: okQuery, AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}}),
			func(q *memQueryable) { q.err = fmt.Errorf("%w: bad", tablets.ErrInvalidOptions) }, nil, 400},
		{"body too big", readRequest(t, &prompb.ReadRequest{Queries: okQuery}), nil, &ReadOptions{MaxBodyBytes: 8}, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := testStore()
			if tc.store != nil {
				tc.store(store)
			}
			h := newRead(t, store, tc.opts)
			w := postRead(t, h, tc.body)
			assert.Equal(t, tc.status, w.Code, w.Body.String())
			assert.NotEmpty(t, w.Body.String())
			assert.Empty(t, w.Header().Get("Content-Encoding"), "an error body is plain text")
			assert.Equal(t, map[int]uint64{tc.status: 1}, h.Stats().Requests)
		})
	}
	t.Run("sample limit exactly met", func(t *testing.T) {
		w := postRead(t, newRead(t, testStore(), &ReadOptions{SampleLimit: 300}), readRequest(t, &prompb.ReadRequest{Queries: okQuery}))
		assert.Equal(t, 200, w.Code)
	})
	t.Run("gzip", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodPost, "/api/v1/read", bytes.NewReader(readRequest(t, &prompb.ReadRequest{Queries: okQuery})))
		r.Header.Set("Content-Encoding", "gzip")
		w := httptest.NewRecorder()
		newRead(t, testStore(), nil).ServeHTTP(w, r)
		assert.Equal(t, http.StatusUnsupportedMediaType, w.Code)
	})
	t.Run("GET", func(t *testing.T) {
		w := httptest.NewRecorder()
		newRead(t, testStore(), nil).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/read", nil))
		assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	})
}

// An error after the first frame cannot change the status: the connection is cut, and the
// client sees a broken stream, not a short, complete one.
func TestReadStreamedAbortsMidway(t *testing.T) {
	store := testStore()
	store.failAt = 1 // the first series (sorted: cpu) is sent, then the set fails
	h := newRead(t, store, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	req := &prompb.ReadRequest{
		Queries:               []*prompb.Query{{StartTimestampMs: 0, EndTimestampMs: math.MaxInt64, Matchers: []*prompb.LabelMatcher{eq("host", "a")}}},
		AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS},
	}
	resp, err := http.Post(srv.URL, "application/x-protobuf", bytes.NewReader(readRequest(t, req)))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.Error(t, err, "the stream must not end cleanly")
	frames := readFrames(t, body)
	require.Len(t, frames, 1)
	assert.Equal(t, uint64(1), h.Stats().StreamsAborted)
}

func TestReadConcurrencyBound(t *testing.T) {
	block := make(chan struct{})
	entered := make(chan struct{}, 3)
	q := &blockingQueryable{memQueryable: testStore(), entered: entered, block: block}
	h := newRead(t, q, &ReadOptions{Concurrency: 2})
	body := readRequest(t, &prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: 0, EndTimestampMs: 100, Matchers: []*prompb.LabelMatcher{eq("__name__", "mem")}}}})
	codes := make(chan int, 3)
	for range 3 {
		go func() { codes <- postRead(t, h, body).Code }()
	}
	<-entered
	<-entered
	waitFor(t, func() bool { return h.Stats().Waiting == 1 })
	assert.Equal(t, 2, h.Stats().Serving)
	close(block)
	for range 3 {
		assert.Equal(t, 200, <-codes)
	}
	assert.Equal(t, 0, h.Stats().Serving)
}

type blockingQueryable struct {
	*memQueryable
	entered chan struct{}
	block   chan struct{}
}

func (b *blockingQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	b.entered <- struct{}{}
	<-b.block
	return b.memQueryable.Querier(mint, maxt)
}

func TestEncodeChunksXORRoundTrip(t *testing.T) {
	var in []sample
	for i := range 241 {
		in = append(in, sample{int64(i)*15_000 + int64(i%7), math.Float64frombits(uint64(0x7ff0000000000001 + i%3))})
	}
	var chunks []prompb.Chunk
	var counts []int
	require.NoError(t, encodeChunks(iterOf(in), func(c prompb.Chunk, n int) error {
		chunks = append(chunks, c)
		counts = append(counts, n)
		return nil
	}))
	assert.Equal(t, []int{120, 120, 1}, counts)
	var out []sample
	for _, c := range chunks {
		out = append(out, chunkSamples(t, c)...)
	}
	requireSameSamples(t, in, out)
	assert.True(t, slices.IsSortedFunc(out, func(a, b sample) int { return int(a.t - b.t) }))
}

// A storage error quoting the account's SAS URL reaches the reply without its signature.
func TestReadErrorRedactsSecrets(t *testing.T) {
	const sig = "c2VjcmV0LXNpZ25hdHVyZQ%3D%3D"
	store := testStore()
	store.err = fmt.Errorf("tsdb: index: GET https://acct.table.core.windows.net/t()?sv=2019-02-02&sig=%s&se=2030: %w", sig, azureError(503, "ServerBusy"))
	okQuery := []*prompb.Query{{StartTimestampMs: 0, EndTimestampMs: math.MaxInt64, Matchers: []*prompb.LabelMatcher{eq("__name__", "cpu")}}}
	w := postRead(t, newRead(t, store, nil), readRequest(t, &prompb.ReadRequest{Queries: okQuery}))
	require.Equal(t, 503, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), "sig=REDACTED", "the error is still told")
	require.NotContains(t, w.Body.String(), sig)
}
