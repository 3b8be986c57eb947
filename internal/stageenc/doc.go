// Package stageenc is the codec of a staging column: the points of a few series, about one
// sample each, that tsdb's ingest path stores in one Edm.Binary property of a staging
// entity before folding them into per-series chunks.
//
// A column starts with a version byte and a base time (the column's smallest time), then a
// record per series: its key (a series key of a label set in 16 bytes, any other key as
// length and bytes), its point count, its times as varint distances (the first from the base
// time) and its values, integers up to 2^53 as zigzag varints and anything else as 8 bytes of
// IEEE 754 bits. Values round-trip bit for bit (NaN payloads such as Prometheus' staleness
// marker, -0, ±Inf).
//
// Every column has exactly one encoding: [Decode] rejects anything [Append] would not write,
// so a column decoded and encoded again is the same bytes.
//
// # Format
//
// The format, version 1, is specified byte for byte in docs/format.md ("Staging columns"),
// with a worked example that TestFormatDoc checks against the document.
//
// # Size
//
// Measured (TestBytesPerSample): 2,000 series of one sample each spread over 128 columns,
// series keys of label sets, times within 15 s, values a mix of counters (up to 1,000,000),
// gauges (quarters, 4-decimal fractions), small integers and staleness markers, take 25.8
// bytes a sample: 17 of key, 1 of count, 2 of time, about 5.3 of value (1 to 3 for an
// integer, 9 for a fraction or a NaN) and 0.45 of column headers.
package stageenc
