package histenc

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/bitcode"
)

// header is a parsed and checked chunk header.
type header struct {
	count       int
	first, last uint64
	mode, fmode byte
	body        []byte // the bit stream
}

func (h header) sums() uint       { return uint(h.mode & 3) }
func (h header) sumExp() uint     { return uint(h.mode >> modeExpShift) }
func (h header) timeOrder2() bool { return h.mode&modeTimeOrder != 0 }

func (h header) plan() plan {
	p := plan{sums: h.sums(), sumExp: h.sumExp(), timeOrder2: h.timeOrder2()}
	if h.fmode > 0 {
		p.floatDecimal, p.floatExp = true, uint(h.fmode-1)
	}
	return p
}

// minSampleBits is the fewest bits any sample takes: a time, a head, a zero count, a
// count and a sum of one bit each after the first sample, more in the first.
const minSampleBits = 5

// Header returns a chunk's count of samples and its first and last units, reading only
// its header, which it checks; Decode can still find the samples corrupt. An empty chunk
// has count 0 and units 0.
func Header(chunk []byte) (count int, first, last uint64, err error) {
	h, err := parseHeader(chunk)
	return h.count, h.first, h.last, err
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

func parseHeader(src []byte) (header, error) {
	var h header
	if len(src) == 0 {
		return h, corrupt("no bytes")
	}
	if src[0] != Version {
		return h, fmt.Errorf("%w %d", ErrVersion, src[0])
	}
	if len(src) < 4 {
		return h, corrupt("%d bytes, shorter than any chunk", len(src))
	}
	h.mode, h.fmode = src[1], src[2]
	switch {
	case h.sums() >= valueCodings:
		return h, corrupt("reserved sum coding in mode %#x", h.mode)
	case h.sumExp() > bitcode.MaxExp:
		return h, corrupt("sum exponent %d > %d", h.sumExp(), bitcode.MaxExp)
	case h.sums() == valuesXOR && h.sumExp() != 0:
		return h, corrupt("exponent %d with XOR sums", h.sumExp())
	case h.fmode > bitcode.MaxExp+1:
		return h, corrupt("float count mode %d > %d", h.fmode, bitcode.MaxExp+1)
	}
	count, rest, err := uvarint(src[3:], "count")
	if err != nil {
		return h, err
	}
	if count == 0 {
		if h.mode != 0 || h.fmode != 0 || len(rest) != 0 {
			return h, corrupt("empty chunk with modes %#x %#x and %d more bytes", h.mode, h.fmode, len(rest))
		}
		return h, nil
	}
	if h.first, rest, err = uvarint(rest, "first unit"); err != nil {
		return h, err
	}
	span, rest, err := uvarint(rest, "span")
	if err != nil {
		return h, err
	}
	if span > math.MaxUint64-h.first {
		return h, corrupt("last unit overflows: first %d + span %d", h.first, span)
	}
	if span < count-1 || (count == 1 && span != 0) {
		return h, corrupt("%d strictly increasing units cannot span %d", count, span)
	}
	if count > 8*uint64(len(rest))/minSampleBits {
		return h, corrupt("%d samples cannot fit in %d bytes", count, len(rest))
	}
	h.count, h.last, h.body = int(count), h.first+span, rest
	return h, nil
}

func uvarint(b []byte, what string) (uint64, []byte, error) {
	x, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, corrupt("bad %s varint", what)
	}
	return x, b[n:], nil
}

// Decode calls yield with each sample of a chunk, in time order; each has histograms of its
// own (yield may keep them). Empty spans, buckets and custom bounds come back nil.
//
// It never panics, whatever chunk holds, and returns an error wrapping ErrVersion or
// ErrCorrupt for anything but a well-formed chunk. Errors in the bit stream are found as it
// is read, so yield may already have had some samples: on error, discard them.
func Decode(chunk []byte, yield func(Sample)) error {
	h, err := parseHeader(chunk)
	if err != nil || h.count == 0 {
		return err
	}
	p := h.plan()
	r := bitcode.NewReader(h.body)
	tc := bitcode.NewTimeCoder(p.timeOrder2, h.count, h.first, h.last)
	sc := newSumCoder(p.sums, p.sumExp)
	st := newState()
	t := h.first
	for i := range h.count {
		if i > 0 {
			delta := tc.Read(&r)
			switch {
			case r.Err():
				return corrupt("truncated time %d", i)
			case delta == 0 || delta > h.last-t:
				return corrupt("time delta %d after %d: not increasing or past the last unit %d", delta, t, h.last)
			}
			t += delta
		}
		s, err := st.readSample(&r, &sc, p, i == 0)
		if err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
		s.Unit = t
		yield(s)
	}
	if t != h.last {
		return corrupt("last unit %d, header says %d", t, h.last)
	}
	if !r.AtCleanEnd() {
		return corrupt("trailing bits or bytes after %d samples", h.count)
	}
	return nil
}

