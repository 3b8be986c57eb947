package tsdb

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/basic"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/tsdb/internal/tiers"
)

// The default tiers, their periods filled in as tsdb does.
var (
	minuteTier = Tier{Step: time.Minute, Period: 7 * 24 * time.Hour}
	hourTier   = Tier{Step: time.Hour, Period: 364 * 24 * time.Hour}
)

// chunkedDefault is the raw layout of chunked with its default options.
var chunkedDefault = rawLayout{bytesPerSample: chunkedBytesPerSample, chunkBytes: float64(16<<10) * 4 / 3, partition: 24 * time.Hour}

// testModel is the cost model of a database of raw layout raw and the default tiers.
func testModel(raw rawLayout) *costModel {
	return newCostModel(Options{RawPeriod: 24 * time.Hour, SealDelay: time.Hour, Tiers: []Tier{minuteTier, hourTier}}, raw, DefaultQueryBatchSize)
}

// The geometry the estimate assumes is the columnar blocks': a day of minutes, 14 days of
// hours (docs/format.md).
func TestColumnarSpan(t *testing.T) {
	day := 24 * time.Hour
	require.Equal(t, day, tiers.ColumnarSpan(minuteTier, day))
	require.Equal(t, 14*day, tiers.ColumnarSpan(hourTier, day))
	require.Equal(t, day, testModel(chunkedDefault).slice)
}

func TestSpans(t *testing.T) {
	day := 24 * time.Hour
	at := func(h int) time.Time { return time.Unix(0, 0).UTC().Add(time.Duration(h) * time.Hour) }
	require.Equal(t, 1, spans(at(0), at(24), day))
	require.Equal(t, 2, spans(at(0), at(25), day))
	require.Equal(t, 2, spans(at(23), at(25), day))
	require.Equal(t, 8, spans(at(1), at(7*24+1), day), "7 days not aligned touch 8 blocks")
	require.Equal(t, 1, spans(at(3), at(3), day))
	require.Equal(t, 1, spans(at(3), at(4), 0))
}

// A window of a single field costs a few bytes; every field adds its column.
func TestWindowBytes(t *testing.T) {
	last := windowBytes(FieldLast)
	require.Greater(t, last, windowBytes(FieldMin), "a last value has its time too")
	require.Equal(t, windowBytes(FieldMin), windowBytes(FieldMax))
	require.Less(t, last, 4.0)
	all := windowBytes(FieldSum | FieldMin | FieldMax | FieldFirst | FieldLast)
	require.Less(t, all, 12.0, "the non-sketch columns of a regular window: at most 12 bytes (issue 21)")
	require.Greater(t, all, 3*last)
}

