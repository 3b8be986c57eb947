// Package api serves the Prometheus HTTP query API (the /api/v1 endpoints Grafana's
// Prometheus data source uses) over any storage.Queryable.
//
// PromQL is evaluated by Prometheus' own engine used as a library, so query semantics
// (lookback, staleness, extrapolation in rate, histogram_quantile, ...) are exactly
// Prometheus'. The engine passes storage.SelectHints (Start, End, Step, Range, Func,
// Grouping) to Queryable.Select, which lets the storage behind this package pick
// pre-aggregated rollup tiers for range queries.
//
// The HTTP layer (parameter parsing, the JSON envelope and value encoding, error types and
// status codes) is a re-implementation of Prometheus' web/api/v1, because that package
// drags in scraping, rules, remote write and the TSDB. Formats follow Prometheus v3.5:
//
//	{"status":"success","data":{"resultType":"matrix","result":[
//	    {"metric":{"__name__":"up"},"values":[[1700000000.123,"1.5"]]}]},
//	 "warnings":["..."],"infos":["..."]}
//	{"status":"error","errorType":"bad_data","error":"..."}
//
// Native histograms are rendered as Prometheus renders them: "histogram" (a vector's
// sample) and "histograms" (a matrix's series, beside its "values"), each an object of
// "count", "sum" and the non-empty "buckets" as [boundaries, lower, upper, count] with
// boundaries 0 (upper inclusive), 1 (lower inclusive), 2 (neither) or 3 (both), every
// number a string as a float sample's value.
//
// Error types map to HTTP statuses as in Prometheus: bad_data 400, execution 422,
// canceled 499, timeout 503, internal 500, not_found 404; unavailable is sent as 503.
// Storage errors that wrap tablets.ErrInvalidOptions, ErrInvalidLabels, ErrInvalidMatcher or
// ErrInvalidLimit are reported as bad_data, because they mean the request asked for
// something the store cannot do.
//
// Limits (Options), with Prometheus' defaults and answers:
//
//	MaxSamples          50,000,000  422 execution, "query processing would load too many
//	                                samples into memory in query execution"
//	Timeout             2m          503 timeout (the request's timeout parameter may
//	                                shorten it)
//	MaxConcurrency      20          further queries wait for a slot; one still waiting at its
//	                                timeout: 503 timeout, "query timed out in query queue"
//	MaxSeriesPerSelect  no limit    422 execution, ErrTooManySeries (Prometheus has none)
//
// A request that fails because the account is unavailable (unreachable, throttled, 5xx)
// is tried again after Options.RetryPause (1s), the pause doubling up to 8s, while its
// timeout leaves time for another try; every try reads afresh and shares the request's
// deadline. A short outage then delays the answers instead of failing them.
//
// With Options.ResultsCache, and a Queryable that is a Marker (takes read marks of its
// database), the answers of range queries are kept by step: a refreshed panel has the engine
// compute only the steps it lacks and the fresh ones (after now - ResultsFreshness), and a
// kept step is used only while a read mark holds it (results.go, docs/results.md).
//
// Responses are gzip-compressed when the client accepts it (Grafana does) and the body is
// at least 1 KiB. An error message never carries a secret of the storage account: SAS
// signatures (sig=), account keys and Shared Key signatures are replaced by REDACTED.
package api
