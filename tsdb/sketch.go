package tsdb

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"
)

// The quantile sketch of a Window is a DDSketch (Masson, Rim and Lee, "DDSketch: a fast and
// fully-mergeable quantile sketch with relative-error guarantees", VLDB 2019) as DataDog's
// github.com/DataDog/sketches-go/ddsketch builds it: its logarithmic index mapping (gamma =
// (1+a)/(1-a), index offset 0) over an unbounded sparse store, stored in DDSketch's own binary
// encoding. Only that module's encoding package is imported: its mapping and store packages
// import its protobuf messages, hence google.golang.org/protobuf, into every binary. The
// mapping is restated below, formula for formula; sketch_test.go checks it against
// mapping.LogarithmicMapping, and that ddsketch.DecodeDDSketch reads what appendSketch writes.
//
// Counts are exact integers, so merging is exact: bins add.

const (
	// defaultAccuracy is the relative accuracy of a window's quantiles when none is given.
	defaultAccuracy = 0.01
	// minAccuracy keeps every finite key well inside int32, as DDSketch's index mapping
	// requires, and leaves room above the largest finite key for the key of infinities.
	minAccuracy = 1e-6

	// sketchVersion is the first byte of an encoded sketch.
	sketchVersion byte = 1

	// DDSketch's constants (ddsketch/mapping/index_mapping.go).
	ddsExpOverflow      = 7.094361393031e+02      // math.Exp overflows above on amd64
	ddsMinNormalFloat64 = 2.2250738585072014e-308 // 2^-1022
)

// checkAccuracy returns an error unless a is a valid relative accuracy: 0 (the default, 1%) or
// in [1e-6, 1).
func checkAccuracy(a float64) error {
	if a == 0 || (a >= minAccuracy && a < 1) {
		return nil
	}
	return fmt.Errorf("tsdb: relative accuracy %g not in [%g, 1)", a, float64(minAccuracy))
}

// logMapping is DDSketch's LogarithmicMapping with index offset 0: the key of a magnitude
// v >= minIndexable is floor(log_gamma(v)), the value of key k is gamma^k × (1+accuracy),
// within the relative accuracy of every magnitude of key k. DDSketch refuses magnitudes above
// its maxIndexable (about 1.26e308 at 1%), to keep values finite; we keep their keys, up to
// the key of math.MaxFloat64, with values capped at math.MaxFloat64, which keeps them
// within the accuracy.
type logMapping struct {
	accuracy     float64 // as given
	gamma        float64
	multiplier   float64 // 1/ln(gamma)
	relAccuracy  float64 // 1 - 2/(1+gamma): the accuracy as DDSketch's mapping computes it
	minIndexable float64 // smaller magnitudes count as zero
	minKey       int32   // the key of minIndexable
	maxKey       int32   // the key of math.MaxFloat64: the largest key of a finite value
}

// infKey is the key of infinite magnitudes: the one past the largest finite key.
func (m *logMapping) infKey() int32 { return m.maxKey + 1 }

// newLogMapping returns the mapping of relative accuracy a (0: the default), which
// checkAccuracy must accept: else it panics.
func newLogMapping(a float64) logMapping {
	if a == 0 {
		a = defaultAccuracy
	}
	if err := checkAccuracy(a); err != nil {
		panic(err)
	}
	// As mapping.NewLogarithmicMapping and NewLogarithmicMappingWithGamma(gamma, 0).
	gamma := (1 + a) / (1 - a)
	multiplier := 1 / math.Log(gamma)
	m := logMapping{
		accuracy:    a,
		gamma:       gamma,
		multiplier:  multiplier,
		relAccuracy: 1 - 2/(1+gamma),
		minIndexable: math.Max(
			math.Exp(float64(math.MinInt32)/multiplier+1),
			ddsMinNormalFloat64*gamma,
		),
	}
	m.minKey = int32(m.index(m.minIndexable))
	m.maxKey = int32(m.index(math.MaxFloat64))
	return m
}

// index is LogarithmicMapping.Index, for finite v >= minIndexable.
func (m *logMapping) index(v float64) int {
	i := math.Log(v) * m.multiplier
	if i >= 0 {
		return int(i)
	}
	return int(i) - 1
}

// key returns the key of a magnitude a > minIndexable: infKey for +Inf.
func (m *logMapping) key(a float64) int32 {
	if math.IsInf(a, 1) {
		return m.infKey()
	}
	return int32(m.index(a))
}

// value is LogarithmicMapping.Value, capped at math.MaxFloat64: the magnitude that key k
// stands for; +Inf for infKey.
func (m *logMapping) value(k int32) float64 {
	if k == m.infKey() {
		return math.Inf(1)
	}
	x := float64(k) / m.multiplier
	var e float64
	if x <= ddsExpOverflow {
		e = math.Exp(x)
	} else {
		e = math.Exp(x-1) * math.E
	}
	return min(e*(1+m.relAccuracy), math.MaxFloat64)
}

