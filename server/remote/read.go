package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/internal/redact"
	"github.com/seed71701133/tablets/server/limits"
)

// Defaults of ReadOptions: Prometheus' own (--storage.remote.read-sample-limit,
// --storage.remote.read-concurrent-limit, --storage.remote.read-max-bytes-in-frame).
const (
	DefaultReadSampleLimit     = 50_000_000
	DefaultReadConcurrency     = 10
	DefaultReadMaxBytesInFrame = 1 << 20
	DefaultReadMaxBodyBytes    = 32 << 20
)

// Content types of remote-read responses.
const (
	ContentTypeSamples = "application/x-protobuf"
	// ContentTypeStreamed is matched by prefix, space included, by Prometheus' client.
	ContentTypeStreamed = "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse"
)

// SamplesPerChunk is the most samples a streamed chunk holds, as Prometheus' encoder
// (storage.NewSeriesToChunkEncoder) cuts them.
const SamplesPerChunk = 120

// ReadOptions configure a ReadHandler. The zero value of each field means its default.
type ReadOptions struct {
	// SampleLimit bounds the samples of a SAMPLES response, which is built whole in memory:
	// 400 above (the same query always exceeds it). Streamed responses are not bounded: they
	// hold a frame at a time. Default 50,000,000.
	SampleLimit int
	// Concurrency bounds the requests served at once; others wait, until their context
	// ends (503). Default 10.
	Concurrency int
	// MaxBytesInFrame is the size a streamed frame grows to before it is sent (it may exceed
	// it by a chunk). Default 1 MiB.
	MaxBytesInFrame int
	// MaxBodyBytes bounds a request body, compressed and decompressed: 413 above. Default
	// 32 MiB.
	MaxBodyBytes int64

	// Tenant picks the limits in the configuration Limits returns (default
	// limits.DefaultTenant).
	Tenant string
	// Limits, if set, returns the configuration whose MaxSeriesPerSelect bounds the series
	// of each query, read for every request; it or its result nil: no limit.
	Limits func() *limits.Config
	// LimitHit, if set, is called with "max_series_per_select" for each request refused by
	// that limit.
	LimitHit func(limit string)
}

// ReadHandler serves remote read (POST /api/v1/read) from a storage.Queryable.
type ReadHandler struct {
	q    storage.Queryable
	opts ReadOptions
	gate *gateOf

	samplesSent    atomic.Uint64
	streamsAborted atomic.Uint64

	mu       sync.Mutex
	requests map[int]uint64
}

// NewReadHandler returns a handler reading q. Bad options give an error wrapping
// tablets.ErrInvalidOptions.
func NewReadHandler(q storage.Queryable, opts *ReadOptions) (*ReadHandler, error) {
	if q == nil {
		return nil, fmt.Errorf("remote: %w: nil queryable", tablets.ErrInvalidOptions)
	}
	o := ReadOptions{}
	if opts != nil {
		o = *opts
	}
	if o.SampleLimit < 0 || o.Concurrency < 0 || o.MaxBytesInFrame < 0 || o.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("remote: %w: negative ReadOptions %+v", tablets.ErrInvalidOptions, o)
	}
	if o.Tenant == "" {
		o.Tenant = limits.DefaultTenant
	}
	if o.SampleLimit == 0 {
		o.SampleLimit = DefaultReadSampleLimit
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultReadConcurrency
	}
	if o.MaxBytesInFrame == 0 {
		o.MaxBytesInFrame = DefaultReadMaxBytesInFrame
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultReadMaxBodyBytes
	}
	return &ReadHandler{q: q, opts: o, gate: newGate(int64(o.Concurrency)), requests: map[int]uint64{}}, nil
}

// ReadStats are a ReadHandler's counters since it was made, for /metrics.
type ReadStats struct {
	// Requests counts the requests answered, by HTTP status code (200 for a streamed
	// response that started, even if it was then aborted).
	Requests map[int]uint64
	// SamplesSent counts the samples of the responses; StreamsAborted the streamed
	// responses cut short by an error after their first frame.
	SamplesSent, StreamsAborted uint64
	// Serving and Waiting are the requests being served and waiting now.
	Serving, Waiting int
}

// Stats returns a snapshot of the counters.
func (h *ReadHandler) Stats() ReadStats {
	serving, waiting := h.gate.state()
	s := ReadStats{Requests: map[int]uint64{}, SamplesSent: h.samplesSent.Load(), StreamsAborted: h.streamsAborted.Load(),
		Serving: int(serving), Waiting: waiting}
	h.mu.Lock()
	for code, n := range h.requests {
		s.Requests[code] = n
	}
	h.mu.Unlock()
	return s
}

