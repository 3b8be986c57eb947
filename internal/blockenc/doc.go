// Package blockenc is the entity of a tsdb rollup block: the aggregates of one series in
// consecutive windows of a tier's step (Count, Sum, Min, Max, First, Last, the times of First
// and Last, a quantile sketch each), as an Azure Table entity's JSON.
//
// Two formats: row blocks ([Block], versions 1 and 2: [Windows] windows of properties each,
// docs/format.md "Tier blocks"), read forever; and columnar blocks ([Columnar], version 3:
// up to [MaxColumnarWindows] windows, a compressed property per aggregate, so that a read
// selects only the columns it needs, "Columnar tier blocks"), which rollups write. Stored
// blocks are read by every later version, so a format never changes. Encoding and decoding
// know nothing of tables beyond the entity's bytes.
package blockenc
