package tiers

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/rounding"
)

// The fields asked for select the columns read; unknown fields are refused; the fields not
// asked for are zero in every window.
func TestAggregateFields(t *testing.T) {
	for _, c := range []struct {
		opts *AggregateOptions
		want Fields
		cols blockenc.Columns
	}{
		{nil, AllFields, blockenc.AllColumns},
		{&AggregateOptions{}, AllFields, blockenc.AllColumns},
		{&AggregateOptions{Fields: FieldLast}, FieldLast, blockenc.ColCount | blockenc.ColLast},
		{&AggregateOptions{Fields: FieldSum | FieldFirst}, FieldSum | FieldFirst, blockenc.ColCount | blockenc.ColSum | blockenc.ColFirst},
		{&AggregateOptions{Fields: FieldQuantiles}, FieldQuantiles | FieldMin | FieldMax,
			blockenc.ColCount | blockenc.ColMin | blockenc.ColMax | blockenc.ColSketch},
		{&AggregateOptions{Fields: FieldHistograms}, FieldHistograms, blockenc.ColCount | blockenc.ColHistogram},
	} {
		f, err := c.opts.fields()
		require.NoError(t, err)
		require.Equal(t, c.want, f)
		require.Equal(t, c.cols, f.columns(), "fields %#x", uint16(f))
	}
	_, err := (&AggregateOptions{Fields: 1 << 9}).fields()
	require.True(t, errors.Is(err, tablets.ErrInvalidOptions), "%v", err)

	start := time.Unix(600, 0).UTC()
	w := newWindow(start, 0)
	w.add(start.Add(time.Second), 3)
	w.add(start.Add(2*time.Second), 5)
	kept := *w
	(FieldLast).keep(&kept)
	require.Equal(t, Window{Start: start, Count: 2, Last: 5, lastT: start.Add(2 * time.Second)}, kept)
	require.True(t, math.IsNaN(kept.Quantile(0.5)), "no quantiles without FieldQuantiles")
	kept = *w
	(FieldQuantiles | FieldMin | FieldMax).keep(&kept)
	require.Equal(t, 3.0, kept.Min)
	require.InDelta(t, 3.0, kept.Quantile(0), 0.03)
	require.Zero(t, kept.Sum)
}

// A window is trusted where the block it is taken from is sealed there and no flag covers
// it; a columnar block's windows replace a row block's of the same time.
func TestCover(t *testing.T) {
	first := time.Unix(86400, 0).UTC()
	row := &tierBlock{start: 86400 - 1440, step: time.Minute, version: 1, windows: make([]*Window, 24), sealed: make([]bool, 24)}
	for i := range row.sealed {
		row.sealed[i] = true
	}
	row.sealed[0] = false // before the read: ignored
	row.windows[23] = &Window{Count: 1}
	flag := &tierBlock{start: 86400 + 1440*2, step: time.Minute, version: 0, windows: make([]*Window, 24), sealed: make([]bool, 24)}
	col := &tierBlock{start: 86400, step: time.Minute, version: blockenc.VersionColumnar, windows: make([]*Window, 1440), sealed: make([]bool, 1440)}
	for i := range col.sealed {
		col.sealed[i] = i != 5
	}
	col.windows[0] = &Window{Count: 7}
	c := newCover(100)
	for _, b := range []*tierBlock{row, flag, col} {
		c.add(b, first)
	}
	require.True(t, c.held[0] && !c.distrust[0])
	require.Equal(t, uint64(7), c.windows[0].Count)
	require.True(t, c.held[5] && c.distrust[5], "not sealed")
	for i := 48; i < 72; i++ {
		require.True(t, c.held[i] && c.flagged[i], "flagged: window %d", i)
	}
	require.True(t, c.held[99] && !c.distrust[99])
}

// Tails (docs/format.md): laid after their block (rolled up later, or as late but starting
// later), a tail's sealed windows replace the block's, unsealed or not; its unsealed ones
// (those before its own, of a tail written at the span's start) replace none that is sealed.
func TestCoverTails(t *testing.T) {
	first := time.Unix(86400, 0).UTC()
	mk := func(start uint64, rolled float64, n int, count uint64, sealed func(i int) bool) *tierBlock {
		b := &tierBlock{start: start, step: time.Minute, version: blockenc.VersionColumnar, rolled: rolled, exact: true,
			windows: make([]*Window, n), sealed: make([]bool, n)}
		for i := range n {
			b.windows[i] = &Window{Count: count}
			b.sealed[i] = sealed(i)
		}
		return b
	}
	block := mk(86400, 100, 1440, 1, func(i int) bool { return i < 60 })          // sealed up to 01:00
	tail := mk(86400+60*60, 200, 15, 2, func(int) bool { return true })           // 01:00 to 01:15
	sameSecond := mk(86400+75*60, 200, 15, 3, func(i int) bool { return i < 10 }) // 01:15 to 01:30
	placeholders := mk(86400, 300, 120, 4, func(i int) bool { return i >= 90 })   // sealed from 01:30
	for _, order := range [][]*tierBlock{{block, tail, sameSecond, placeholders}, {placeholders, sameSecond, block, tail}} {
		c := newCover(1440)
		for _, b := range laid(order) {
			c.add(b, first)
		}
		for i, want := range map[int]uint64{0: 1, 59: 1, 60: 2, 74: 2, 75: 3, 84: 3, 85: 4, 89: 4, 90: 4, 119: 4, 120: 1} {
			require.Equal(t, want, c.windows[i].Count, "window %d", i)
		}
		for i, want := range map[int]bool{0: true, 60: true, 84: true, 85: false, 90: true, 119: true, 120: false} {
			require.Equal(t, want, !c.distrust[i], "window %d trusted", i)
		}
	}
}