func (h *ReadHandler) count(status int) {
	h.mu.Lock()
	h.requests[status]++
	h.mu.Unlock()
}

func (h *ReadHandler) fail(w http.ResponseWriter, err *httpError) {
	h.count(err.status)
	w.Header().Del("Content-Encoding")
	http.Error(w, redact.Secrets(err.msg), err.status)
}

func (h *ReadHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, errorf(http.StatusMethodNotAllowed, "remote read takes POST"))
		return
	}
	if err := checkEncoding(r.Header); err != nil {
		h.fail(w, errorf(http.StatusUnsupportedMediaType, "%v", err))
		return
	}
	ctx := r.Context()
	if err := h.gate.acquire(ctx, 1); err != nil {
		h.fail(w, errorf(http.StatusServiceUnavailable, "gave up waiting to be served: %v", err))
		return
	}
	defer h.gate.release(1)

	body, herr := readSnappy(r, w, h.opts.MaxBodyBytes)
	if herr != nil {
		h.fail(w, herr)
		return
	}
	var req prompb.ReadRequest
	if err := req.Unmarshal(body); err != nil {
		h.fail(w, errorf(http.StatusBadRequest, "decoding prometheus.ReadRequest: %v", err))
		return
	}
	queries := make([]query, len(req.Queries))
	maxSeries := h.maxSeries()
	for i, q := range req.Queries {
		if q == nil {
			h.fail(w, errorf(http.StatusBadRequest, "query %d is empty", i))
			return
		}
		ms, err := toMatchers(q.Matchers)
		if err != nil {
			h.fail(w, errorf(http.StatusBadRequest, "query %d: %v", i, err))
			return
		}
		queries[i] = query{pb: q, matchers: ms, index: i, maxSeries: maxSeries}
	}
	rt, err := negotiateRead(req.AcceptedResponseTypes)
	if err != nil {
		h.fail(w, errorf(http.StatusBadRequest, "%v", err))
		return
	}
	if rt == prompb.ReadRequest_STREAMED_XOR_CHUNKS {
		h.streamed(ctx, w, queries)
		return
	}
	h.samples(ctx, w, queries)
}

type query struct {
	pb        *prompb.Query
	matchers  []*labels.Matcher
	index     int // in the request
	maxSeries int // the most series it may select (0: no limit)
}

// negotiateRead picks the first accepted response type this server has, SAMPLES when the
// client lists none (clients older than streaming), as Prometheus does.
func negotiateRead(accepted []prompb.ReadRequest_ResponseType) (prompb.ReadRequest_ResponseType, error) {
	if len(accepted) == 0 {
		return prompb.ReadRequest_SAMPLES, nil
	}
	for _, t := range accepted {
		if t == prompb.ReadRequest_SAMPLES || t == prompb.ReadRequest_STREAMED_XOR_CHUNKS {
			return t, nil
		}
	}
	return 0, fmt.Errorf("none of the accepted response types %v is supported (SAMPLES, STREAMED_XOR_CHUNKS)", accepted)
}

func toMatchers(pb []*prompb.LabelMatcher) ([]*labels.Matcher, error) {
	out := make([]*labels.Matcher, 0, len(pb))
	for _, m := range pb {
		if m == nil {
			return nil, errors.New("an empty matcher")
		}
		var t labels.MatchType
		switch m.Type {
		case prompb.LabelMatcher_EQ:
			t = labels.MatchEqual
		case prompb.LabelMatcher_NEQ:
			t = labels.MatchNotEqual
		case prompb.LabelMatcher_RE:
			t = labels.MatchRegexp
		case prompb.LabelMatcher_NRE:
			t = labels.MatchNotRegexp
		default:
			return nil, fmt.Errorf("matcher on %q: unknown type %d", m.Name, m.Type)
		}
		lm, err := labels.NewMatcher(t, m.Name, m.Value)
		if err != nil {
			return nil, fmt.Errorf("matcher on %q: %v", m.Name, err)
		}
		out = append(out, lm)
	}
	return out, nil
}

func hintsOf(q *prompb.Query) *storage.SelectHints {
	if h := q.Hints; h != nil {
		return &storage.SelectHints{Start: h.StartMs, End: h.EndMs, Step: h.StepMs, Func: h.Func,
			Grouping: h.Grouping, By: h.By, Range: h.RangeMs}
	}
	return &storage.SelectHints{Start: q.StartTimestampMs, End: q.EndTimestampMs}
}