// The estimates against the figures they stand for, and the choice they make.
func TestCostEstimates(t *testing.T) {
	day := 24 * time.Hour
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	end := now.Add(-2 * time.Hour).Truncate(time.Hour)
	smallChunks := rawLayout{bytesPerSample: chunkedBytesPerSample, chunkBytes: float64(1<<10) * 4 / 3, partition: day}
	advancedRows := rawLayout{bytesPerSample: advancedBytesPerSample}
	for _, c := range []struct {
		name      string
		raw       rawLayout
		series    int
		rng       time.Duration
		perSecond float64
		tier      Tier
		fields    Fields
		end       time.Time
		tierWins  bool
	}{
		// BenchmarkDashboard: 20 counters at 15 s over 7 days, the minute tier's last
		// values. Raw: 806,400 samples, about 1.2 MB.
		{"dashboard", chunkedDefault, 20, 7 * day, 1.0 / 15, minuteTier, FieldLast, end, true},
		// A chunk holds a day of a 15 s series, and is read whole, as a block is.
		{"an hour at 15 s", chunkedDefault, 20, time.Hour, 1.0 / 15, minuteTier, FieldLast, end, true},
		{"an hour at 15 s, chunks of 1 KiB", smallChunks, 20, time.Hour, 1.0 / 15, minuteTier, FieldLast, end, false},
		{"ten minutes at 15 s, advanced's rows", advancedRows, 20, 10 * time.Minute, 1.0 / 15, minuteTier, FieldLast, end, false},
		{"a day at 15 s, advanced's rows", advancedRows, 20, day, 1.0 / 15, minuteTier, FieldLast, end, true},
		{"sparse: a sample every 10 min", chunkedDefault, 20, 7 * day, 1.0 / 600, minuteTier, FieldLast, end, false},
		{"a sample a minute", chunkedDefault, 20, 7 * day, 1.0 / 60, minuteTier, FieldLast, end, false},
		{"a sample every 20 s", chunkedDefault, 20, 7 * day, 1.0 / 20, minuteTier, FieldLast, end, true},
		{"three hours at 1 s", chunkedDefault, 2, 3 * time.Hour, 1, minuteTier, FieldLast, end, true},
		{"a year of hours", chunkedDefault, 100, 364 * day, 1.0 / 15, hourTier, FieldMax, end, true},
		// Even a sample an hour: raw costs a series a chunk a day.
		{"a year of hours, a sample an hour", chunkedDefault, 100, 364 * day, 1.0 / 3600, hourTier, FieldMax, end, true},
		{"the last hour: not sealed yet", chunkedDefault, 20, time.Hour, 1, minuteTier, FieldLast, now, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := testModel(c.raw)
			from := c.end.Add(-c.rng)
			raw := m.rawBytes(c.series, from, c.end, c.perSecond)
			tier := m.tierBytes(c.series, c.tier, c.fields, from, c.end, m.servedBefore(now, now), c.perSecond)
			t.Logf("raw %.0f bytes, tier %.0f bytes", raw, tier)
			require.Equal(t, c.tierWins, tier < raw, "raw %.0f, tier %.0f", raw, tier)
		})
	}

	// The dashboard's figures: raw about 1.2 MB (as measured; the estimate counts the
	// chunks the range touches whole: 8 days), the tier about 400 KB.
	m := testModel(chunkedDefault)
	from := end.Add(-7 * day)
	raw := m.rawBytes(20, from, end, 1.0/15)
	require.InEpsilon(t, 1.2e6, raw, 0.25)
	require.InEpsilon(t, 4e5, m.tierBytes(20, minuteTier, FieldLast, from, end, now.Add(-time.Hour), 1.0/15), 0.25)
	// Aligned on days, 7 days of chunks.
	require.InEpsilon(t, 1.2e6, m.rawBytes(20, from.Truncate(day), end.Truncate(day), 1.0/15), 0.1)
	// Without chunks, the samples of the range.
	a := testModel(advancedRows)
	require.InDelta(t, 20*(3600/15*advancedBytesPerSample+rawEntityBytes)+requestBytes, a.rawBytes(20, end.Add(-time.Hour), end, 1.0/15), 1)

	// The tier serves the windows rolled up and sealed; Aggregate reads the others raw.
	require.Equal(t, now.Add(-time.Hour), m.servedBefore(now, now))
	require.Equal(t, now.Add(-3*time.Hour), m.servedBefore(now, now.Add(-3*time.Hour)))
	require.Equal(t, time.Time{}, m.servedBefore(now, time.Time{}), "never rolled up")
	require.Equal(t, m.rawBytes(20, from, end, 1.0/15), m.tierBytes(20, minuteTier, FieldLast, from, end, time.Time{}, 1.0/15),
		"never rolled up: the tier costs what raw does")
	half := m.tierBytes(20, minuteTier, FieldLast, from, end, from.Add(84*time.Hour), 1.0/15)
	require.Greater(t, half, m.tierBytes(20, minuteTier, FieldLast, from, end, end, 1.0/15))
	require.Less(t, half, raw)

	// Windows newer than the seal delay are read raw: a range all in it costs what raw does.
	require.Equal(t, m.rawBytes(3, now.Add(-30*time.Minute), now, 1), m.tierBytes(3, minuteTier, FieldLast, now.Add(-30*time.Minute), now, now.Add(-time.Hour), 1))
	// Nothing to read costs nothing.
	require.Zero(t, m.rawBytes(0, from, end, 1))
	require.Zero(t, m.tierBytes(0, minuteTier, FieldLast, from, end, now.Add(-time.Hour), 1))
	require.Zero(t, m.tierBytes(5, minuteTier, FieldLast, end, end, now.Add(-time.Hour), 1))
}

