package chunkenc

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/seed71701133/tablets/internal/bitcode"
)

// header is a parsed and checked chunk header.
type header struct {
	count       int
	first, last uint64
	mode        byte
	body        []byte // the bit stream
}

func (h header) values() uint     { return uint(h.mode & 3) }
func (h header) exp() uint        { return uint(h.mode >> modeExpShift) }
func (h header) timeOrder2() bool { return h.mode&modeTimeOrder != 0 }

// Header returns the point count and the first and last time of a chunk without decoding
// its points. It checks the header (see doc.go), not the points: Decode can still fail.
// An empty chunk has count 0 and times 0.
func Header(src []byte) (count int, first, last uint64, err error) {
	h, err := parseHeader(src)
	return h.count, h.first, h.last, err
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

func parseHeader(src []byte) (header, error) {
	var h header
	if len(src) < 3 {
		return h, corrupt("%d bytes, shorter than any chunk", len(src))
	}
	if src[0] != Version {
		return h, fmt.Errorf("%w %d", ErrVersion, src[0])
	}
	h.mode = src[1]
	if err := h.checkMode(); err != nil {
		return h, err
	}
	rest := src[2:]
	count, rest, err := uvarint(rest, "count")
	if err != nil {
		return h, err
	}
	if count == 0 {
		if h.mode != 0 || len(rest) != 0 {
			return h, corrupt("empty chunk with mode %#x and %d more bytes", h.mode, len(rest))
		}
		return h, nil
	}
	if h.first, rest, err = uvarint(rest, "first time"); err != nil {
		return h, err
	}
	span, rest, err := uvarint(rest, "time span")
	if err != nil {
		return h, err
	}
	if span > math.MaxUint64-h.first {
		return h, corrupt("last time overflows: first %d + span %d", h.first, span)
	}
	if span < count-1 || (count == 1 && span != 0) {
		return h, corrupt("%d strictly increasing times cannot span %d", count, span)
	}
	// Each point after the first costs at least 2 bits; this bounds count by the input size
	// before anyone trusts it.
	firstBits := uint64(64)
	if h.values() != valuesXOR {
		firstBits = 6
	}
	if avail := 8 * uint64(len(rest)); avail < firstBits || (count-1) > (avail-firstBits)/2 {
		return h, corrupt("%d points cannot fit in %d bytes", count, len(rest))
	}
	h.count, h.last, h.body = int(count), h.first+span, rest
	return h, nil
}

func (h header) checkMode() error {
	switch {
	case h.values() >= valueCodings:
		return corrupt("reserved value coding in mode %#x", h.mode)
	case h.exp() > bitcode.MaxExp:
		return corrupt("decimal exponent %d > %d", h.exp(), bitcode.MaxExp)
	case h.values() == valuesXOR && h.exp() != 0:
		return corrupt("exponent %d with XOR values", h.exp())
	}
	return nil
}

func uvarint(b []byte, what string) (uint64, []byte, error) {
	x, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, corrupt("bad %s varint", what)
	}
	return x, b[n:], nil
}

// Decode calls yield for each point of the chunk in time order.
//
// It never panics, whatever src holds, and returns an error (wrapping ErrCorrupt or
// ErrVersion) for anything but a well-formed chunk: truncation, trailing bytes, nonzero
// padding, times that do not strictly increase, overflow uint64 or end elsewhere than the
// header says. Errors in the bit stream are found as it is read, so yield may already have
// been called for some points: on error, discard what yield received.
func Decode(src []byte, yield func(t uint64, v float64)) error {
	h, err := parseHeader(src)
	if err != nil || h.count == 0 {
		return err
	}
	r := bitcode.NewReader(h.body)
	tc := bitcode.NewTimeCoder(h.timeOrder2(), h.count, h.first, h.last)
	t := h.first
	if h.values() == valuesXOR {
		xs := bitcode.XORState{Prev: r.ReadLong(64)}
		if r.Err() {
			return corrupt("truncated first value")
		}
		yield(t, math.Float64frombits(xs.Prev))
		for i := 1; i < h.count; i++ {
			if t, err = nextTime(&r, &tc, t, h.last); err != nil {
				return err
			}
			v, ok := xs.Read(&r)
			if err := pointErr(&r, ok, i); err != nil {
				return err
			}
			yield(t, v)
		}
	} else {
		dc := bitcode.NewDecimalCoder(h.exp(), h.values() == valuesDelta2)
		v, ok := dc.ReadFirst(&r)
		if err := pointErr(&r, ok, 0); err != nil {
			return err
		}
		yield(t, v)
		for i := 1; i < h.count; i++ {
			if t, err = nextTime(&r, &tc, t, h.last); err != nil {
				return err
			}
			v, ok := dc.ReadNext(&r)
			if err := pointErr(&r, ok, i); err != nil {
				return err
			}
			yield(t, v)
		}
	}
	if t != h.last {
		return corrupt("last time %d, header says %d", t, h.last)
	}
	if !r.AtCleanEnd() {
		return corrupt("trailing bits or bytes after %d points", h.count)
	}
	return nil
}

// nextTime reads the next delta and checks the time it gives.
func nextTime(r *bitcode.Reader, tc *bitcode.TimeCoder, prev, last uint64) (uint64, error) {
	delta := tc.Read(r)
	switch {
	case r.Err():
		return 0, corrupt("truncated time")
	case delta == 0 || delta > last-prev:
		return 0, corrupt("time delta %d after %d: not increasing or past the last time %d", delta, prev, last)
	}
	return prev + delta, nil
}

func pointErr(r *bitcode.Reader, ok bool, i int) error {
	switch {
	case r.Err():
		return corrupt("truncated value %d", i)
	case !ok:
		return corrupt("bad value code %d", i)
	}
	return nil
}
