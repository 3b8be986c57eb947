// Package advanced is the many-points-per-entity layout of tablets.Store.
//
// Times are counted in Resolution units from the Unix epoch and bucketed twice:
//
//	PartitionKey = escaped series + "|" + partition start   (start rounded down to PartitionFactor)
//	RowKey       = row start                                 (rounded down to RowFactor)
//	property     = "v" + slot, the point's offset in the row, in Resolution units
//
// With the defaults (PartitionFactor 1h, RowFactor 4m, Resolution 1s) a row holds up to 240
// points and a partition 15 rows, so a day at 1 Hz is 360 entities in 24 partitions.
// Starts are fixed-width decimal counts of Resolution units, so with a 1s resolution they
// read as Unix seconds: series "cpu" at 2015-04-28T12:04:35Z is
// PartitionKey "cpu|001430222400", RowKey "001430222640", property "v35".
//
// In the series part of the PartitionKey, "~" is written "~~" and "|" is written "~p", so the
// separator never occurs in it: no series' keys fall inside another series' key ranges, even
// one named like another's name plus "|" and digits.
//
// Writes merge (upsert-merge) one row per entity: writers adding different slots to the same
// row both keep theirs, and no write reads first. A query is one filter of at most six
// comparisons whatever its length: the partitions wholly inside the range as one
// PartitionKey range, and the partial partitions at either edge with a RowKey range.
package advanced
