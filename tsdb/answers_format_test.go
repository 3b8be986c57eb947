package tsdb

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/tsdb/internal/answers"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
)

// docAnswer is the worked example of docs/format.md, "Kept answers": two steps a minute
// apart of one series, its mark over two raw periods.
func docAnswer() KeptAnswer {
	return KeptAnswer{
		First: 1716422400000, Last: 1716422460000, LastSettled: 1716422460000,
		Mark: ReadMark{from: time.Unix(1716422100, 0), to: time.Unix(1716422460, 1000000), sum: sha256.Sum256(nil),
			periods: map[uint64]changelog.State{1716422400: changelog.StateOfGen(3), 1715817600: changelog.StateOfGen(12)}},
		Series: []AnswerSeries{{Labels: labels.FromStrings("job", "api"), Times: []int64{1716422400000, 1716422460000}, Values: []float64{2.5, 3}}},
	}
}

// The worked examples of docs/format.md are what appendAnswer and answers.Body write, and
// decode back to what was encoded.
func TestAnswerFormatDoc(t *testing.T) {
	want := formatdoc.Hex(t, "kept-answer")
	got, err := appendAnswer(nil, docAnswer())
	require.NoError(t, err)
	require.Equal(t, want, got, "appendAnswer = %x", got)
	back, err := decodeAnswer(want, DefaultRawPeriod)
	require.NoError(t, err)
	requireSameAnswer(t, docAnswer(), back)

	body, err := answers.Body("range v1 devel step 60000 phase 0 lookback 300000 subquery 60000: sum(rate(m[5m]))", got)
	require.NoError(t, err)
	require.JSONEq(t, string(formatdoc.JSON(t, "kept-answer-entity")), string(body))
}

// requireSameAnswer fails t unless got is want as a reader of the encoding sees it: the
// marks' ranges, sums and generations, the steps and the series, values bit for bit.
func requireSameAnswer(t *testing.T, want, got KeptAnswer) {
	t.Helper()
	require.Equal(t, [3]int64{want.First, want.Last, want.LastSettled}, [3]int64{got.First, got.Last, got.LastSettled})
	sameMark := func(w, g ReadMark) {
		t.Helper()
		require.True(t, w.from.Equal(g.from) && w.to.Equal(g.to), "range %v..%v, want %v..%v", g.from, g.to, w.from, w.to)
		require.Equal(t, w.sum, g.sum)
		require.Len(t, g.periods, len(w.periods))
		for p, st := range w.periods {
			require.Equal(t, st.Gen(), g.periods[p].Gen(), "period %d", p)
		}
		require.False(t, g.taken || g.unknown)
	}
	sameMark(want.Mark, got.Mark)
	require.Equal(t, want.HasSettled, got.HasSettled)
	if want.HasSettled {
		sameMark(want.Settled, got.Settled)
	}
	require.Len(t, got.Series, len(want.Series))
	for i, s := range want.Series {
		g := got.Series[i]
		require.Equal(t, len(s.Labels), len(g.Labels))
		if len(s.Labels) > 0 {
			require.Equal(t, s.Labels, g.Labels)
		}
		require.Equal(t, s.Times, g.Times)
		require.Len(t, g.Values, len(s.Values))
		for j, v := range s.Values {
			require.Equal(t, math.Float64bits(v), math.Float64bits(g.Values[j]), "series %d value %d", i, j)
		}
	}
}

// An answer round-trips whatever it holds: a settled mark, a series without labels,
// NaN, infinities and a negative zero, tablets.MaxTime's nanoseconds in a mark, no
// series at all.
func TestAnswerRoundTrip(t *testing.T) {
	a := docAnswer()
	a.LastSettled = a.First
	a.HasSettled = true
	a.Settled = ReadMark{from: time.Unix(0, 0), to: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), sum: sha256.Sum256([]byte("x")),
		periods: map[uint64]changelog.State{}}
	a.Series = append(a.Series,
		AnswerSeries{Times: []int64{a.First}, Values: []float64{math.NaN()}},
		AnswerSeries{Labels: labels.FromStrings("a", "é", "b", "x y"), Times: []int64{a.First, a.First + 1, a.Last},
			Values: []float64{math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}})
	for _, ans := range []KeptAnswer{a, {First: 0, Last: 0, Mark: a.Mark}} {
		b, err := appendAnswer(nil, ans)
		require.NoError(t, err)
		back, err := decodeAnswer(b, DefaultRawPeriod)
		require.NoError(t, err)
		requireSameAnswer(t, ans, back)
	}
}