// each runs query q and calls fn with each series, sorted by labels (streaming requires
// it; a sorted SAMPLES answer costs nothing more here).
func (h *ReadHandler) each(ctx context.Context, q query, fn func(storage.Series) error) error {
	querier, err := h.q.Querier(q.pb.StartTimestampMs, q.pb.EndTimestampMs)
	if err != nil {
		return err
	}
	defer querier.Close()
	set := querier.Select(ctx, true, hintsOf(q.pb), q.matchers...)
	for n := 1; set.Next(); n++ {
		if q.maxSeries > 0 && n > q.maxSeries {
			return h.tooManySeries(q)
		}
		if err := fn(set.At()); err != nil {
			return err
		}
	}
	return set.Err()
}

// readError maps an error of a read to its answer: an *httpError as it is, the storage's as
// statusOf says (bad matchers wrapping tablets.ErrInvalidMatcher are 400).
func readError(i int, err error) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	return errorf(statusOf(err), "query %d: %v", i, err)
}

// samples answers a whole prompb.ReadResponse, snappy-compressed.
func (h *ReadHandler) samples(ctx context.Context, w http.ResponseWriter, queries []query) {
	resp := prompb.ReadResponse{Results: make([]*prompb.QueryResult, len(queries))}
	total := 0
	var it chunkenc.Iterator
	for i, q := range queries {
		res := &prompb.QueryResult{}
		err := h.each(ctx, q, func(s storage.Series) error {
			ts := &prompb.TimeSeries{Labels: prompb.FromLabels(s.Labels(), nil)}
			it = s.Iterator(it)
			for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
				if total++; total > h.opts.SampleLimit {
					return errorf(http.StatusBadRequest, "query %d: over the limit of %d samples a response (ask for a shorter range, or accept STREAMED_XOR_CHUNKS)", i, h.opts.SampleLimit)
				}
				switch vt {
				case chunkenc.ValFloat:
					t, v := it.At()
					ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
				case chunkenc.ValHistogram:
					t, hist := it.AtHistogram(nil)
					ts.Histograms = append(ts.Histograms, intToPrompb(t, hist))
				case chunkenc.ValFloatHistogram:
					t, hist := it.AtFloatHistogram(nil)
					ts.Histograms = append(ts.Histograms, floatToPrompb(t, hist))
				}
			}
			if err := it.Err(); err != nil {
				return err
			}
			// Series with nothing in the range are left out (the index is coarser than
			// the range), as from Prometheus' own storage.
			if len(ts.Samples)+len(ts.Histograms) > 0 {
				res.Timeseries = append(res.Timeseries, ts)
			}
			return nil
		})
		if err != nil {
			h.fail(w, readError(i, err))
			return
		}
		resp.Results[i] = res
	}
	data, err := resp.Marshal()
	if err != nil {
		h.fail(w, errorf(http.StatusInternalServerError, "encoding the response: %v", err))
		return
	}
	w.Header().Set("Content-Type", ContentTypeSamples)
	w.Header().Set("Content-Encoding", "snappy")
	h.count(http.StatusOK)
	h.samplesSent.Add(uint64(total))
	_, _ = w.Write(snappy.Encode(nil, data))
}

// streamed answers frames of prompb.ChunkedReadResponse, each one series' chunks (a
// series spans several frames when its chunks exceed MaxBytesInFrame). An error before the
// first frame is answered with its status; after it, the connection is aborted, so that
// the client sees a broken stream rather than a complete, short answer.
func (h *ReadHandler) streamed(ctx context.Context, w http.ResponseWriter, queries []query) {
	w.Header().Set("Content-Type", ContentTypeStreamed)
	flusher, _ := w.(http.Flusher)
	fw := &frameWriter{w: w, flusher: flusher}
	for _, q := range queries {
		if err := h.countSeries(ctx, q); err != nil {
			h.fail(w, readError(q.index, err))
			return
		}
	}
	sent := 0
	var it chunkenc.Iterator
	for i, q := range queries {
		err := h.each(ctx, q, func(s storage.Series) error {
			lbls := prompb.FromLabels(s.Labels(), nil)
			room := h.opts.MaxBytesInFrame
			for _, l := range lbls {
				room -= l.Size()
			}
			var chunks []prompb.Chunk
			size := 0
			flush := func() error {
				if len(chunks) == 0 {
					return nil
				}
				msg := prompb.ChunkedReadResponse{ChunkedSeries: []*prompb.ChunkedSeries{{Labels: lbls, Chunks: chunks}}, QueryIndex: int64(i)}
				data, err := msg.Marshal()
				if err != nil {
					return err
				}
				chunks, size = nil, 0
				return fw.write(data)
			}
			it = s.Iterator(it)
			err := encodeChunks(it, func(c prompb.Chunk, n int) error {
				sent += n
				chunks = append(chunks, c)
				if size += c.Size(); size >= room {
					return flush()
				}
				return nil
			})
			if err != nil {
				return err
			}
			return flush()
		})
		if err != nil {
			if !fw.started {
				h.fail(w, readError(i, err))
				return
			}
			h.streamsAborted.Add(1)
			h.samplesSent.Add(uint64(sent))
			panic(http.ErrAbortHandler)
		}
	}
	h.count(http.StatusOK)
	h.samplesSent.Add(uint64(sent))
	if !fw.started {
		w.WriteHeader(http.StatusOK) // no series: an empty stream
	}
}

