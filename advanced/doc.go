// Package advanced is the many-points-per-entity layout of tablets.Store.
//
// Times are counted in Resolution units from the Unix epoch and bucketed twice: a partition
// per PartitionFactor of a series, a row (an entity) per RowFactor, and a property per point
// ("v" + its offset in the row). The keys and properties are specified, with an example, in
// docs/format.md ("Layout advanced"). With the defaults (PartitionFactor 1h, RowFactor 4m,
// Resolution 1s) a row holds up to 240 points and a partition 15 rows, so a day at 1 Hz is
// 360 entities in 24 partitions. The series is escaped in the PartitionKey so that no
// series' keys fall inside another series' key ranges.
//
// Writes merge (upsert-merge) one row per entity: writers adding different slots to the same
// row both keep theirs, and no write reads first. A query is one filter of at most six
// comparisons whatever its length: the partitions wholly inside the range as one
// PartitionKey range, and the partial partitions at either edge with a RowKey range.
package advanced
