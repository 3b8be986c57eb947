package bitcode

import "math/bits"

// Residuals (times and decimal values) are zigzag-mapped to unsigned integers and written
// with an adaptive Golomb-Rice code, as in LOCO-I / JPEG-LS: the parameter k follows the
// running mean of the recent residuals, so a stream of zeros costs one bit a point and noisy
// data costs about log2(mean)+1 bits, with no per-chunk tuning. docs/format.md gives the
// exact rule.
//
// The constants were tuned on the benchmark series (regular, jittered and gapped times in ms
// and ns, 2-decimal gauges, counters); the sizes move by less than 1% around them.
const (
	riceLimit     = 16      // a quotient of riceLimit or more is written as an escape
	riceLimitBits = 4       // log2(riceLimit)
	riceReset     = 64      // halve the statistics when the count reaches this
	riceSumCap    = 1 << 60 // the running sum saturates here, so N·2^k never overflows
)

// Adaptive is the state of one adaptive Rice coder: A, the sum of recent residuals (each
// capped), and N, their count plus one.
type Adaptive struct {
	a, n uint64
}

// NewAdaptive returns the state every coder starts from.
func NewAdaptive() Adaptive { return Adaptive{a: 0, n: 1} }

// k is the smallest k >= 0 with 2N·2^k >= A: a Rice parameter of about log2(mean)-1, which
// codes Laplacian and Gaussian residuals ~0.3 bits shorter than JPEG-LS' log2(mean).
func (s *Adaptive) k() uint {
	n2 := 2 * s.n
	if s.a <= n2 {
		return 0
	}
	// n2·2^k has the bit length of A for this k; one more doubling is always enough.
	k := uint(bits.Len64(s.a) - bits.Len64(n2))
	if n2<<k < s.a {
		k++
	}
	return k
}

// update adds z to the statistics. An escaped residual (z >= 2^(k+4)) counts as
// 2^(k+4)-1: one outlier, such as a gap in the times, raises k a little instead of making
// the next few hundred codes long.
func (s *Adaptive) update(z uint64, k uint) {
	z = min(z, LowMask(k+riceLimitBits))
	if z >= riceSumCap-s.a {
		s.a = riceSumCap
	} else {
		s.a += z
	}
	s.n++
	if s.n == riceReset {
		s.a >>= 1
		s.n >>= 1
	}
}

// RiceBits is the length in bits of the code of z with parameter k.
func RiceBits(z uint64, k uint) int {
	if q := z >> k; q < riceLimit {
		return int(q) + 1 + int(k)
	}
	return riceLimit + 6 + bits.Len64(z) - 1
}

// WriteRice writes z: the quotient z>>k in unary (ones ended by a zero) then the k low
// bits; or, for a quotient of riceLimit or more, riceLimit ones then z as a length-prefixed
// integer.
func (w *Writer) WriteRice(z uint64, k uint) {
	if q := z >> k; q < riceLimit {
		w.WriteBits(1<<(q+1)-2, uint(q)+1)
		w.WriteBits(z&LowMask(k), k)
		return
	}
	w.WriteBits(1<<riceLimit-1, riceLimit)
	w.WriteLen(z)
}

// ReadRice reads a WriteRice code.
func (r *Reader) ReadRice(k uint) uint64 {
	q := r.readOnes(riceLimit)
	if q < riceLimit {
		return uint64(q)<<k | r.ReadLong(k)
	}
	return r.ReadLen()
}

// WriteLen writes x >= 1 as 6 bits of b = bitlen(x)-1 followed by the b low bits of x (the
// top bit is implied).
func (w *Writer) WriteLen(x uint64) {
	b := uint(bits.Len64(x)) - 1
	w.WriteBits(uint64(b), 6)
	w.WriteBits(x&LowMask(b), b)
}

// ReadLen reads a WriteLen code.
func (r *Reader) ReadLen() uint64 {
	b := uint(r.ReadBits(6))
	return 1<<b | r.ReadLong(b)
}

// Zigzag maps 0, -1, 1, -2, ... to 0, 1, 2, 3, ...; Unzigzag undoes it.
func Zigzag(x int64) uint64   { return uint64(x<<1) ^ uint64(x>>63) }
func Unzigzag(z uint64) int64 { return int64(z>>1) ^ -int64(z&1) }

// Cost returns the bits z takes and updates the state as write would.
func (s *Adaptive) Cost(z uint64) int {
	k := s.k()
	s.update(z, k)
	return RiceBits(z, k)
}

// Write writes z with the current parameter and updates the state.
func (s *Adaptive) Write(w *Writer, z uint64) {
	k := s.k()
	w.WriteRice(z, k)
	s.update(z, k)
}

// Read reads a Write code and updates the state as Write did.
func (s *Adaptive) Read(r *Reader) uint64 {
	k := s.k()
	if r.n < 48 {
		r.refill()
	}
	z, size, ok := peekRice(r.acc, r.n, k)
	if ok {
		r.skip(size)
	} else {
		z = r.ReadRice(k)
	}
	s.update(z, k)
	return z
}

// peekRice decodes a Rice code from buffered bits alone, the common case; ok is false for
// an escape or a code not wholly buffered, which ReadRice handles.
func peekRice(acc uint64, n, k uint) (z uint64, size uint, ok bool) {
	ones := uint(bits.LeadingZeros64(^acc))
	size = ones + 1 + k
	z = uint64(ones)<<k | acc<<(ones+1)>>(64-k) // a shift by 64 gives 0, as k == 0 needs
	return z, size, ones < riceLimit && size <= n
}