// readSample reads a sample's head, layout, counts and sum.
func (st *state) readSample(r *bitcode.Reader, sc *sumCoder, p plan, first bool) (Sample, error) {
	var s Sample
	if err := st.readHead(r); err != nil {
		return s, err
	}
	countsOK := true
	switch {
	case !st.float:
		s.H = st.readInts(r)
	case p.floatDecimal:
		s.FH, countsOK = st.readDecimals(r, p.floatExp)
	default:
		s.FH, countsOK = st.readXORs(r)
	}
	sum, sumOK := sc.read(r, first)
	if s.H != nil {
		s.H.Sum = sum
	} else {
		s.FH.Sum = sum
	}
	switch {
	case r.Err():
		return s, corrupt("truncated")
	case !countsOK:
		return s, corrupt("a float count out of range or a bad XOR code")
	case !sumOK:
		return s, corrupt("a bad sum code")
	}
	return s, nil
}

// readHead reads a sample's kind, hint and layout and moves the state to it.
func (st *state) readHead(r *bitcode.Reader) error {
	if st.have && r.ReadBits(1) == 0 {
		st.next(st.float, st.hint, st.lay, true)
		return nil
	}
	float := r.ReadBits(1) == 1
	hint := tablets.CounterResetHint(r.ReadBits(8))
	if st.have && r.ReadBits(1) == 0 {
		st.next(float, hint, st.lay, true)
		return nil
	}
	lay, err := readLayout(r)
	if err != nil {
		return err
	}
	// Each bucket takes at least a bit in every sample: this bounds what next allocates.
	if uint64(bucketCount(lay.pos))+uint64(bucketCount(lay.neg)) > r.Remaining() {
		return corrupt("spans of more buckets than bits left")
	}
	st.next(float, hint, lay, false)
	return nil
}

// newInt returns an integer histogram of the current hint and layout, with its own spans
// and bounds.
func (st *state) newInt() *tablets.Histogram {
	l := st.lay
	return &tablets.Histogram{
		CounterResetHint: st.hint, Schema: l.schema, ZeroThreshold: l.zeroThreshold,
		PositiveSpans: slices.Clone(l.pos), NegativeSpans: slices.Clone(l.neg),
		CustomValues: slices.Clone(l.custom),
	}
}

func (st *state) newFloat() *tablets.FloatHistogram {
	l := st.lay
	return &tablets.FloatHistogram{
		CounterResetHint: st.hint, Schema: l.schema, ZeroThreshold: l.zeroThreshold,
		PositiveSpans: slices.Clone(l.pos), NegativeSpans: slices.Clone(l.neg),
		CustomValues: slices.Clone(l.custom),
	}
}

// makeOrNil is make, but nil for no elements, as the writer does not tell nil from empty.
func makeOrNil[T any](n int) []T {
	if n == 0 {
		return nil
	}
	return make([]T, n)
}

func (st *state) readInts(r *bitcode.Reader) *tablets.Histogram {
	h := st.newInt()
	h.ZeroCount = uint64(st.zero.readInt(r))
	total := h.ZeroCount
	h.PositiveBuckets, h.NegativeBuckets = makeOrNil[int64](len(st.pos)), makeOrNil[int64](len(st.neg))
	for side, buckets := range [2][]int64{h.PositiveBuckets, h.NegativeBuckets} {
		states := st.sideStates(side)
		var prev int64
		for j := range buckets {
			abs := states[j].readInt(r)
			buckets[j] = abs - prev
			prev = abs
			total += uint64(abs)
		}
	}
	h.Count = total + uint64(bitcode.Unzigzag(st.intCount.Read(r)))
	return h
}

func (st *state) readDecimals(r *bitcode.Reader, e uint) (*tablets.FloatHistogram, bool) {
	h := st.newFloat()
	ok := true
	value := func(n int64) float64 {
		ok = ok && bitcode.InDecimalRange(n)
		return bitcode.DecimalValue(n, e)
	}
	total := st.zero.readInt(r)
	h.ZeroCount = value(total)
	h.PositiveBuckets, h.NegativeBuckets = makeOrNil[float64](len(st.pos)), makeOrNil[float64](len(st.neg))
	for side, buckets := range [2][]float64{h.PositiveBuckets, h.NegativeBuckets} {
		states := st.sideStates(side)
		for j := range buckets {
			n := states[j].readInt(r)
			buckets[j] = value(n)
			total += n
		}
	}
	h.Count = value(total + bitcode.Unzigzag(st.decCount.Read(r)))
	return h, ok
}

func (st *state) readXORs(r *bitcode.Reader) (*tablets.FloatHistogram, bool) {
	h := st.newFloat()
	v, ok := st.zero.readXOR(r)
	h.ZeroCount = math.Float64frombits(v)
	h.PositiveBuckets, h.NegativeBuckets = makeOrNil[float64](len(st.pos)), makeOrNil[float64](len(st.neg))
	for side, buckets := range [2][]float64{h.PositiveBuckets, h.NegativeBuckets} {
		states := st.sideStates(side)
		for j := range buckets {
			v, okj := states[j].readXOR(r)
			buckets[j] = math.Float64frombits(v)
			ok = ok && okj
		}
	}
	v, okc := st.countX.readXOR(r)
	h.Count = math.Float64frombits(v)
	return h, ok && okc
}
