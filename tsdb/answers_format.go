package tsdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/seed71701133/tablets/internal/chunkenc"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
)

// The encoding of a kept answer (docs/format.md, "Kept answers"): what Answers.Keep
// stores and Answers.Kept reads back, in any process of any later version.

// answerVersion is the first byte of an encoded answer.
const answerVersion = 1

// errAnswer is wrapped by every error of decodeAnswer: bytes that are not an answer of this
// version. A reader treats them as no answer (a newer program's, or damaged).
var errAnswer = errors.New("tsdb: not a kept answer")

// errUnkeptMark is the error of a mark that cannot be kept: a Sub of a Sub over another
// range (Holds never holds it, so there is nothing to keep).
var errUnkeptMark = errors.New("tsdb: a mark of unknown staged entities cannot be kept")

// appendMark appends what Holds reads of m when m is the earlier mark (since): its range,
// the sum of its staging entities, and each raw period's change log generation.
func appendMark(dst []byte, m ReadMark) ([]byte, error) {
	if m.unknown {
		return nil, errUnkeptMark
	}
	dst = appendTime(dst, m.from)
	dst = appendTime(dst, m.to)
	dst = append(dst, m.sum[:]...)
	dst = binary.AppendUvarint(dst, uint64(len(m.periods)))
	for _, p := range slices.Sorted(maps.Keys(m.periods)) { // one encoding of a mark
		dst = binary.AppendUvarint(dst, p)
		dst = binary.AppendUvarint(dst, m.periods[p].Gen())
	}
	return dst, nil
}

// appendTime appends t as Unix seconds (varint) and nanoseconds (uvarint, < 1e9): exact
// for every time, tablets.MaxTime's nanoseconds included.
func appendTime(dst []byte, t time.Time) []byte {
	return binary.AppendUvarint(binary.AppendVarint(dst, t.Unix()), uint64(t.Nanosecond()))
}

// answerReader reads an encoded answer, remembering the first error.
type answerReader struct {
	b   []byte
	err error
}

func (r *answerReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errAnswer, what)
	}
}

