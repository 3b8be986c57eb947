package sketchenc

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

const (
	// DefaultAccuracy is the relative accuracy of a sketch when none (0) is given.
	DefaultAccuracy = 0.01
	// MinAccuracy keeps every finite key well inside int32, as DDSketch's index mapping
	// requires, and leaves room above the largest finite key for the key of infinities.
	MinAccuracy = 1e-6

	// Version is the first byte of an encoded sketch.
	Version byte = 1

	// DDSketch's constants (ddsketch/mapping/index_mapping.go).
	ddsExpOverflow      = 7.094361393031e+02      // math.Exp overflows above on amd64
	ddsMinNormalFloat64 = 2.2250738585072014e-308 // 2^-1022
)

// CheckAccuracy returns an error unless a is a valid relative accuracy: 0 (the default, 1%) or
// in [1e-6, 1).
func CheckAccuracy(a float64) error {
	if a == 0 || (a >= MinAccuracy && a < 1) {
		return nil
	}
	return fmt.Errorf("relative accuracy %g not in [%g, 1)", a, float64(MinAccuracy))
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

// newMapping returns the mapping of relative accuracy a (0: the default), which
// CheckAccuracy must accept: else it panics.
func newMapping(a float64) logMapping {
	if a == 0 {
		a = DefaultAccuracy
	}
	if err := CheckAccuracy(a); err != nil {
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

// Sketch is a DDSketch: counts by key of the positive and negative values, and of the zeros
// (magnitudes below minIndexable, subnormal numbers, count as zero). Infinities are kept in the
// key above the largest finite key of their sign, so that ranks count them.
type Sketch struct {
	m        logMapping
	zero     uint64
	pos, neg map[int32]uint64
}

func newSketch(m logMapping) *Sketch {
	return &Sketch{m: m, pos: map[int32]uint64{}, neg: map[int32]uint64{}}
}

// New returns an empty sketch of relative accuracy a: 0 for [DefaultAccuracy], else in
// [MinAccuracy, 1) (see [CheckAccuracy]); another accuracy panics.
func New(a float64) *Sketch { return newSketch(newMapping(a)) }

// Accuracy is the relative accuracy of s's quantiles.
func (s *Sketch) Accuracy() float64 { return s.m.accuracy }

// Add counts v, which is not NaN (a NaN is ignored: no key holds it).
func (s *Sketch) Add(v float64) {
	switch {
	case v != v: // NaN
		return
	case v > s.m.minIndexable:
		s.pos[s.m.key(v)]++
	case v < -s.m.minIndexable:
		s.neg[s.m.key(-v)]++
	default:
		s.zero++
	}
}

// SameMapping reports whether s and o have the same mapping, hence can be merged.
func (s *Sketch) SameMapping(o *Sketch) bool { return s.m.gamma == o.m.gamma }

// Merge adds o's counts to s's, which has the same mapping (see [Sketch.SameMapping]). o may be s.
func (s *Sketch) Merge(o *Sketch) {
	s.zero += o.zero
	for k, n := range o.pos { // when o is s, ranging while updating present keys is fine
		s.pos[k] += n
	}
	for k, n := range o.neg {
		s.neg[k] += n
	}
}

// Clone returns a copy of s that shares nothing with it.
func (s *Sketch) Clone() *Sketch {
	c := &Sketch{m: s.m, zero: s.zero, pos: make(map[int32]uint64, len(s.pos)), neg: make(map[int32]uint64, len(s.neg))}
	c.Merge(s)
	return c
}

// Count is the number of values counted.
func (s *Sketch) Count() uint64 {
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

// ValueAtRank returns the approximation of the value of 0-based rank r in ascending order:
// negative values by descending key (-Inf first), zeros, positive values by ascending key
// (+Inf last). A rank beyond the count gives the largest value; an empty sketch NaN.
func (s *Sketch) ValueAtRank(r uint64) float64 {
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
