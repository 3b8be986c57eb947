package stageenc

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
)

// Decode reads a column. It returns an error wrapping ErrInvalid (never panics) for any byte
// string Append cannot produce: wrong version, truncated, trailing bytes, non-minimal varints,
// times not strictly increasing, overflow, a value in the 8-byte form that the short form
// holds, etc. So that Append(nil, Decode(b)) == b for every b Decode accepts.
func Decode(b []byte) ([]Series, error) { return DecodeSome(b, nil) }

// DecodeSome is Decode keeping only the series whose keys want holds (nil: all). It checks
// the whole column as Decode does, but allocates nothing for the series it leaves out: a
// read of a few series decodes staging columns that hold thousands.
func DecodeSome(b []byte, want map[string]bool) ([]Series, error) {
	var out []Series
	err := DecodeEach(b, want, func(key []byte, times []int64, values []float64) {
		out = append(out, Series{Key: string(key), Times: slices.Clone(times), Values: slices.Clone(values)})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeEach is DecodeSome passing each series kept to each, in the column's order, instead
// of returning them: its key, times and values are the decoder's own and valid only during
// the call, so that a caller that keeps the points elsewhere (packed, interned) allocates
// nothing a series. The column is checked whole, as Decode does; each may have been called
// for the series before a fault.
func DecodeEach(b []byte, want map[string]bool, each func(key []byte, times []int64, values []float64)) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: empty", ErrInvalid)
	}
	if b[0] != Version {
		return fmt.Errorf("%w: version %d, not %d", ErrInvalid, b[0], Version)
	}
	r := &reader{b: b, off: 1, record: -1, want: want}
	z, err := r.uvarint("the base time")
	if err != nil {
		return err
	}
	base := unzigzag(z)
	baseSeen := false // some series starts at the base time
	records := 0
	for ; r.off < len(r.b); records++ {
		r.record = records
		first, err := r.series(base, each)
		if err != nil {
			return err
		}
		baseSeen = baseSeen || first == base
	}
	switch {
	case records == 0 && base != 0:
		return fmt.Errorf("%w: base time %d in a column without series (not 0)", ErrInvalid, base)
	case records > 0 && !baseSeen:
		return fmt.Errorf("%w: base time %d is not the column's smallest time", ErrInvalid, base)
	}
	return nil
}

// reader walks a column, saying where it fails.
type reader struct {
	b      []byte
	off    int
	record int // the series being read, -1 in the header

	want     map[string]bool // the series kept (nil: all)
	keyBuf   [1 + 2*seriesKeyBytes]byte
	times64  []int64   // the series being read
	values64 []float64 // the series being read
}

func (r *reader) errorf(format string, args ...any) error {
	where := fmt.Sprintf("at byte %d", r.off)
	if r.record >= 0 {
		where = fmt.Sprintf("series %d, byte %d", r.record, r.off)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, where, fmt.Sprintf(format, args...))
}

func (r *reader) left() int { return len(r.b) - r.off }

// uvarint reads a minimal uvarint: a last byte of 0 after others would be a redundant one.
func (r *reader) uvarint(what string) (uint64, error) {
	x, k := binary.Uvarint(r.b[r.off:])
	switch {
	case k == 0:
		return 0, r.errorf("%s: truncated", what)
	case k < 0:
		return 0, r.errorf("%s: uvarint overflows 64 bits", what)
	case k > 1 && r.b[r.off+k-1] == 0:
		return 0, r.errorf("%s: uvarint not minimal", what)
	}
	r.off += k
	return x, nil
}

// series reads the next series into the reader's scratch slices, passes it to each if
// want keeps it, and returns the time of its first point.
func (r *reader) series(base int64, each func(key []byte, times []int64, values []float64)) (first int64, err error) {
	key, err := r.key()
	if err != nil {
		return 0, err
	}
	n, err := r.uvarint("the point count")
	if err != nil {
		return 0, err
	}
	// Each point takes at least a byte of time and a byte of value: a bound on n checked
	// before any allocation.
	if n == 0 || n > uint64(r.left()/2) {
		return 0, r.errorf("%d points in %d bytes", n, r.left())
	}
	if r.times64, err = r.times(base, int(n), r.times64); err != nil {
		return 0, err
	}
	if r.values64, err = r.values(int(n), r.values64); err != nil {
		return 0, err
	}
	if r.want == nil || r.want[string(key)] {
		each(key, r.times64, r.values64)
	}
	return r.times64[0], nil
}

// key reads a series' key. It returns it in r.keyBuf or in r.b: valid until the next call.
func (r *reader) key() ([]byte, error) {
	if r.left() < 1 {
		return nil, r.errorf("key tag: truncated")
	}
	tag := r.b[r.off]
	r.off++
	switch tag {
	case tagSeriesKey:
		if r.left() < seriesKeyBytes {
			return nil, r.errorf("series key: truncated")
		}
		r.keyBuf[0] = 'l'
		hex.Encode(r.keyBuf[1:], r.b[r.off:r.off+seriesKeyBytes])
		r.off += seriesKeyBytes
		return r.keyBuf[:], nil
	case tagRaw:
		n, err := r.uvarint("the key length")
		if err != nil {
			return nil, err
		}
		if n == 0 || n > uint64(r.left()) {
			return nil, r.errorf("a key of %d bytes in %d", n, r.left())
		}
		key := r.b[r.off : r.off+int(n)]
		if isSeriesKey(key) {
			return nil, r.errorf("series key %s under tag %d, not %d", key, tagRaw, tagSeriesKey)
		}
		r.off += int(n)
		return key, nil
	default:
		return nil, r.errorf("unknown key tag %d", tag)
	}
}

// times reads the first time's distance to base, then n-1 deltas of at least 1, none past
// math.MaxInt64.
func (r *reader) times(base int64, n int, times []int64) ([]int64, error) {
	times = slices.Grow(times[:0], n)[:n]
	prev := base
	for j := range times {
		d, err := r.uvarint("a time")
		if err != nil {
			return nil, err
		}
		if j > 0 && d == 0 {
			return nil, r.errorf("time %d repeats the one before", j)
		}
		// Exact modulo 2^64: math.MaxInt64 - prev is in [0, 2^64-1].
		if room := uint64(math.MaxInt64) - uint64(prev); d > room {
			return nil, r.errorf("time %d: %d + %d overflows int64", j, prev, d)
		}
		prev = int64(uint64(prev) + d)
		times[j] = prev
	}
	return times, nil
}

func (r *reader) values(n int, values []float64) ([]float64, error) {
	values = slices.Grow(values[:0], n)[:n]
	for j := range values {
		u, err := r.uvarint("a value")
		if err != nil {
			return nil, err
		}
		switch {
		case u&1 == 0:
			i := unzigzag(u >> 1)
			if i < -maxShort || i > maxShort {
				return nil, r.errorf("value %d: short integer %d beyond 2^53", j, i)
			}
			values[j] = float64(i)
		case u == longValue:
			if r.left() < 8 {
				return nil, r.errorf("value %d: truncated", j)
			}
			v := math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.off:]))
			if _, ok := shortValue(v); ok {
				return nil, r.errorf("value %d: %v in the 8-byte form, which the short form holds", j, v)
			}
			r.off += 8
			values[j] = v
		default:
			return nil, r.errorf("value %d: unknown form %d", j, u)
		}
	}
	return values, nil
}