func (r *answerReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *answerReader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads a uvarint length and that many bytes (aliasing the input).
func (r *answerReader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(what)
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *answerReader) time(what string) time.Time {
	s, ns := r.varint(what), r.uvarint(what)
	if r.err == nil && ns >= uint64(time.Second) {
		r.fail(what)
	}
	return time.Unix(s, int64(ns)).UTC()
}

// mark reads appendMark's encoding: a mark as Holds reads an earlier one, never taken
// (it has no listing: it cannot be the later of two marks), of a database whose raw period
// is period.
func (r *answerReader) mark(period time.Duration) ReadMark {
	m := ReadMark{from: r.time("mark start"), to: r.time("mark end"), period: period}
	if r.err == nil && m.to.Before(m.from) {
		r.fail("mark ends before it starts")
	}
	if r.err == nil && len(r.b) < len(m.sum) {
		r.fail("mark sum")
	}
	if r.err != nil {
		return ReadMark{}
	}
	r.b = r.b[copy(m.sum[:], r.b):]
	n := r.uvarint("mark periods")
	if r.err == nil && n > uint64(len(r.b))/2 { // two bytes a period at least
		r.fail("mark periods")
	}
	if r.err != nil {
		return ReadMark{}
	}
	m.periods = make(map[uint64]changelog.State, n)
	last := uint64(0)
	for i := uint64(0); i < n && r.err == nil; i++ {
		p, gen := r.uvarint("mark period"), r.uvarint("mark generation")
		if r.err == nil && i > 0 && p <= last {
			r.fail("mark periods not ascending")
		}
		last = p
		m.periods[p] = changelog.StateOfGen(gen)
	}
	return m
}

// A KeptAnswer is the answer of a run of steps of a query (the query API's results cache:
// its extent), kept in the database for every process that shares it (Answers.Keep). It
// serves while a mark taken later holds its Mark (or its Settled, for the steps up to
// LastSettled).
type KeptAnswer struct {
	// First and Last are its first and last steps, Unix milliseconds, 0 <= First <= Last.
	First, Last int64
	// Mark is the mark of the samples its steps read.
	Mark ReadMark
	// LastSettled is the last of its steps settled when Mark was taken, and Settled the mark
	// of the samples the steps First..LastSettled read; HasSettled false: none (every step
	// is settled, or none is).
	LastSettled int64
	Settled     ReadMark
	HasSettled  bool
	// Series are its series of float samples at its steps (an answer with histograms is not
	// kept).
	Series []AnswerSeries
}

// AnswerSeries is a series of a KeptAnswer: its labels (none: an empty set) and its float
// samples, times (Unix milliseconds) strictly ascending within the answer's steps.
type AnswerSeries struct {
	Labels Labels
	Times  []int64
	Values []float64
}

// errUnkeptAnswer wraps the errors of answers appendAnswer cannot encode.
var errUnkeptAnswer = errors.New("tsdb: an answer that cannot be kept")

// appendAnswer appends the encoding of a.
func appendAnswer(dst []byte, a KeptAnswer) ([]byte, error) {
	if a.First < 0 || a.Last < a.First {
		return nil, fmt.Errorf("%w: steps %d to %d", errUnkeptAnswer, a.First, a.Last)
	}
	dst = append(dst, answerVersion)
	dst = binary.AppendVarint(dst, a.First)
	dst = binary.AppendVarint(dst, a.Last)
	dst = binary.AppendVarint(dst, a.LastSettled)
	var err error
	if dst, err = appendMark(dst, a.Mark); err != nil {
		return nil, err
	}
	if !a.HasSettled {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		if dst, err = appendMark(dst, a.Settled); err != nil {
			return nil, err
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(a.Series)))
	times := []uint64(nil)
	for _, s := range a.Series {
		if len(s.Times) != len(s.Values) || len(s.Times) == 0 {
			return nil, fmt.Errorf("%w: a series of %d times and %d values", errUnkeptAnswer, len(s.Times), len(s.Values))
		}
		var ls []byte
		if len(s.Labels) > 0 {
			if err := s.Labels.Validate(); err != nil {
				return nil, fmt.Errorf("%w: %w", errUnkeptAnswer, err)
			}
			ls = labels.Append(nil, s.Labels)
		}
		dst = binary.AppendUvarint(dst, uint64(len(ls)))
		dst = append(dst, ls...)
		times = times[:0]
		for i, t := range s.Times {
			if t < a.First || t > a.Last || (i > 0 && t <= s.Times[i-1]) {
				return nil, fmt.Errorf("%w: series %s: time %d", errUnkeptAnswer, s.Labels, t)
			}
			times = append(times, uint64(t))
		}
		chunk := chunkenc.Append(nil, times, s.Values)
		dst = binary.AppendUvarint(dst, uint64(len(chunk)))
		dst = append(dst, chunk...)
	}
	return dst, nil
}

// decodeAnswer decodes appendAnswer's encoding, for a database of raw period period. It
// never panics; anything but an answer of this version is an error wrapping errAnswer.
func decodeAnswer(b []byte, period time.Duration) (KeptAnswer, error) {
	if len(b) == 0 || b[0] != answerVersion {
		return KeptAnswer{}, fmt.Errorf("%w: version", errAnswer)
	}
	r := &answerReader{b: b[1:]}
	a := KeptAnswer{First: r.varint("first step"), Last: r.varint("last step"), LastSettled: r.varint("last settled step")}
	if r.err == nil && (a.First < 0 || a.Last < a.First) {
		r.fail("steps")
	}
	a.Mark = r.mark(period)
	if r.err == nil {
		switch {
		case len(r.b) == 0:
			r.fail("settled mark")
		case r.b[0] == 1:
			r.b = r.b[1:]
			a.HasSettled = true
			a.Settled = r.mark(period)
		case r.b[0] == 0:
			r.b = r.b[1:]
		default:
			r.fail("settled mark")
		}
	}
	n := r.uvarint("series")
	if r.err == nil && n > uint64(len(r.b))/4 { // a series takes 4 bytes at least
		r.fail("series")
	}
	if r.err != nil {
		return KeptAnswer{}, r.err
	}
	a.Series = make([]AnswerSeries, 0, n)
	for range n {
		var s AnswerSeries
		if enc := r.bytes("labels"); r.err == nil && len(enc) > 0 {
			ls, err := labels.Decode(enc)
			if err != nil {
				return KeptAnswer{}, fmt.Errorf("%w: labels: %w", errAnswer, err)
			}
			s.Labels = ls
		}
		chunk := r.bytes("samples")
		if r.err != nil {
			return KeptAnswer{}, r.err
		}
		err := chunkenc.Decode(chunk, func(t uint64, v float64) {
			s.Times = append(s.Times, int64(min(t, math.MaxInt64)))
			s.Values = append(s.Values, v)
		})
		if err != nil {
			return KeptAnswer{}, fmt.Errorf("%w: samples: %w", errAnswer, err)
		}
		if len(s.Times) == 0 || s.Times[0] < a.First || s.Times[len(s.Times)-1] > a.Last {
			return KeptAnswer{}, fmt.Errorf("%w: samples outside the steps", errAnswer)
		}
		a.Series = append(a.Series, s)
	}
	if len(r.b) > 0 {
		return KeptAnswer{}, fmt.Errorf("%w: %d bytes after the series", errAnswer, len(r.b))
	}
	return a, nil
}
