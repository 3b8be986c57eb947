// Package tablets stores time series in Azure Table Storage.
//
// The root package is the small portable API: [Point], the [Store] interface, the sentinel
// errors and [WriteError]. Two packages implement Store with different key layouts:
//
//   - basic: one entity per point. PartitionKey = series, RowKey = fixed-width timestamp.
//   - advanced: many points per entity. PartitionKey = series + partition start,
//     RowKey = row start, one property per occupied slot of the row.
//
// Both take an *aztables.Client the caller built, so every authentication method the Azure
// SDK supports works, and both respect Azure's real limits (15 comparisons per filter,
// 252 properties per entity, 100 operations and one partition per batch) even where the
// Azurite emulator is looser.
package tablets
