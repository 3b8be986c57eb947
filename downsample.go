package tablets

import (
	"fmt"
	"iter"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
)

type aggKind uint8

const (
	aggInvalid aggKind = iota // the zero Aggregation
	aggAvg
	aggMin
	aggMax
	aggSum
	aggCount
	aggFirst
	aggLast
	aggPercentile
)

var aggNames = [...]string{
	aggAvg:   "avg",
	aggMin:   "min",
	aggMax:   "max",
	aggSum:   "sum",
	aggCount: "count",
	aggFirst: "first",
	aggLast:  "last",
}

// Aggregation says how the points of one bucket become one value. It is a comparable value
// type: two Aggregations are == exactly when they aggregate the same way, so
// ParseAggregation(a.String()) == a for every valid a.
//
// The zero Aggregation is invalid; Downsample reports it as an error.
//
// # NaN
//
// A NaN is not a sample: every aggregation skips the points whose value is NaN, Prometheus'
// staleness marker (0x7ff0000000000002) and any other. Count does not count them, First and
// Last pick among the other points, and a bucket whose points are all NaN is empty, so it
// yields no point. The rollup tiers of package tsdb follow the same rule (their quantile
// sketches cannot hold a NaN), so that a tier's window and Downsample over the raw points of
// the same span agree on which points they aggregate. A NaN can still come out: the Sum or
// Avg of +Inf and -Inf.
//
// # Infinities
//
// Infinities follow IEEE 754 arithmetic: Sum and Avg of +Inf and -Inf are NaN, Min and Max
// order them as usual, and a percentile that falls exactly on a rank (or between two equal
// values) returns that value, so it never turns an infinity into NaN by interpolating.
type Aggregation struct {
	kind aggKind
	q    float64 // the quantile in [0,1], for percentiles only
}

// The aggregations.
var (
	// Avg is the arithmetic mean: the Sum divided by the Count.
	Avg = Aggregation{kind: aggAvg}
	// Min is the smallest value.
	Min = Aggregation{kind: aggMin}
	// Max is the largest value.
	Max = Aggregation{kind: aggMax}
	// Sum is the sum of the values, added in input order.
	Sum = Aggregation{kind: aggSum}
	// Count is the number of points, as a float64.
	Count = Aggregation{kind: aggCount}
	// First is the value of the bucket's earliest point (of several with that time, the
	// first in input order).
	First = Aggregation{kind: aggFirst}
	// Last is the value of the bucket's latest point (of several with that time, the last in
	// input order: the last write wins).
	Last = Aggregation{kind: aggLast}

	// P50 is the median, P90 and P99 the 90th and 99th percentiles; see Percentile.
	P50 = Percentile(0.5)
	P90 = Percentile(0.9)
	P99 = Percentile(0.99)
)

// Percentile returns the aggregation that yields the q-quantile of a bucket's values, q in
// [0, 1] (0.5 is the median, 0.99 the 99th percentile).
//
// The quantile is computed by linear interpolation between the closest ranks, the same as
// numpy.percentile's default "linear" method (method 7 of Hyndman and Fan): with the n
// values sorted ascending as x[0..n-1], h = (n-1)*q and
//
//	value = x[floor(h)] + (h-floor(h)) * (x[floor(h)+1] - x[floor(h)])
//
// so q = 0 is the minimum, q = 1 the maximum, and a bucket of one point yields its value.
// Where h is a whole number, or the two neighbours are equal, the value is x[h] itself.
//
// Percentile does not panic on a q outside [0, 1] (or NaN); Downsample reports it as an
// error wrapping ErrInvalidOptions.
func Percentile(q float64) Aggregation {
	return Aggregation{kind: aggPercentile, q: q}
}

// valid reports whether a can be computed.
func (a Aggregation) valid() bool {
	switch a.kind {
	case aggAvg, aggMin, aggMax, aggSum, aggCount, aggFirst, aggLast:
		return a.q == 0
	case aggPercentile:
		return a.q >= 0 && a.q <= 1 // false for NaN
	}
	return false
}

