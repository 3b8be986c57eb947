// Package sketchenc is the quantile sketch of the tsdb rollup windows and its binary
// encoding: a DDSketch (Masson, Rim and Lee, "DDSketch: a fast and fully-mergeable quantile
// sketch with relative-error guarantees", VLDB 2019) as DataDog's
// github.com/DataDog/sketches-go/ddsketch builds it: its logarithmic index mapping (gamma =
// (1+a)/(1-a), index offset 0) over an unbounded sparse store, stored in DDSketch's own binary
// encoding after a version byte.
//
// Only that module's encoding package is imported: its mapping and store packages import its
// protobuf messages, hence google.golang.org/protobuf, into every binary. The mapping is
// restated here, formula for formula; the tests check it against mapping.LogarithmicMapping,
// and that ddsketch.DecodeDDSketch reads what [Sketch.Append] writes.
//
// Counts are exact integers, so merging is exact: bins add. A sketch holds no NaN.
//
// The byte format, its version and a worked example are in docs/format.md ("Sketch"):
// stored sketches are read by every later version, so it never changes. [Decode] accepts
// exactly what [Sketch.Append] writes: whatever decodes re-encodes to the same bytes.
package sketchenc
