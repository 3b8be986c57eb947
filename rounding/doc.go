// Package rounding buckets times and formats them as fixed-width keys.
//
// Every key this library writes is a count of resolution units since the Unix epoch,
// zero-padded to a fixed width, so that byte order equals time order and a range of times
// is a range of keys. Times before 1970 or after 9999 are rejected, never wrapped: they
// would sort wrongly.
package rounding
