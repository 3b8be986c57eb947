// Package chunkenc is a compressed codec for chunks of time series points: strictly
// increasing uint64 times (counts of resolution units since the Unix epoch) and float64
// values that round-trip bit for bit (-0, subnormals, ±Inf, NaN payloads included).
//
// It is the storage format of the chunked layout, whose chunks live in Azure Table
// Edm.Binary properties (64 KiB at most, base64 on the wire): [AppendLimit] cuts a chunk to
// fit one. Stored chunks are read by every later version, so the format below is fixed;
// changing it means a new [Version], and TestGolden pins the worked example.
//
// The codec starts from Gorilla (Pelkonen et al., VLDB 2015): times are predicted from the
// previous delta, values are XORed with the previous one. It goes further in three ways:
//
//   - Residuals are written with an adaptive Golomb-Rice code (as in LOCO-I / JPEG-LS)
//     instead of fixed buckets, so any resolution and any regularity costs close to its
//     entropy: a regular series one bit a time, 1 Hz ms times with ±500 ms of jitter ~11 bits.
//   - Times may instead be predicted from the chunk's mean delta, better for jitter.
//   - Values that are all decimals with at most 22 digits after the point (counters, 2-decimal
//     gauges: what metrics mostly are) are stored as the scaled integers n = v·10^e,
//     delta or delta-of-delta coded, as ALP (SIGMOD 2024) and Chimp (VLDB 2022) suggest,
//     about 7 bits for a noisy 2-decimal gauge where XOR spends 51. Other chunks use XOR.
//
// The writer tries every option and keeps the smallest; the reader needs no choice of its own.
//
// # Format, version 1
//
// A chunk is a header of whole bytes followed by a bit stream.
//
//	offset  field    encoding
//	0       version  1 byte: 1
//	1       mode     1 byte, below
//	2       count    uvarint: the number of points
//	        first    uvarint: the first time           (absent when count is 0)
//	        span     uvarint: last time - first time    (absent when count is 0)
//	        stream   the bit stream, below, to the end of the chunk
//
// A uvarint is encoding/binary's: 7 bits a byte, least significant group first, the high
// bit set on every byte but the last, at most 10 bytes. The empty chunk (count 0) is exactly
// the 3 bytes 01 00 00.
//
// The mode byte:
//
//	bits 0-1  value coding: 0 XOR, 1 decimal with delta prediction,
//	          2 decimal with delta-of-delta prediction, 3 reserved
//	bit  2    time prediction: 0 mean delta, 1 previous delta
//	bits 3-7  decimal exponent e, 0 to 22; 0 with XOR values
//
// # Bit stream
//
// Bits fill each byte from its most significant bit (0x80) down, and every multi-bit field
// is written most significant bit first. After the last code, zero bits pad the stream to a
// whole byte; nothing follows. The stream is value 0, then for each point i = 1..count-1 the
// code of its time then the code of its value:
//
//	value_0 (time_1 value_1) (time_2 value_2) ... (time_{count-1} value_{count-1})
//
// All arithmetic on times and scaled integers is modulo 2^64, a difference taken as a
// two's complement int64. Three primitive codes build the rest:
//
//	u(w)      a w-bit unsigned integer.
//	len(x)    an integer x >= 1: b = bitlen(x)-1 as u(6), then the b low bits of x as u(b)
//	          (the top bit is implied).
//	rice(z)   an integer z >= 0 with the parameter k of an adaptive state (A, N):
//	          q = z >> k; if q < 16, q one bits, a zero bit, then the k low bits of z as
//	          u(k); otherwise (an escape) 16 one bits then len(z).
//
// Signed residuals r are zigzag-mapped first, zigzag(r) = (r << 1) xor (r >> 63) with an
// arithmetic shift: 0, -1, 1, -2, 2 ... become 0, 1, 2, 3, 4 ...
//
// Each rice stream (the times; the values of a decimal chunk) has its own state, starting at
// A = 0, N = 1. Before each code, k is the smallest k >= 0 with 2·N·2^k >= A. After it,
// A = min(A + min(z, 2^(k+4) - 1), 2^60) and N = N + 1; then if N = 64, A = floor(A/2) and
// N = 32.
//
// # Times
//
// Time 0 is first; the last time is first + span. For i >= 1, delta_i = t_i - t_{i-1} is
// coded as rice(zigzag(delta_i - p_i)) with the prediction
//
//	mean delta (mode bit 2 = 0):      p_i = D for every i
//	previous delta (mode bit 2 = 1):  p_1 = D, p_i = delta_{i-1} for i >= 2
//
// where D = floor(span / (count-1)), computed from the header.
//
// # Values, XOR coding (0)
//
// Value 0 is its IEEE 754 binary64 bits as u(64). Each later value is coded by
// x = bits(v_i) xor bits(v_{i-1}) and a window (lead, trail) of zero bits, initially unset:
//
//	0                          x = 0: the same bits as the previous value
//	10 u(64-lead-trail)        x >> trail, in the current window (an error if unset)
//	11 u(5) u(6) u(sig)        a new window: lead = u(5), sig = u(6) (0 means 64),
//	                           trail = 64 - lead - sig, then x >> trail as u(sig)
//
// The writer uses 11 with lead = min(leading zeros of x, 31) and trail = its trailing zeros,
// and 10 when x fits the window and that is not longer than a new window.
//
// # Values, decimal codings (1 and 2)
//
// Each value is v_i = n_i / 10^e for an integer n_i with |n_i| <= 2^53: the IEEE 754
// division, rounded to nearest even, of float64(n_i) (exact) by 10^e (exact for e <= 22),
// so every platform gets the same bits. Value 0 is len(zigzag(n_0) + 1). For i >= 1,
// rice(zigzag(n_i - n_{i-1} - p_i)), with p_i = 0 for coding 1 (delta) and, for coding 2
// (delta of delta), p_1 = 0 and p_i = n_{i-1} - n_{i-2}.
//
// The writer uses a decimal coding only when every value is bit-identical to n / 10^e
// (which no -0, ±Inf or NaN is), with the smallest such e, and when that is no longer than
// XOR.
//
// # What a reader rejects
//
// Decode never panics. It returns an error wrapping ErrVersion for a version other than 1,
// and one wrapping ErrCorrupt for:
//
//   - fewer than 3 bytes;
//   - value coding 3, an exponent over 22, or a nonzero exponent with XOR values;
//   - an empty chunk with a nonzero mode or more bytes;
//   - a malformed uvarint: cut short, over 10 bytes, or overflowing 64 bits;
//   - first + span over 2^64-1; span < count-1; a nonzero span for one point;
//   - a count the stream cannot hold: each point after the first has two codes of at least
//     one bit, so count-1 <= (8·len(stream) - f)/2, where f is the least value 0 takes, 64
//     bits for XOR and 6 for decimal. Header checks this too, so count is bounded by the
//     input size before anyone trusts it;
//   - a stream ending inside a code;
//   - an XOR 10 code before any 11 code; lead + sig > 64;
//   - a scaled integer outside ±2^53;
//   - a time delta of 0, a time past the last time, a last decoded time other than
//     first + span;
//   - nonzero padding bits, or any byte after the stream.
//
// Readers accept codes a writer would not produce (a uvarint with redundant 0x80 bytes, an
// escape for a small z, an XOR window wider than needed): they still decode to one value
// each.
//
// # Worked example
//
// Times 1000, 2000, 3000 and values 20.37, 20.38, 20.36 make the 11-byte chunk
//
//	01 11 03 e8 07 d0 0f 2f f5 b3 80
//
//	01        version 1
//	11        mode 0b00010_0_01: exponent 2, mean-delta times, decimal delta values
//	03        count 3
//	e8 07     first time 1000
//	d0 0f     span 2000, so D = 2000/2 = 1000
//	2f f5 b3 80, the bits:
//	  001011 11111101011  value 0: n = 2037, zigzag 4074, +1 = 4075 = 0b1_11111101011:
//	                      b = 11, then 11 bits
//	  0                   time 1: delta 1000 - D = 0; k = 0 (A = 0, N = 1)
//	  110                 value 1: n = 2038, 2038 - 2037 = 1, zigzag 2; k = 0
//	  0                   time 2: residual 0 again
//	  1110                value 2: n = 2036, -2, zigzag 3; k = 0 (A = 2, N = 2)
//	  000000              padding
package chunkenc