// sketch is a DDSketch: counts by key of the positive and negative values, and of the zeros
// (magnitudes below minIndexable, subnormal numbers, count as zero). Infinities are kept in the
// key above the largest finite key of their sign, so that ranks count them.
type sketch struct {
	m        logMapping
	zero     uint64
	pos, neg map[int32]uint64
}

func newSketch(m logMapping) *sketch {
	return &sketch{m: m, pos: map[int32]uint64{}, neg: map[int32]uint64{}}
}

// add counts v, which is not NaN.
func (s *sketch) add(v float64) {
	switch {
	case v > s.m.minIndexable:
		s.pos[s.m.key(v)]++
	case v < -s.m.minIndexable:
		s.neg[s.m.key(-v)]++
	default:
		s.zero++
	}
}

// sameMapping reports whether s and o have the same mapping, hence can be merged.
func (s *sketch) sameMapping(o *sketch) bool { return s.m.gamma == o.m.gamma }

// merge adds o's counts to s's, which has the same mapping. o may be s.
func (s *sketch) merge(o *sketch) {
	s.zero += o.zero
	for k, n := range o.pos { // when o is s, ranging while updating present keys is fine
		s.pos[k] += n
	}
	for k, n := range o.neg {
		s.neg[k] += n
	}
}

func (s *sketch) clone() *sketch {
	c := &sketch{m: s.m, zero: s.zero, pos: make(map[int32]uint64, len(s.pos)), neg: make(map[int32]uint64, len(s.neg))}
	c.merge(s)
	return c
}

// count is the number of values counted.
func (s *sketch) count() uint64 {
	n := s.zero
	for _, c := range s.pos {
		n += c
	}
	for _, c := range s.neg {
		n += c
	}
	return n
}

// bin is a key and its count.
type bin struct {
	key int32
	n   uint64
}

// sortedBins returns the bins of a store by ascending key.
func sortedBins(store map[int32]uint64) []bin {
	bins := make([]bin, 0, len(store))
	for k, n := range store {
		bins = append(bins, bin{k, n})
	}
	slices.SortFunc(bins, func(a, b bin) int { return cmp.Compare(a.key, b.key) })
	return bins
}

// valueAtRank returns the approximation of the value of 0-based rank r in ascending order:
// negative values by descending key (-Inf first), zeros, positive values by ascending key
// (+Inf last). A rank beyond the count gives the largest value; an empty sketch NaN.
func (s *sketch) valueAtRank(r uint64) float64 {
	neg := sortedBins(s.neg)
	for i := len(neg) - 1; i >= 0; i-- {
		if r < neg[i].n {
			return -s.m.value(neg[i].key)
		}
		r -= neg[i].n
	}
	if r < s.zero {
		return 0
	}
	r -= s.zero
	pos := sortedBins(s.pos)
	for _, b := range pos {
		if r < b.n {
			return s.m.value(b.key)
		}
		r -= b.n
	}
	switch {
	case len(pos) > 0:
		return s.m.value(pos[len(pos)-1].key)
	case s.zero > 0:
		return 0
	case len(neg) > 0:
		return -s.m.value(neg[0].key)
	}
	return math.NaN()
}

// The encoding of a sketch, for an Edm.Binary property:
//
//	byte 0     sketchVersion (1)
//	then DDSketch's binary encoding, as ddsketch.DecodeDDSketch reads it: blocks of a flag byte
//	and a payload, documented in github.com/DataDog/sketches-go ddsketch/encoding/flag.go
//	(varints and varfloats in ddsketch/encoding/encoding.go). Ours are, in this order:
//	  0x04  zero count: varfloat64 (if not 0)
//	  0x05  positive store, BinEncodingIndexDeltasAndCounts (if not empty): uvarint64 number
//	        of bins, then per bin by ascending key the varint64 key minus the previous one
//	        (the first: minus 0) and the varfloat64 count
//	  0x07  negative store, the same (keys of magnitudes)
//	  0x02  logarithmic index mapping: float64LE gamma, float64LE index offset (0); last, so
//	        that any truncation lacks it
//
// The key of ±Inf is the one past the largest finite key (35,489 at 1%), whose value
// overflows to ±Inf in DDSketch's mapping too. (Decode such bytes with
// store.SparseStoreConstructor: DDSketch's default paginated store allocates pages for the
// keys between.) decodeSketch accepts exactly what appendSketch writes: any other bytes are
// an error, so re-encoding what it decodes gives the same bytes.

var (
	flagZeroCount = enc.FlagZeroCountVarFloat
	flagPosBins   = enc.NewFlag(enc.FlagTypePositiveStore, enc.BinEncodingIndexDeltasAndCounts)
	flagNegBins   = enc.NewFlag(enc.FlagTypeNegativeStore, enc.BinEncodingIndexDeltasAndCounts)
	flagMapping   = enc.FlagIndexMappingBaseLogarithmic
)

// appendTo appends the encoding of s to dst.
func (s *sketch) appendTo(dst []byte) []byte {
	b := append(dst, sketchVersion)
	if s.zero > 0 {
		enc.EncodeFlag(&b, flagZeroCount)
		enc.EncodeVarfloat64(&b, float64(s.zero))
	}
	b = appendBins(b, flagPosBins, s.pos)
	b = appendBins(b, flagNegBins, s.neg)
	enc.EncodeFlag(&b, flagMapping)
	enc.EncodeFloat64LE(&b, s.m.gamma)
	enc.EncodeFloat64LE(&b, 0)
	return b
}

