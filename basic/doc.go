// Package basic is the one-entity-per-point layout of tablets.Store.
//
// PartitionKey = the series name; RowKey = the point's time as a fixed-width count of
// resolution units since the Unix epoch (package rounding), so a time range is a RowKey
// range; the value is one Edm.Double property "V".
//
// A write packs points into transactions of at most 100 upserts (and under 4 MiB) sent with
// bounded concurrency; a query is one range filter, paged 1,000 entities at a time. It is
// simple and readable with any Table tool, and it is the baseline the advanced layout beats.
package basic