// String returns the name ParseAggregation reads: "avg", "min", "max", "sum", "count",
// "first", "last", or for a percentile "p" and the percentage in the shortest decimal form
// that reads back as the same q ("p50", "p99", "p99.9", "p25"). An invalid Aggregation
// prints as "invalid" or "percentile(q)" with the offending q.
func (a Aggregation) String() string {
	if !a.valid() {
		if a.kind == aggPercentile {
			return "percentile(" + strconv.FormatFloat(a.q, 'g', -1, 64) + ")"
		}
		return "invalid"
	}
	if a.kind != aggPercentile {
		return aggNames[a.kind]
	}
	// The shortest decimal that reads back as q, times 100 exactly.
	s := strconv.FormatFloat(a.q, 'f', -1, 64)
	decimals := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		decimals = max(len(s)-i-1-2, 0)
	}
	r, _ := new(big.Rat).SetString(s)
	r.Mul(r, big.NewRat(100, 1))
	return "p" + r.FloatString(decimals)
}

// Quantile returns the quantile in [0, 1] of a percentile aggregation (P50, Percentile(q),
// "p99"), and whether a is one.
func (a Aggregation) Quantile() (float64, bool) { return a.q, a.kind == aggPercentile }

// ParseAggregation reads an aggregation name, case-insensitively: "avg" (or "mean"), "min",
// "max", "sum", "count", "first", "last", "median" (P50), "pN" for the N-th percentile with N
// a decimal in [0, 100] ("p50", "p90", "p99", "p99.9"), or "qF" for the quantile F in [0, 1]
// ("q0.25" is "p25"). N and F are plain decimals: digits with at most one point, no sign and
// no exponent; they are read exactly, so "p99.9" is Percentile(0.999). Any other string is
// an error wrapping ErrInvalidOptions.
func ParseAggregation(s string) (Aggregation, error) {
	name := strings.ToLower(s)
	switch name {
	case "avg", "mean":
		return Avg, nil
	case "median":
		return P50, nil
	}
	for k, n := range aggNames {
		if n != "" && n == name {
			return Aggregation{kind: aggKind(k)}, nil
		}
	}
	if len(name) >= 2 && (name[0] == 'p' || name[0] == 'q') {
		if r, ok := parseDecimal(name[1:]); ok {
			if name[0] == 'p' {
				r.Quo(r, big.NewRat(100, 1))
			}
			if r.Cmp(big.NewRat(1, 1)) <= 0 {
				q, _ := r.Float64() // the nearest float64 to the exact decimal
				return Percentile(q), nil
			}
		}
	}
	return Aggregation{}, fmt.Errorf("%w: unknown aggregation %q (want avg, mean, min, max, sum, count, first, last, median, pN with N in [0,100], or qF with F in [0,1])", ErrInvalidOptions, s)
}

