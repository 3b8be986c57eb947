// Package blockenc is the entity of a tsdb rollup block: the aggregates of one series in
// [Windows] consecutive windows of a tier's step (Count, Sum, Min, Max, First, Last, the
// times of First and Last, a quantile sketch each), as an Azure Table entity's JSON.
//
// The properties, the format version and a worked example are in docs/format.md ("Tier
// blocks"): stored blocks are read by every later version, so the format never changes.
// Encoding and decoding know nothing of tables beyond the entity's bytes.
package blockenc
