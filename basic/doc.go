// Package basic is the one-entity-per-point layout of tablets.Store.
//
// An entity per point: PartitionKey the series, RowKey the point's time as a fixed-width
// count of resolution units since the Unix epoch, so a time range is a RowKey range, and the
// value in a property; specified, with an example, in docs/format.md ("Layout basic").
//
// A write packs points into transactions of at most 100 upserts (and under 4 MiB) sent with
// bounded concurrency; a query is one range filter, paged 1,000 entities at a time. It is
// simple and readable with any Table tool, and it is the baseline the advanced layout beats.
package basic
