// Package tablets stores time series in Azure Table Storage.
//
// The root package is the small portable API: [Point], the [Store] interface, the sentinel
// errors and [WriteError]. Three packages implement Store with different key layouts, all on
// one engine:
//
//   - basic: one entity per point. PartitionKey = series, RowKey = fixed-width timestamp.
//   - advanced: many points per entity. PartitionKey = series + partition start,
//     RowKey = row start, one property per occupied slot of the row.
//   - chunked: compressed chunks of points with exact timestamps. PartitionKey = series +
//     partition start, RowKey = first time, write priority and a hash of the chunk.
//
// Package writer buffers points added one at a time across many series and writes them to
// any Store in the background.
//
// Package tsdb is a database over many tables: raw tables per period, retention by
// dropping tables; *tsdb.DB implements Store too.
//
// The stores take an *aztables.Client the caller built, so every authentication method the
// Azure SDK supports works, and they respect Azure's real limits (15 comparisons per filter,
// 252 properties per entity, 100 operations and one partition per batch) even where the
// Azurite emulator is looser.
package tablets
