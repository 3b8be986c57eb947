// Package remote serves Prometheus' remote storage protocols over a tsdb database: remote
// write 1.0 and 2.0 (POST /api/v1/write, WriteHandler) and remote read (POST /api/v1/read,
// ReadHandler). It implements the wire formats itself (Prometheus' storage/remote drags in
// its config and OpenTelemetry); the framing of streamed reads is Prometheus' ChunkedWriter's.
//
// # Remote write
//
// The request is a snappy (block format) protobuf: prometheus.WriteRequest (1.0) when
// Content-Type is application/x-protobuf without a proto parameter or with
// proto=prometheus.WriteRequest, io.prometheus.write.v2.Request (2.0) with
// proto=io.prometheus.write.v2.Request. As in Prometheus' own receiver, an absent
// Content-Type means 1.0 and an absent Content-Encoding snappy (old 1.0 senders omit them).
//
// Samples keep Prometheus' meaning: a timestamp of t ms is time.UnixMilli(t), and values
// are stored bit for bit, the staleness marker (NaN 0x7ff0000000000002) included. The
// samples of one label set, from however many TimeSeries of the request, go to the sink as
// one tsdb.SeriesPoints, sorted by time, one per timestamp: the last in request order wins,
// as a later write of a timestamp wins in Prometheus. Writes are idempotent (upserts), so a
// sender that retries a whole request after a 5xx stores nothing twice.
//
// Native histogram samples (1.0's TimeSeries.Histograms, 2.0's) go to the sink the same way,
// one tsdb.SeriesHistograms a label set, in the same WriteSamples call as the float samples
// (for a tsdb.DB one Appender commit: the two kinds share the staging transactions, so a
// request holding both costs the transactions of one): integer and float histograms, exponential schemas -4..8
// and custom buckets (-53, with their custom_values, in 1.0 too), stored exactly as sent
// (schema, zero threshold and count, count, sum, spans, bucket deltas or absolute counts,
// custom bounds, counter reset hint; a staleness marker is a histogram whose sum is the stale
// NaN). A series may hold float samples at some times and histograms at others, as in
// Prometheus; a histogram at the time of a float sample of its series in the same request
// is rejected (Prometheus appends the floats first and rejects such a histogram as a
// duplicate sample for the timestamp). Across requests, the handler does not look for one:
// both are stored, and reads decide. Each histogram is validated first
// (tablets.HistogramPoint.Validate: Prometheus' rules and the schema range): an invalid one
// is rejected, naming its series, and the rest of the request is stored.
//
// The answer is 204 only after WriteSamples returned nil: every float and histogram sample
// is stored. Otherwise (spec 2.0, "Invalid Samples" and "Retries &
// Backoff"):
//
//	status  when                                                     the sender
//	204     every float and histogram sample stored                  done
//	400     undecodable body (snappy, protobuf, 2.0 symbol refs);    drops the request
//	        after storing the valid samples: a series with invalid
//	        labels (tsdb's rules, or no __name__, as Prometheus
//	        rejects), a timestamp outside 1970..9999, a sample older
//	        than the raw retention (tsdb.ErrExpired), an invalid
//	        histogram (spans not matching the buckets, a schema out
//	        of range, custom bounds not increasing, a negative count,
//	        a NaN count, ...: tablets.ErrInvalidHistogram), a
//	        histogram at a float sample's time; from the sink:
//	        ErrInvalidOptions, Labels, Matcher, Limit, Series, Time,
//	        Token, Histogram, ErrExpired, or Azure rejecting the
//	        content (4xx other than below)
//	405     not POST                                                 drops it
//	413     body over MaxBodyBytes (compressed or decoded), or more  drops it
//	        samples than MaxSamplesInFlight (histograms weighted:
//	        it could never fit)
//	415     Content-Type, proto or Content-Encoding not supported    drops it (or tries 1.0)
//	500     a sink error of unknown kind                             retries
//	503     retryable: Azure throttling (429, 503 ServerBusy), 5xx,  retries with backoff
//	        408, 401/403 (credentials an operator can fix),
//	        404/409/412 (a table dropped or being deleted
//	        meanwhile), network errors, context canceled or
//	        expired, or the request's context ended while it waited
//	        for room
//
// With WriteOptions.Limits, the tenant's ingest limits come first, before anything is stored
// (docs/limits.md says why each answers what it does):
//
//	400     more series than max_series_per_request, or more     drops the request
//	        samples than the ingestion bucket holds
//	        (ingestion_burst_size): nothing stored
//	503/429 over ingestion_rate now: rate_limited_status, with    retries after Retry-After
//	        Retry-After (seconds until it would fit); nothing     (429 only with
//	        stored                                                retry_on_http_429)
//	400     after storing the rest, a series over                 drops the request
//	        max_label_names_per_series, max_label_name_length or
//	        max_label_value_length (as invalid labels)
//
// Retryable answers are 503 and never 429: Prometheus retries 429 only when
// retry_on_http_429 is set, and drops the data otherwise. When WriteSamples fails for several
// series at once, one permanent failure makes the answer 400: a 5xx would
// make the sender retry a request that can never succeed, forever, blocking its queue.
//
// Exemplars and metadata are dropped without an error, as Prometheus' own receiver does
// with exemplars it cannot store: they annotate samples, and failing the samples for them
// would lose data; 2.0 answers count them 0 written. 2.0 answers carry the three
// X-Prometheus-Remote-Write-*-Written headers whatever the status (once the Content-Type
// said 2.0): Samples-Written counts the float samples stored, Histograms-Written the
// histogram samples (on a failed write, all but those its errors list; none when an error
// names no series).
//
// Memory is bounded: a body is at most MaxBodyBytes, compressed and decoded (snappy's
// header gives the decoded size before anything is allocated), and the samples of the
// requests being stored are at most MaxSamplesInFlight, a histogram sample weighing 8 float
// samples plus a quarter of its buckets, spans and custom bounds (about the memory it takes
// once built). A request over the limit waits, in arrival order, before its points are
// built, until its context ends: the wait slows the sender (its shards block on the
// request), which is the back-pressure Prometheus expects.
//
// WriteHandler.WriteTimeSeries stores remote-write 1.0 time series given in memory exactly
// as a 1.0 request holding them is stored (limits, validation, statuses), for other
// receivers (the OTLP endpoint): its *StatusError carries the status of the table above.
//
// The database decides what it rejects: WriteSamples stores what it can and names, series by
// series and kind, the samples it refused (older than its raw retention, in a dropped period, a bad
// time: errors wrapping tsdb.ErrExpired or a tablets sentinel) and those it failed to store
// (with the service's status). Refused samples make a 400 that counts them, after the rest
// is stored; samples not stored make the status of the service's answer (503 when it
// throttles: errors.Is tablets.ErrThrottled), and the sender retries the whole request.
//
// # Remote read
//
// The request is a snappy prometheus.ReadRequest. Each query's matchers become
// labels.Matchers and run through q.Querier(start, end).Select(ctx, true, hints, ...), the
// hints from the query's ReadHints (else its start and end). The answer is the first
// accepted response type the handler has (SAMPLES when none is listed; 400 if none is
// known): SAMPLES is one snappy prometheus.ReadResponse (Content-Type
// application/x-protobuf), at most SampleLimit samples (a histogram counting one), native
// histograms in TimeSeries.Histograms with their custom bounds (custom_values, which
// prompb.FromIntHistogram alone leaves out); STREAMED_XOR_CHUNKS is ContentTypeStreamed,
// frames of a uvarint length, the CRC-32 (Castagnoli, big-endian) of the data and the
// data, each a prometheus.ChunkedReadResponse holding one series' chunks (a series spans
// several frames beyond MaxBytesInFrame), series sorted by labels. The chunks are those
// Prometheus' own storage.NewSeriesToChunkEncoder cuts, byte for byte: XOR chunks of float
// samples, HISTOGRAM and FLOAT_HISTOGRAM chunks of integer and float histograms (encoded by
// Prometheus' chunkenc appenders, custom bounds in the chunk), a chunk a run of one kind,
// at most SamplesPerChunk samples, and a new histogram chunk wherever the appender starts
// one (a counter reset, a schema or custom bounds change). A histogram chunk keeps the
// counter reset hint of its first sample only, as in Prometheus. Series with no sample in
// the range are left out. An error after the first frame aborts the connection (http.ErrAbortHandler), so
// that a client never takes a cut stream for a complete answer.
//
// With ReadOptions.Limits, the tenant's max_series_per_select bounds the series of each query:
// over it, 400 naming the query. A streamed answer counts each query's series first (a
// labels-only Select), so that the refusal comes before the first frame.
//
// # Counters
//
// WriteHandler.Stats and ReadHandler.Stats return the counters (requests by status,
// samples, in flight) for the server's /metrics.
package remote