// The estimate of the sample rate starts at a sample every 15 s and follows what reads
// return, the latest weighing most.
func TestRateEstimate(t *testing.T) {
	r := newRateEstimate()
	require.InDelta(t, defaultSamplesPerSecond, r.perSecond(), 1e-12)
	// A read of 10 series over an hour at a sample a second.
	r.observe(36000, 36000)
	require.InDelta(t, 1, r.perSecond(), 0.01)
	// Reads of sparse series: a sample every 10 minutes, the estimate follows.
	for range 20 {
		r.observe(60, 36000)
	}
	require.InDelta(t, 1.0/600, r.perSecond(), 1e-4)
	// Nothing to learn from reads of no time.
	before := r.perSecond()
	r.observe(5, 0)
	r.observe(-1, 10)
	require.Equal(t, before, r.perSecond())
}

// The estimate knows the raw layout of the database: chunked's chunks, read whole, and
// the bytes of a sample.
func TestLayoutOf(t *testing.T) {
	for _, c := range []struct {
		layout func(*aztables.Client) (tablets.Store, error)
		want   rawLayout
	}{
		{nil, chunkedDefault},
		{func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }, chunkedDefault},
		{func(c *aztables.Client) (tablets.Store, error) {
			return chunked.New(c, &chunked.Options{MaxChunkBytes: 3 << 10, PartitionFactor: time.Hour})
		}, rawLayout{bytesPerSample: chunkedBytesPerSample, chunkBytes: 4 << 10, partition: time.Hour}},
		{func(c *aztables.Client) (tablets.Store, error) { return advanced.New(c, nil) }, rawLayout{bytesPerSample: advancedBytesPerSample}},
		{func(c *aztables.Client) (tablets.Store, error) { return basic.New(c, nil) }, rawLayout{bytesPerSample: basicBytesPerSample}},
		{func(c *aztables.Client) (tablets.Store, error) { return nil, tablets.ErrInvalidOptions }, chunkedDefault},
	} {
		require.Equal(t, c.want, layoutOf(c.layout))
	}
}

// A Select read by ranges of keys is cut in units of as many batches as keep about half a
// page of chunks and 512k samples: an hour or six hours of a series scraped every 15 s
// (a chunk or two each), several batches; seven days (a chunk a day, 40,320 samples), one;
// a series written every millisecond (its chunks full within minutes), one.
func TestKeyRangeBatch(t *testing.T) {
	m := testModel(chunkedDefault)
	noon := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	scrape := 1.0 / 15
	for _, c := range []struct {
		name      string
		from, to  time.Time
		perSecond float64
		want      int
	}{
		{"an hour", noon.Add(-time.Hour), noon, scrape, 7 * 64},                                   // a chunk a series: 500/64
		{"across midnight", noon.Add(-13 * time.Hour), noon.Add(-11 * time.Hour), scrape, 3 * 64}, // two: 500/128
		{"six hours", noon.Add(-6 * time.Hour), noon, scrape, 5 * 64},                             // 1,440 samples a series: 524,288/(64×1,440)
		{"seven days", noon.Add(-7 * 24 * time.Hour), noon, scrape, 64},
		{"a minute", noon.Add(-time.Minute), noon, scrape, 7 * 64},
		{"every millisecond for an hour", noon.Add(-time.Hour), noon, 1000, 64},
		{"nothing known of the rate", noon.Add(-time.Hour), noon, 0, 7 * 64},
	} {
		if got := m.keyRangeBatch(c.from, c.to, c.perSecond); got != c.want {
			t.Errorf("%s: %d series a unit, want %d", c.name, got, c.want)
		}
	}
	if got := testModel(rawLayout{bytesPerSample: advancedBytesPerSample}).keyRangeBatch(noon.Add(-time.Hour), noon, scrape); got != 64 {
		t.Errorf("advanced's tables (read by the series' own filters): %d series a unit, want 64", got)
	}
	small := newCostModel(Options{RawPeriod: 24 * time.Hour}, chunkedDefault, 16)
	if got := small.keyRangeBatch(noon.Add(-time.Hour), noon, scrape); got != 8*16 {
		t.Errorf("batches of 16: %d series a unit, want %d (keyRangeMaxBatches)", got, 8*16)
	}
}