func appendBins(b []byte, flag enc.Flag, store map[int32]uint64) []byte {
	if len(store) == 0 {
		return b
	}
	enc.EncodeFlag(&b, flag)
	enc.EncodeUvarint64(&b, uint64(len(store)))
	prev := int64(0)
	for _, bin := range sortedBins(store) {
		enc.EncodeVarint64(&b, int64(bin.key)-prev)
		enc.EncodeVarfloat64(&b, float64(bin.n))
		prev = int64(bin.key)
	}
	return b
}

var errSketch = errors.New("tsdb: invalid sketch encoding")

// decodeSketch decodes the encoding of a sketch of relative accuracy a (0: the default).
// It never panics, and allocates in proportion to len(b).
func decodeSketch(b []byte, a float64) (*sketch, error) {
	if err := checkAccuracy(a); err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", errSketch)
	}
	if b[0] != sketchVersion {
		return nil, fmt.Errorf("%w: unknown version %d", errSketch, b[0])
	}
	s := newSketch(newLogMapping(a))
	rest := b[1:]
	var total uint64
	stage := 0 // the blocks read: 1 zero count, 2 positive bins, 3 negative bins, 4 mapping
	for stage < 4 {
		flag, err := enc.DecodeFlag(&rest)
		if err != nil {
			return nil, fmt.Errorf("%w: truncated", errSketch)
		}
		switch {
		case flag == flagZeroCount && stage < 1:
			stage = 1
			if s.zero, err = decodeCount(&rest); err != nil {
				return nil, err
			}
			total = s.zero
		case flag == flagPosBins && stage < 2:
			stage = 2
			if total, err = decodeBins(&rest, s.pos, &s.m, total); err != nil {
				return nil, err
			}
		case flag == flagNegBins && stage < 3:
			stage = 3
			if total, err = decodeBins(&rest, s.neg, &s.m, total); err != nil {
				return nil, err
			}
		case flag == flagMapping:
			stage = 4
			gamma, err1 := enc.DecodeFloat64LE(&rest)
			offset, err2 := enc.DecodeFloat64LE(&rest)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%w: truncated", errSketch)
			}
			if math.Float64bits(gamma) != math.Float64bits(s.m.gamma) || math.Float64bits(offset) != 0 {
				return nil, fmt.Errorf("%w: index mapping (gamma %g, offset %g) is not of relative accuracy %g (gamma %g)",
					errSketch, gamma, offset, s.m.accuracy, s.m.gamma)
			}
		default:
			return nil, fmt.Errorf("%w: unexpected block %#x", errSketch, flag)
		}
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the index mapping", errSketch, len(rest))
	}
	// What is left to reject is what appendSketch would write otherwise (overlong varints,
	// say): whatever decodes re-encodes to the same bytes.
	if !bytes.Equal(s.appendTo(make([]byte, 0, len(b))), b) {
		return nil, fmt.Errorf("%w: not canonical", errSketch)
	}
	return s, nil
}

// decodeCount decodes a varfloat64 count: an integer in [1, 2^53].
func decodeCount(b *[]byte) (uint64, error) {
	f, err := enc.DecodeVarfloat64(b)
	if err != nil {
		return 0, fmt.Errorf("%w: truncated", errSketch)
	}
	if !(f >= 1 && f <= 1<<53 && f == math.Trunc(f)) {
		return 0, fmt.Errorf("%w: count %g", errSketch, f)
	}
	return uint64(f), nil
}

// decodeBins decodes the bins of a store into store, and returns total plus their counts.
func decodeBins(b *[]byte, store map[int32]uint64, m *logMapping, total uint64) (uint64, error) {
	n, err := enc.DecodeUvarint64(b)
	if err != nil {
		return 0, fmt.Errorf("%w: truncated", errSketch)
	}
	if n == 0 || n > uint64(len(*b))/2 { // a bin takes 2 bytes at least
		return 0, fmt.Errorf("%w: %d bins in %d bytes", errSketch, n, len(*b))
	}
	key := int64(0)
	for i := range n {
		d, err := enc.DecodeVarint64(b)
		if err != nil {
			return 0, fmt.Errorf("%w: truncated", errSketch)
		}
		if i > 0 && d <= 0 {
			return 0, fmt.Errorf("%w: keys not ascending", errSketch)
		}
		key += d // may wrap only far below minKey: key was in int32 range
		if !(key >= int64(m.minKey) && key <= int64(m.infKey())) {
			return 0, fmt.Errorf("%w: key %d out of [%d, %d]", errSketch, key, m.minKey, m.infKey())
		}
		c, err := decodeCount(b)
		if err != nil {
			return 0, err
		}
		var carry uint64
		if total, carry = bits.Add64(total, c, 0); carry != 0 {
			return 0, fmt.Errorf("%w: count overflows", errSketch)
		}
		store[int32(key)] = c
	}
	return total, nil
}