func TestAppendRange(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 0) }
	var got [][2]time.Time
	for _, r := range [][2]time.Time{{at(0), at(0)}, {at(0), at(10)}, {at(10), at(20)}, {at(5), at(15)}, {at(30), at(40)}, {at(40), at(40)}, {at(45), at(50)}} {
		got = appendRange(got, r)
	}
	require.Equal(t, [][2]time.Time{{at(0), at(20)}, {at(30), at(40)}, {at(45), at(50)}}, got)

	// A plan of 10,080 minute windows read raw (7 days before any rollup) holds one range.
	got = nil
	for i := range int64(10080) {
		got = appendRange(got, [2]time.Time{at(60 * i), at(60 * (i + 1))})
	}
	require.Equal(t, [][2]time.Time{{at(0), at(60 * 10080)}}, got)
	require.Equal(t, 1, cap(got))
}

// seriesWindows gives the same windows whether it holds them in slots or by start: raw
// points and tier windows (borrowed, then merged into), oldest first; what falls outside
// its range is left out; and a range of thousands of years (Sub saturates) is held by
// start.
func TestSeriesWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	from := time.Date(2024, 5, 1, 0, 0, 30, 0, time.UTC)
	to := from.Add(6 * time.Hour)
	step := 5 * time.Minute
	slots := newSeriesWindows(from, to, step, 0)
	require.NotNil(t, slots.slots)
	byStart := newSeriesWindows(from, to, step, 0)
	byStart.slots, byStart.owned = nil, nil
	byStart.byStart, byStart.sOwned = map[time.Time]*Window{}, map[time.Time]bool{}
	var tierWins []*Window
	for i := range 40 { // minute windows, some where raw points fall too
		ws := rounding.Floor(from, time.Minute).Add(time.Duration(rng.IntN(360)) * time.Minute)
		w := newWindow(ws, 0)
		w.add(ws.Add(time.Duration(i)*time.Millisecond+time.Second), float64(i))
		w.add(ws.Add(30*time.Second), float64(i+1))
		tierWins = append(tierWins, w)
	}
	var points []time.Time
	for range 300 {
		points = append(points, from.Add(time.Duration(rng.Int64N(int64(to.Sub(from))))))
	}
	points = append(points, from.Add(-time.Hour), to.Add(step), to.Add(time.Hour)) // in windows that start at or after to, or before from's: left out
	for _, a := range []*seriesWindows{slots, byStart} {
		for _, w := range tierWins {
			c := *w
			require.NoError(t, a.mergeTier(&c))
		}
		for i, p := range points {
			a.add(p, float64(i))
		}
	}
	got, want := finish(slots, AllFields), finish(byStart, AllFields)
	require.Equal(t, len(want), len(got))
	total := uint64(0)
	for i := range want {
		require.Equal(t, want[i].Start, got[i].Start)
		require.Equal(t, want[i].Count, got[i].Count)
		require.Equal(t, want[i].Sum, got[i].Sum)
		require.Equal(t, want[i].First, got[i].First)
		require.Equal(t, want[i].Last, got[i].Last)
		if i > 0 {
			require.True(t, got[i-1].Start.Before(got[i].Start), "oldest first")
		}
		total += got[i].Count
	}
	require.Equal(t, uint64(300+2*40), total, "every point in the range, none outside")

	// 1970 to 9999, by the minute or by the century: by start (the span is past what a
	// Duration holds).
	long := newSeriesWindows(tablets.MinTime, tablets.MaxTime, time.Minute, 0)
	require.Nil(t, long.slots)
	long.add(tablets.MaxTime.Add(-time.Hour), 1)
	long.add(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), 2)
	long.add(tablets.MinTime, 3)
	ws := finish(long, AllFields)
	require.Len(t, ws, 3)
	require.Equal(t, []float64{3, 2, 1}, []float64{ws[0].Sum, ws[1].Sum, ws[2].Sum})
	century := 100 * 365 * 24 * time.Hour
	coarse := newSeriesWindows(tablets.MinTime, tablets.MaxTime, century, 0)
	require.Nil(t, coarse.slots)
	coarse.add(tablets.MaxTime.Add(-time.Hour), 1)
	coarse.add(tablets.MinTime, 3)
	ws = finish(coarse, AllFields)
	require.Len(t, ws, 2)
	require.Equal(t, rounding.Floor(tablets.MaxTime.Add(-time.Hour), century), ws[1].Start)
	// Two centuries by the decade: slots.
	decade := 10 * 365 * 24 * time.Hour
	coarse = newSeriesWindows(tablets.MinTime, tablets.MinTime.Add(2*century), decade, 0)
	require.Len(t, coarse.slots, 20)
	coarse.add(tablets.MinTime.Add(2*century-time.Hour), 1)
	coarse.add(tablets.MinTime.Add(2*century), 2) // at to: left out
	ws = finish(coarse, AllFields)
	require.Len(t, ws, 1)
	require.Equal(t, tablets.MinTime.Add(19*decade), ws[0].Start)
}
