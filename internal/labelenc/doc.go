// Package labelenc is the binary encoding of a label set (a series' names and values, as
// Prometheus has them): what the tsdb catalog and index store, and what a series key hashes.
//
// The format, its version and a worked example are in docs/format.md ("Label sets"). A set
// has exactly one encoding, and [Decode] accepts nothing else: series keys depend on it, so
// it never changes.
package labelenc
