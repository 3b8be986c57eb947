// Package chunkenc is a compressed codec for chunks of time series points: strictly
// increasing uint64 times (counts of resolution units since the Unix epoch) and float64
// values that round-trip bit for bit (-0, subnormals, ±Inf, NaN payloads included).
//
// It is the storage format of the chunked layout, whose chunks live in Azure Table
// Edm.Binary properties (64 KiB at most, base64 on the wire): [AppendLimit] cuts a chunk to
// fit one. Stored chunks are read by every later version, so the format is fixed; changing it
// means a new [Version].
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
// # Format
//
// The format, version 1, is specified byte for byte in docs/format.md ("Chunks"), with a
// worked example that TestFormatDoc checks against the document. [Decode]'s errors wrap
// [ErrVersion] or [ErrCorrupt] for what the document says a reader rejects.
package chunkenc