// What cannot be kept is an error before any byte is written: steps out of order or
// before 1970, samples outside the steps or not ascending, a series without samples or
// with more values than times, an invalid label set, a mark of unknown entities.
func TestAnswerNotKept(t *testing.T) {
	for name, change := range map[string]func(*KeptAnswer){
		"last before first":   func(a *KeptAnswer) { a.Last = a.First - 1 },
		"before 1970":         func(a *KeptAnswer) { a.First = -1 },
		"a time after last":   func(a *KeptAnswer) { a.Series[0].Times[1] = a.Last + 1 },
		"times not ascending": func(a *KeptAnswer) { a.Series[0].Times[1] = a.First },
		"no samples":          func(a *KeptAnswer) { a.Series[0].Times, a.Series[0].Values = nil, nil },
		"more values":         func(a *KeptAnswer) { a.Series[0].Values = append(a.Series[0].Values, 1) },
		"empty label value":   func(a *KeptAnswer) { a.Series[0].Labels = labels.Labels{{Name: "job"}} },
		"unknown mark":        func(a *KeptAnswer) { a.Mark.unknown = true },
	} {
		a := docAnswer()
		change(&a)
		b, err := appendAnswer(nil, a)
		require.Error(t, err, name)
		require.Nil(t, b, name)
	}
}

// decodeAnswer rejects every cut of an answer and a byte after it, another version, a
// mark whose periods are not ascending.
func TestDecodeAnswerRejects(t *testing.T) {
	good, err := appendAnswer(nil, docAnswer())
	require.NoError(t, err)
	for i := range len(good) {
		_, err := decodeAnswer(good[:i], DefaultRawPeriod)
		require.ErrorIs(t, err, errAnswer, "cut at %d", i)
	}
	_, err = decodeAnswer(append(append([]byte(nil), good...), 0), DefaultRawPeriod)
	require.ErrorIs(t, err, errAnswer, "a byte after")
	other := append([]byte{2}, good[1:]...)
	_, err = decodeAnswer(other, DefaultRawPeriod)
	require.ErrorIs(t, err, errAnswer, "version 2")

	// An answer written out by hand: no steps' series, a mark of periods 5 and then p.
	byHand := func(p byte) []byte {
		b := []byte{answerVersion}
		b = binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(b, 0), 0), 0)
		b = appendTime(appendTime(b, time.Unix(0, 0)), time.Unix(1, 0))
		b = append(b, make([]byte, sha256.Size)...)
		b = append(b, 2, 5, 1, p, 1) // two periods and their generations
		return append(b, 0, 0)       // no settled mark, no series
	}
	_, err = decodeAnswer(byHand(6), DefaultRawPeriod)
	require.NoError(t, err, "periods 5 and 6")
	for _, p := range []byte{5, 4} {
		_, err = decodeAnswer(byHand(p), DefaultRawPeriod)
		require.ErrorIs(t, err, errAnswer, "periods 5 and %d", p)
	}
}

// decodeAnswer never panics, and what it accepts encodes and decodes to the same answer.
func FuzzDecodeAnswer(f *testing.F) {
	good, _ := appendAnswer(nil, docAnswer())
	f.Add(good)
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeAnswer(b, DefaultRawPeriod)
		if err != nil {
			if !errors.Is(err, errAnswer) {
				t.Fatalf("an error not wrapping errAnswer: %v", err)
			}
			return
		}
		again, err := appendAnswer(nil, a)
		if err != nil {
			t.Fatalf("an answer decoded that cannot be encoded: %v", err)
		}
		back, err := decodeAnswer(again, DefaultRawPeriod)
		if err != nil {
			t.Fatalf("an answer encoded again that does not decode: %v", err)
		}
		requireSameAnswer(t, a, back)
	})
}
