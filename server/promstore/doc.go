// Package promstore is a Prometheus storage.Queryable over a *tsdb.DB: what the PromQL engine
// and the remote-read API of `tablets serve` read through.
//
// It is a thin adapter over tsdb's Queryable and Querier (see the tsdb package
// documentation, "The Querier"): it converts Prometheus' labels, matchers and hints into
// tsdb's, and tsdb's series and samples into Prometheus' (floats into XOR chunks, a series
// with histograms into one list of samples, iterated by Prometheus' own iterators). Where
// the samples come from (the staging table, the raw tables, a rollup tier) and what that
// costs are tsdb's to decide.
//
// # Time ranges
//
// Prometheus times are int64 milliseconds and its ranges [mint, maxt] are inclusive; tsdb
// ranges are [from, to) of time.Time. A Querier reads [mint, maxt+1ms), clamped to the times
// tablets stores ([tablets.MinTime, tablets.MaxTime]). A Select with hints reads the hints'
// [Start, End] instead, as Prometheus' own TSDB does: the engine has already moved Start
// back by the range of a range selector (or the lookback delta of an instant one).
//
// # Samples
//
// Samples come back exactly: the millisecond of each sample and the float64 bits
// unchanged, Prometheus' staleness marker included. A series with histogram samples has
// its iterator return chunkenc.ValFloat, ValHistogram (integer counts) or
// ValFloatHistogram per sample, exactly as stored: counter reset hints, custom bounds,
// staleness markers (a histogram whose Sum is the stale NaN); AtFloatHistogram converts an
// integer histogram, as Prometheus' iterators do, and AtHistogram and AtFloatHistogram
// copy: the caller may change what they return. One exception, which changes no answer: in
// the engine's evaluation (engineselect), a Select of rate, increase, irate or resets whose
// windows overlap has each histogram sample's unknown counter reset hint set to what
// comparing it with the sample before it finds, as Prometheus' chunk iterators give
// NotCounterReset after a chunk's first sample (resolvingPays: the engine compared each
// sample in every window holding it, twenty times in a rate over 5m at a 15s step).
//
// hints.ShardCount and ShardIndex select the series of a shard by labels.StableHash
// (tsdb.SelectHints.Keep); hints.Func "series" returns labels only; the engine's lookback
// delta is Options.LookbackDelta.
package promstore
