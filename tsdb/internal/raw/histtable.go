package raw

import (
	"context"
	"fmt"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/chunks"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/priority"
	"github.com/seed71701133/tablets/rounding"
)

// A histogram table (name + "h" + period) holds a period's histogram samples as the chunked
// layout holds points, at a millisecond whatever the raw layout (docs/format.md, "Histogram
// tables"): an entity per chunk of a series' samples, in a partition per series and day,
// its last millisecond in L and the chunk (internal/histenc) in H. Package chunks keys,
// writes, reads, compacts and deletes them, as it does chunked's.
const (
	histResolution = time.Millisecond
	histPartition  = 24 * time.Hour
	// histMaxChunk bounds a chunk's bytes before base64: 100 of them (a transaction) stay
	// under Azure's 4 MiB, and one under its 64 KiB a property.
	histMaxChunk = 16 << 10
	// histConcurrency is how many requests an operation on a histogram table has in flight.
	histConcurrency = 8
)

// HistFormat is the time key of histogram tables: milliseconds, 15 digits.
var HistFormat = func() rounding.KeyFormat {
	f, err := rounding.NewKeyFormat(histResolution)
	if err != nil {
		panic(err) // a constant resolution: never
	}
	return f
}()

// HistLayout is the keys and codec of the histogram tables.
var HistLayout = chunks.Layout[histenc.Sample]{
	Name:      "histograms",
	Format:    HistFormat,
	PartUnits: uint64(histPartition / histResolution),
	MaxChunk:  histMaxChunk,
	Limits:    filter.Limits{MaxComparisons: entity.MaxFilterComparisons, MaxLength: filter.DefaultMaxLength},
	Codec:     chunks.Histograms{},
}

// ValidateHistSeries checks a series name for the keys and filters of histogram tables.
func ValidateHistSeries(series string) error { return HistLayout.ValidateSeries(series) }

// histUnits returns [from, to) in milliseconds: a millisecond is in the range iff its time is.
func histUnits(from, to time.Time) (uint64, uint64) {
	ceil := func(t time.Time) uint64 {
		u, err := HistFormat.Units(t)
		if err != nil {
			return HistFormat.Last + 1
		}
		if HistFormat.Time(u).Before(t) {
			u++
		}
		return u
	}
	return ceil(from), ceil(to)
}

// PointOf is a stored sample as the API returns it.
func PointOf(s histenc.Sample) tablets.HistogramPoint {
	return tablets.HistogramPoint{Time: HistFormat.Time(s.Unit), H: s.H, FH: s.FH}
}

// HistPoints are stored samples as the API returns them.
func HistPoints(samples []histenc.Sample) []tablets.HistogramPoint {
	out := make([]tablets.HistogramPoint, len(samples))
	for i, s := range samples {
		out[i] = PointOf(s)
	}
	return out
}

// histTable is a period's histogram table (the histogram kind's table of the raw part).
type histTable struct{ chunks.Table[histenc.Sample] }

// histTableOf is the table of client.
func histTableOf(client engine.Client) histTable {
	return histTable{chunks.Table[histenc.Sample]{Client: client, Layout: HistLayout, Concurrency: histConcurrency}}
}

// spilling is ctx: a histogram table is read by its series' own clauses.
func (t histTable) spilling(ctx context.Context, _ func(string) bool, _ func(string, []tablets.HistogramPoint)) context.Context {
	return ctx
}

// queryMany reads the series' clauses packed into filters of at most Azure's 15
// comparisons (about five series a request for a range inside one day, two or three across
// days).
func (t histTable) queryMany(ctx context.Context, series []string, from, to time.Time, emit func(string, tablets.HistogramPoint) bool) error {
	lo, hi := histUnits(from, to)
	if lo >= hi || len(series) == 0 {
		return nil
	}
	err := t.ReadMany(ctx, series, lo, hi, func(i int, _ uint64, s histenc.Sample) bool { return emit(series[i], PointOf(s)) })
	if err != nil {
		return fmt.Errorf("histograms: %w", err)
	}
	return nil
}

// write stores samples at their millisecond (a time truncates to it): chunks cut by
// partition and size, a transaction per partition and 100 chunks, each holding samples of
// one series. Every argument whose millisecond went in a failed transaction may not be
// stored (superseded duplicates included).
func (t histTable) write(ctx context.Context, series string, hs []tablets.HistogramPoint, prio uint64) ([]int, error) {
	units := make([]uint64, len(hs))
	for i, h := range hs {
		u, err := HistFormat.Units(h.Time)
		if err != nil {
			return allIndexes(len(hs)), err
		}
		units[i] = u
	}
	kept := batch.LastWins(units)
	sorted := make([]histenc.Sample, len(kept))
	sortedUnits := make([]uint64, len(kept))
	for j, i := range kept {
		sorted[j] = histenc.Sample{Unit: units[i], H: hs[i].H, FH: hs[i].FH}
		sortedUnits[j] = units[i]
	}
	if prio == 0 {
		prio = priority.Next()
	}
	errs, first := t.Write(ctx, series, sortedUnits, sorted, prio)
	if first == nil {
		return nil, nil
	}
	lost := map[uint64]bool{}
	for j, err := range errs {
		if err != nil {
			lost[sortedUnits[j]] = true
		}
	}
	var failed []int
	for i, u := range units {
		if lost[u] {
			failed = append(failed, i)
		}
	}
	return failed, fmt.Errorf("tsdb: histograms: %w", first)
}

func (t histTable) delete(ctx context.Context, series string, from, to time.Time) error {
	lo, hi := histUnits(from, to)
	if err := t.Delete(ctx, series, lo, hi); err != nil {
		return fmt.Errorf("histograms: delete %q: %w", series, err)
	}
	return nil
}

func (t histTable) compact(ctx context.Context, from, to, growing time.Time) (int, error) {
	lo, hi := histUnits(from, to)
	g, err := HistFormat.Units(growing)
	if err != nil {
		return 0, fmt.Errorf("histograms: compact: %w", err)
	}
	did, err := t.CompactAll(ctx, lo, hi, g)
	return did.Headroom, err
}
