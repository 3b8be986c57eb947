package bitcode

import (
	"encoding/binary"
	"math/bits"
)

// Writer appends bits to a byte slice, most significant bit first.
// Its zero value writes into a new buffer.
type Writer struct {
	buf []byte
	acc uint64 // pending bits, right-aligned
	n   uint   // number of pending bits in acc, 0..63
}

// WriteBits writes the low nb bits of v (nb <= 64). Bits of v above nb must be zero.
// NewWriter returns a Writer that appends to dst.
func NewWriter(dst []byte) Writer { return Writer{buf: dst} }

func (w *Writer) WriteBits(v uint64, nb uint) {
	free := 64 - w.n
	if nb < free {
		w.acc = w.acc<<nb | v
		w.n += nb
		return
	}
	// Fill the accumulator with the top `free` bits of v, flush it whole, keep the rest.
	rest := nb - free
	w.acc = w.acc<<free | v>>rest // free == 64 only when n == 0, then the shift clears acc
	w.buf = binary.BigEndian.AppendUint64(w.buf, w.acc)
	w.acc = v & LowMask(rest)
	w.n = rest
}

// Finish pads the pending bits with zeros to a byte boundary, flushes them and returns the
// buffer.
func (w *Writer) Finish() []byte {
	pad := (8 - w.n%8) % 8
	acc := w.acc << pad
	for nb := w.n + pad; nb > 0; nb -= 8 {
		w.buf = append(w.buf, byte(acc>>(nb-8)))
	}
	w.acc, w.n = 0, 0
	return w.buf
}

// LowMask returns a mask of the low n bits (n <= 64).
func LowMask(n uint) uint64 {
	if n >= 64 {
		return ^uint64(0)
	}
	return 1<<n - 1
}

// Reader reads bits most significant first. Reading past the end sets an error flag instead
// of panicking; the caller checks Err before trusting anything it read.
type Reader struct {
	src []byte
	pos int    // next byte of src to load into acc
	acc uint64 // the next n bits, left-aligned; the bits below them are zero
	n   uint
	err bool
}

// refill loads whole bytes into acc until it holds at least 57 bits or src is exhausted.
// NewReader returns a Reader of src.
func NewReader(src []byte) Reader { return Reader{src: src} }

// Err reports whether a read went past the end of the input (or a code was invalid): what
// was read since is zeros and must not be trusted.
func (r *Reader) Err() bool { return r.err }

func (r *Reader) refill() {
	if r.pos+8 <= len(r.src) {
		v := binary.BigEndian.Uint64(r.src[r.pos:])
		adv := (64 - r.n) >> 3
		r.acc |= v >> r.n
		r.n += adv * 8
		r.acc &^= ^uint64(0) >> r.n // drop the part of a byte that did not fit
		r.pos += int(adv)
		return
	}
	for r.n <= 56 && r.pos < len(r.src) {
		r.acc |= uint64(r.src[r.pos]) << (56 - r.n)
		r.pos++
		r.n += 8
	}
}

// ReadBits reads nb <= 56 bits.
func (r *Reader) ReadBits(nb uint) uint64 {
	if nb == 0 {
		return 0
	}
	if r.n < nb {
		r.refill()
		if r.n < nb {
			r.Fail()
			return 0
		}
	}
	v := r.acc >> (64 - nb)
	r.acc <<= nb
	r.n -= nb
	return v
}

// ReadLong reads nb <= 64 bits.
func (r *Reader) ReadLong(nb uint) uint64 {
	if nb <= 56 {
		return r.ReadBits(nb)
	}
	hi := r.ReadBits(nb - 32)
	return hi<<32 | r.ReadBits(32)
}

// readOnes counts leading one bits, stopping at limit: it consumes the ones and, when fewer
// than limit, the zero that ends them. It returns limit when limit ones were read.
func (r *Reader) readOnes(limit uint) uint {
	if r.n <= limit {
		r.refill()
	}
	// The bits below the valid ones are zero, so the count stops at n at the latest.
	ones := uint(bits.LeadingZeros64(^r.acc))
	if ones >= limit {
		r.skip(limit)
		return limit
	}
	if ones == r.n { // no terminating zero before the end of the input
		r.Fail()
		return 0
	}
	r.skip(ones + 1)
	return ones
}

// skip consumes nb <= n bits already in acc.
func (r *Reader) skip(nb uint) {
	r.acc <<= nb
	r.n -= nb
}

// Fail marks the input bad, as reading past its end does: Err reports true from now on and
// reads return zeros. Callers use it when a code they read is invalid.
func (r *Reader) Fail() {
	r.err = true
	r.acc, r.n, r.pos = 0, 0, len(r.src)
}

// AtCleanEnd reports whether every input byte was consumed except zero padding bits of the
// last one.
func (r *Reader) AtCleanEnd() bool {
	return !r.err && r.pos == len(r.src) && r.n < 8 && r.acc == 0
}

// WriteN writes any z as u(7) L = bitlen(z), 0 to 64, then the L-1 low bits of z (its top
// bit is implied): the code of a value with no prediction, such as a bucket's first count.
func (w *Writer) WriteN(z uint64) {
	l := uint(bits.Len64(z))
	w.WriteBits(uint64(l), 7)
	if l > 1 {
		w.WriteBits(z&LowMask(l-1), l-1)
	}
}

// ReadN reads a WriteN code; false for a length over 64.
func (r *Reader) ReadN() (uint64, bool) {
	l := uint(r.ReadBits(7))
	switch {
	case l > 64:
		return 0, false
	case l == 0:
		return 0, true
	}
	return 1<<(l-1) | r.ReadLong(l-1), true
}

// Remaining is the number of bits not yet read.
func (r *Reader) Remaining() uint64 {
	return 8*uint64(len(r.src)-r.pos) + uint64(r.n)
}
