package tsdb

import (
	"math"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/basic"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/tsdb/internal/tiers"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// The cost estimate of a Select (docs/tiers.md): the bytes of reply each path would read
// from the account, counting a request as requestBytes more. Figures measured on Azurite
// with the limit Checker's counter (docs/tiers.md has the measurements).
const (
	// requestBytes is what a request costs beyond its entities, in bytes: its reply's
	// envelope and headers, and its round trip.
	requestBytes = 1000
	// tierEntityBytes is what a block's entity costs beyond its columns: keys, ETag,
	// Timestamp, property names and annotations.
	tierEntityBytes = 200
	// tierSeriesPerRequest is how many series' blocks a read of a tier packs in a request:
	// a filter has at most 15 comparisons, two of them the RowKey range.
	tierSeriesPerRequest = 13
	// rawEntityBytes is what a raw entity costs beyond its samples: keys, ETag, Timestamp,
	// property names (a chunk of the chunked layout, or a series' rows of a raw period).
	rawEntityBytes = 300
	// defaultSamplesPerSecond is the sample rate a Queryable assumes of a series until its
	// reads tell it better: a scrape every 15 s.
	defaultSamplesPerSecond = 1.0 / 15
)

// Bytes per sample of the raw layouts, in a reply, measured on counters scraped every 15 s
// (TestRawBytesPerSampleMeasured, BenchmarkDashboard).
const (
	// chunkedBytesPerSample: chunked's chunks in base64, an entity's keys aside
	// (BenchmarkDashboard: 1.2 MB for 806,400 samples).
	chunkedBytesPerSample = 1.5
	// advancedBytesPerSample: advanced's slots, a name and a JSON number with its type
	// annotation (an integral value has one; a fractional value, about 12 bytes, has not).
	advancedBytesPerSample = 27
	// basicBytesPerSample: basic's entity per point: keys, ETag, Timestamp and the value.
	basicBytesPerSample = 150
)

// Bytes per window of a columnar block's columns on the wire, measured by blockenc's size
// test on a day of minutes of a regular counter or gauge (a noisy gauge's values cost about
// 9.5 bytes, as its raw samples cost more too).
const (
	// windowBaseBytes: the columns every read selects (the count, the sealed bitmap).
	windowBaseBytes = 0.5
	// windowValueBytes: a column of values (sum, min, max; the values of first or last).
	windowValueBytes = 1.4
	// windowTimeBytes: the times of first or last, in their column.
	windowTimeBytes = 0.1
	// windowExactBytes: the exactness column (NaN counts and resets: mostly zeros).
	windowExactBytes = 0.3
)

// windowBytes is the estimated bytes a window costs in a read of fields from a columnar
// block.
func windowBytes(f Fields) float64 {
	b := windowBaseBytes
	for _, v := range []Fields{FieldSum, FieldMin, FieldMax} {
		if f&v != 0 {
			b += windowValueBytes
		}
	}
	for _, v := range []Fields{FieldFirst, FieldLast} {
		if f&v != 0 {
			b += windowValueBytes + windowTimeBytes
		}
	}
	if f&FieldExact != 0 {
		b += windowExactBytes
	}
	return b
}

// rawLayout is what the estimate knows of the raw layout of a database's tables.
type rawLayout struct {
	bytesPerSample float64 // on the wire, in a reply
	// Of the chunked layout: a chunk is read whole, and holds at most chunkBytes (on the
	// wire) of a partition's points. 0: no such granularity (a raw period's rows instead).
	chunkBytes float64
	partition  time.Duration
}

// layoutOf is the raw layout the Layout of a database's options makes, known by the type
// of its store (chunked's, with its options, for a layout of another package).
func layoutOf(layout func(*aztables.Client) (tablets.Store, error)) rawLayout {
	def := rawLayout{bytesPerSample: chunkedBytesPerSample, chunkBytes: float64(chunked.DefaultMaxChunkBytes) * 4 / 3, partition: chunked.DefaultPartitionFactor}
	offline, err := aztables.NewClientWithNoCredential("https://account.invalid/querycost", nil)
	if err != nil || layout == nil {
		return def
	}
	s, err := layout(offline)
	if err != nil {
		return def
	}
	switch s := s.(type) {
	case *advanced.Store:
		return rawLayout{bytesPerSample: advancedBytesPerSample}
	case *basic.Store:
		return rawLayout{bytesPerSample: basicBytesPerSample}
	case *chunked.Store:
		o := s.Options()
		return rawLayout{bytesPerSample: chunkedBytesPerSample, chunkBytes: float64(o.MaxChunkBytes) * 4 / 3, partition: o.PartitionFactor}
	}
	return def
}

// estimate is the cost of a Select's two paths, in bytes.
type estimate struct {
	raw, tier float64
}

// costModel estimates the bytes of a Select's paths.
type costModel struct {
	raw       rawLayout
	batch     int           // raw series per request (QueryOptions.BatchSize)
	rawPeriod time.Duration // span of a raw table
	sealDelay time.Duration // windows newer than this are read raw
	slice     time.Duration // span of Rollup's slice: 24 windows of the coarsest tier
	rate      *rateEstimate
}

func newCostModel(o Options, raw rawLayout, batch int) *costModel {
	m := &costModel{raw: raw, batch: batch, rawPeriod: o.RawPeriod, sealDelay: o.SealDelay, rate: newRateEstimate()}
	m.slice = tiers.SliceOf(o.Tiers)
	return m
}

// rawBytes estimates a raw read of series over [from, to): their samples, an entity's keys
// per series and raw period, a request per batch of series and raw period. Chunked's chunks
// are read whole: a compacted chunk holds a partition's points (a day), or as many as fill
// it, and the estimate counts every chunk the range touches whole, as if cut at even times
// from the partition's start.
func (m *costModel) rawBytes(series int, from, to time.Time, perSecond float64) float64 {
	if series == 0 || !from.Before(to) {
		return 0
	}
	periods := spans(from, to, m.rawPeriod)
	requests := math.Ceil(float64(series)/float64(m.batch)) * float64(periods)
	bytes, entities := m.rawSeriesRead(from, to, perSecond)
	return float64(series)*(bytes+entities*rawEntityBytes) + requests*requestBytes
}

// rawSeriesRead estimates what a raw read of one series over [from, to) reads: its
// samples' bytes and its entities (a raw period's row, or the chunks the range touches,
// read whole).
func (m *costModel) rawSeriesRead(from, to time.Time, perSecond float64) (bytes, entities float64) {
	perSeriesSecond := perSecond * m.raw.bytesPerSample
	bytes, entities = to.Sub(from).Seconds()*perSeriesSecond, float64(spans(from, to, m.rawPeriod))
	if m.raw.chunkBytes > 0 && perSeriesSecond > 0 {
		span := m.raw.partition
		if full := time.Duration(m.raw.chunkBytes / perSeriesSecond * float64(time.Second)); full < span {
			span = max(full, time.Second)
		}
		n := float64(spans(from, to, span))
		bytes, entities = n*span.Seconds()*perSeriesSecond, n
	}
	return bytes, entities
}

const (
	// keyRangeChunks is how many chunks a unit read by a range of keys is cut to hold, by
	// the estimate: half a page of the service's (1,000 entities), the other half for
	// the chunks of the folds not compacted yet, which the estimate does not count.
	keyRangeChunks = 500
	// keyRangeSamples bounds the samples of such a unit (8 MB of them decoded plain).
	keyRangeSamples = 1 << 19
	// keyRangeMaxBatches bounds its series, in batches (QueryOptions.BatchSize).
	keyRangeMaxBatches = 8
)

// keyRangeBatch is how many series a unit of a Select read by ranges of keys holds
// (rawPlan): as many batches (m.batch series) as keep its chunks within keyRangeChunks and
// its samples within keyRangeSamples, by the estimate, at most keyRangeMaxBatches and at
// least one. Each such unit is a query whatever its series, and each query costs a
// transaction (and, on Azurite, a scan of the table): an hour of 1,200 series read 64
// series a unit was 19 queries of a few hundred chunks each. Only chunked's tables are
// read by ranges of keys: other layouts' units stay one batch.
func (m *costModel) keyRangeBatch(from, to time.Time, perSecond float64) int {
	if m.raw.chunkBytes == 0 {
		return m.batch
	}
	_, chunks := m.rawSeriesRead(from, to, perSecond)
	samples := to.Sub(from).Seconds() * perSecond
	k := keyRangeMaxBatches
	if byChunks := keyRangeChunks / (float64(m.batch) * max(chunks, 1)); byChunks < float64(k) {
		k = int(byChunks)
	}
	if samples > 0 {
		if bySamples := keyRangeSamples / (float64(m.batch) * samples); bySamples < float64(k) {
			k = int(bySamples)
		}
	}
	return m.batch * max(k, 1)
}

// tierBytes estimates a read of fields of tier t's whole windows in [from, to) for series:
// the whole blocks holding them (a read selects columns, and a column holds a block's
// every window; a value column, those with points), a request per tierSeriesPerRequest
// series and tier table; and the raw read of the windows from served on (see
// servedBefore), which Aggregate reads raw.
func (m *costModel) tierBytes(series int, t Tier, fields Fields, from, to, served time.Time, perSecond float64) float64 {
	if series == 0 || !from.Before(to) {
		return 0
	}
	served = served.Truncate(t.Step)
	rawPart := 0.0
	if to.After(served) {
		rawPart = m.rawBytes(series, times.Later(from, served), to, perSecond)
		to = times.Later(from, served)
	}
	if !from.Before(to) {
		return rawPart
	}
	span := tiers.ColumnarSpan(t, m.slice)
	blocks := spans(from, to, span)
	// The value columns hold the windows with points only: of a sparse series, some.
	filled := min(1, perSecond*t.Step.Seconds())
	perBlock := tierEntityBytes + float64(span/t.Step)*(windowBaseBytes+filled*(windowBytes(fields)-windowBaseBytes))
	requests := math.Ceil(float64(series)/tierSeriesPerRequest) * float64(spans(from, to, t.Period))
	return float64(series*blocks)*perBlock + requests*requestBytes + rawPart
}

// servedBefore is the time before which the tiers' windows are read from their blocks:
// those rolled up (before rolledUp, the catalog's rollup progress; the zero time if none)
// and sealed (SealDelay before now). Aggregate reads the later ones raw.
func (m *costModel) servedBefore(now, rolledUp time.Time) time.Time {
	sealed := now.Add(-m.sealDelay)
	if rolledUp.Before(sealed) {
		return rolledUp
	}
	return sealed
}

// spans is how many epoch-aligned spans of d [from, to) touches (1 for d <= 0).
func spans(from, to time.Time, d time.Duration) int {
	if d <= 0 || !from.Before(to) {
		return 1
	}
	first := from.UnixNano() / int64(d)
	last := (to.UnixNano() - 1) / int64(d)
	return int(last-first) + 1
}

// rateEstimate is a Queryable's moving estimate of the float samples a series has a
// second: the samples its reads returned over the series-seconds they covered, older reads
// weighing less and less (halved at each read), starting at defaultSamplesPerSecond as
// if a series had been read for a minute.
type rateEstimate struct {
	mu               sync.Mutex
	samples, seconds float64
}

// rateHalving is how much a read's weight is kept at each later read.
const rateHalving = 0.5

func newRateEstimate() *rateEstimate {
	return &rateEstimate{samples: 60 * defaultSamplesPerSecond, seconds: 60}
}

// observe adds a read of series-seconds that returned samples.
func (r *rateEstimate) observe(samples, seriesSeconds float64) {
	if seriesSeconds <= 0 || samples < 0 || math.IsInf(seriesSeconds, 0) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = r.samples*rateHalving + samples
	r.seconds = r.seconds*rateHalving + seriesSeconds
}

// perSecond is the current estimate.
func (r *rateEstimate) perSecond() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.samples / r.seconds
}