// intToPrompb is prompb.FromIntHistogram with the custom bounds it leaves out.
func intToPrompb(t int64, h *histogram.Histogram) prompb.Histogram {
	out := prompb.FromIntHistogram(t, h)
	out.CustomValues = h.CustomValues
	return out
}

// floatToPrompb is prompb.FromFloatHistogram with the custom bounds it leaves out.
func floatToPrompb(t int64, h *histogram.FloatHistogram) prompb.Histogram {
	out := prompb.FromFloatHistogram(t, h)
	out.CustomValues = h.CustomValues
	return out
}

// chunkTypes are the remote-read types of Prometheus' chunk encodings.
var chunkTypes = map[chunkenc.Encoding]prompb.Chunk_Encoding{
	chunkenc.EncXOR:            prompb.Chunk_XOR,
	chunkenc.EncHistogram:      prompb.Chunk_HISTOGRAM,
	chunkenc.EncFloatHistogram: prompb.Chunk_FLOAT_HISTOGRAM,
}

// encodeChunks cuts the samples of it into chunks of Prometheus' encodings, as its own
// storage does (storage.NewSeriesToChunkEncoder): XOR for float samples, HISTOGRAM and
// FLOAT_HISTOGRAM for integer and float histograms. A chunk holds one kind and at most
// SamplesPerChunk samples, and a histogram chunk ends where its appender starts another (a
// counter reset, a schema or custom bounds change); a series switching kinds gets a chunk a
// run. emit gets each chunk and its sample count.
func encodeChunks(it chunkenc.Iterator, emit func(prompb.Chunk, int) error) error {
	var (
		c          chunkenc.Chunk
		app        chunkenc.Appender
		kind       chunkenc.ValueType
		mint, maxt int64
	)
	done := func() error {
		chunk := prompb.Chunk{MinTimeMs: mint, MaxTimeMs: maxt, Type: chunkTypes[c.Encoding()], Data: c.Bytes()}
		n := c.NumSamples()
		c = nil
		return emit(chunk, n)
	}
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		if c != nil && (vt != kind || c.NumSamples() >= SamplesPerChunk) {
			if err := done(); err != nil {
				return err
			}
		}
		fresh := c == nil
		if fresh {
			var err error
			switch vt {
			case chunkenc.ValFloat, chunkenc.ValHistogram, chunkenc.ValFloatHistogram:
				c, err = chunkenc.NewEmptyChunk(vt.ChunkEncoding())
			default:
				err = fmt.Errorf("a sample of unknown type %v", vt)
			}
			if err != nil {
				return err
			}
			if app, err = c.Appender(); err != nil {
				return err
			}
			kind = vt
		}
		var (
			t      int64
			next   chunkenc.Chunk
			recode bool
			err    error
		)
		switch vt {
		case chunkenc.ValFloat:
			var v float64
			t, v = it.At()
			app.Append(t, v)
		case chunkenc.ValHistogram:
			var h *histogram.Histogram
			t, h = it.AtHistogram(nil)
			// The appender may rewrite the spans and buckets it is given: a copy
			// keeps the storage's sample as it is.
			next, recode, app, err = app.AppendHistogram(nil, t, h.Copy(), false)
		case chunkenc.ValFloatHistogram:
			var h *histogram.FloatHistogram
			t, h = it.AtFloatHistogram(nil)
			next, recode, app, err = app.AppendFloatHistogram(nil, t, h.Copy(), false)
		}
		if err != nil {
			return fmt.Errorf("encoding the sample at %d ms: %w", t, err)
		}
		if next != nil {
			if !recode {
				// The appender started a new chunk with this sample: the current one
				// is complete.
				if err := done(); err != nil {
					return err
				}
				fresh = true
			}
			c = next
		}
		if fresh {
			mint = t
		}
		maxt = t
	}
	if err := it.Err(); err != nil {
		return err
	}
	if c != nil {
		return done()
	}
	return nil
}