// parseDecimal reads a plain non-negative decimal: digits with at most one '.', at least one
// digit.
func parseDecimal(s string) (*big.Rat, bool) {
	digits, points := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			points++
		default:
			return nil, false
		}
	}
	if digits == 0 || points > 1 {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// bucketStart returns the start of the bucket of width step that holds t: the latest
// instant b <= t with (b - Unix epoch) a whole multiple of step. It is exact for every time
// a time.Time can hold, before 1970 and after 2262 included (where t's nanoseconds since the
// epoch do not fit an int64). step must be > 0.
func bucketStart(t time.Time, step time.Duration) time.Time {
	s := int64(step)
	// (sec*1e9 + nsec) mod s, with sec mod s taken first so that the product fits 128 bits
	// with a high word below s, as bits.Div64 needs.
	r := t.Unix() % s
	if r < 0 {
		r += s
	}
	hi, lo := bits.Mul64(uint64(r), 1e9)
	var carry uint64
	lo, carry = bits.Add64(lo, uint64(t.Nanosecond()), 0)
	hi += carry
	_, rem := bits.Div64(hi, lo, uint64(s))
	return t.Add(-time.Duration(rem))
}

// bucket accumulates the points of one bucket.
type bucket struct {
	agg        Aggregation
	start, end time.Time // [start, end) is the bucket
	n          int
	acc        float64   // sum, min or max
	picked     time.Time // for First and Last: the time of the point picked so far
	vals       []float64 // for percentiles; reused from bucket to bucket
}

func (b *bucket) reset(start time.Time, step time.Duration) {
	b.start, b.end = start, start.Add(step)
	b.n = 0
	b.acc = 0
	b.vals = b.vals[:0]
}

// add adds p to the bucket, unless its value is NaN (see Aggregation).
func (b *bucket) add(p Point) {
	v := p.Value
	if math.IsNaN(v) {
		return
	}
	b.n++
	switch b.agg.kind {
	case aggAvg, aggSum:
		b.acc += v
	case aggMin:
		if b.n == 1 {
			b.acc = v
		} else {
			b.acc = min(b.acc, v)
		}
	case aggMax:
		if b.n == 1 {
			b.acc = v
		} else {
			b.acc = max(b.acc, v)
		}
	case aggFirst:
		if b.n == 1 || p.Time.Before(b.picked) {
			b.acc, b.picked = v, p.Time
		}
	case aggLast:
		if b.n == 1 || !p.Time.Before(b.picked) {
			b.acc, b.picked = v, p.Time
		}
	case aggPercentile:
		b.vals = append(b.vals, v)
	}
}

func (b *bucket) value() float64 {
	switch b.agg.kind {
	case aggAvg:
		return b.acc / float64(b.n)
	case aggCount:
		return float64(b.n)
	case aggPercentile:
		slices.Sort(b.vals)
		return percentile(b.vals, b.agg.q)
	}
	return b.acc
}

// percentile interpolates the q-quantile of x, sorted ascending and not empty.
func percentile(x []float64, q float64) float64 {
	h := float64(len(x)-1) * q
	i := int(h) // h >= 0, so this is floor(h)
	frac := h - float64(i)
	if frac == 0 || i+1 >= len(x) || x[i] == x[i+1] {
		return x[i]
	}
	return x[i] + frac*(x[i+1]-x[i])
}

// Downsample groups points into buckets of width step and yields one point per non-empty
// bucket: Time is the bucket's start and Value the aggregation of the bucket's values. A
// point whose value is NaN is not counted in its bucket (see Aggregation).
//
// Buckets are aligned to the Unix epoch: a point at t falls in the bucket that starts at
// floor((t - epoch) / step) * step, for times before 1970 too. So with step = time.Minute a
// bucket starts on every whole minute, and with step = 24*time.Hour on every midnight UTC.
// The bucket start is in t's location, as t.Add would give it, without a monotonic reading.
// Buckets that hold no point (or only NaN values) are skipped.
//
// The input must come oldest first, as Store.Query yields it. Points of one bucket may come
// in any order among themselves (First and Last pick by time), but a point whose bucket
// starts before the current bucket is an error wrapping ErrInvalidTime that names the
// point's time.
//
// Downsample streams: it holds one bucket at a time, in O(1) memory, or for a percentile
// the values of the current bucket. It pulls the input only as the consumer asks for
// output and stops pulling it when the consumer stops (breaks out of its range loop).
//
// Errors are yielded with a zero Point, and end the sequence:
//   - step <= 0, or an invalid agg (the zero Aggregation, or a Percentile outside [0, 1]):
//     an error wrapping ErrInvalidOptions, yielded once without pulling the input;
//   - an error from the input: yielded as is; the bucket in progress is dropped;
//   - an out-of-order point: as above; the bucket in progress is dropped.
//
// See Aggregation for how NaN and infinite values aggregate.
func Downsample(points iter.Seq2[Point, error], step time.Duration, agg Aggregation) iter.Seq2[Point, error] {
	return func(yield func(Point, error) bool) {
		if step <= 0 {
			yield(Point{}, fmt.Errorf("%w: downsample: step %v is not positive", ErrInvalidOptions, step))
			return
		}
		if !agg.valid() {
			yield(Point{}, fmt.Errorf("%w: downsample: invalid aggregation %v", ErrInvalidOptions, agg))
			return
		}
		b := bucket{agg: agg}
		open := false
		for p, err := range points {
			if err != nil {
				yield(Point{}, err)
				return
			}
			if open && !p.Time.Before(b.start) && p.Time.Before(b.end) {
				b.add(p) // the common case: same bucket, no division
				continue
			}
			start := bucketStart(p.Time, step)
			if open {
				if start.Before(b.start) {
					yield(Point{}, fmt.Errorf("%w: downsample: point at %s is out of order: its bucket starts at %s, before the current bucket at %s (input must be oldest first)",
						ErrInvalidTime, p.Time.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano), b.start.Format(time.RFC3339Nano)))
					return
				}
				if !start.Equal(b.start) { // equal only where b.end could not be represented
					if b.n > 0 && !yield(Point{Time: b.start, Value: b.value()}, nil) {
						return
					}
					b.reset(start.Round(0), step)
				}
			} else {
				b.reset(start.Round(0), step)
				open = true
			}
			b.add(p)
		}
		if open && b.n > 0 {
			yield(Point{Time: b.start, Value: b.value()}, nil)
		}
	}
}
