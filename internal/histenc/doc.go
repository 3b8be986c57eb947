// Package histenc is the codec of histogram chunks: native histogram samples (integer and
// float, every schema, custom bounds) at strictly increasing uint64 times, stored exactly.
// It is the storage format of tsdb's histogram tables, whose chunks live in Azure Table
// Edm.Binary properties (64 KiB at most): [AppendLimit] cuts a chunk to fit one. Stored
// chunks are read by every later version, so the format is fixed; changing it means a new
// [Version].
//
// Everything round-trips bit for bit: counter reset hints, schemas, zero thresholds, spans
// as given, custom bounds, integer counts (the bucket deltas as given) and float counts,
// sums (-0, ±Inf and NaN payloads such as Prometheus' staleness marker included). The one
// thing not kept is the difference between an empty and a nil slice: empty spans, buckets
// and bounds decode as nil. A chunk may mix integer and float samples.
//
// It compresses as Prometheus' histogram chunks do and further, reusing internal/chunkenc's
// codes (shared with it in internal/bitcode):
//
//   - The layout (schema, zero threshold, spans, custom bounds) and the counter reset hint
//     are written with the first sample and then only when they change; otherwise a sample
//     spends one bit on them.
//   - Integer bucket counts are made absolute and each predicted as its last count plus the
//     mean of its recent deltas; the residuals are written with an adaptive Golomb-Rice code
//     whose parameter each bucket keeps for itself, so quiet tail buckets cost about a bit
//     and busy ones about the entropy of their noise. A bucket keeps its state across a layout change
//     when it keeps its index. Count is written as its difference to the buckets' total:
//     mostly one bit.
//   - Float counts are coded the same way when they are all decimals (scaled integers), and
//     otherwise XORed with the previous value of the same bucket, as Gorilla does.
//   - Times and sums are coded as chunkenc codes times and values: times predicted from the
//     mean or the previous delta; sums XORed or, when decimal, delta coded.
//
// # Format
//
// The format, version 1, is specified byte for byte in docs/format.md ("Histogram chunks"),
// with a worked example that TestFormatDoc checks against the document. [Decode]'s errors
// wrap [ErrVersion] or [ErrCorrupt] for what the document says a reader rejects.
package histenc
