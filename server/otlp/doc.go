// Package otlp serves OpenTelemetry metrics over OTLP/HTTP (POST /api/v1/otlp/v1/metrics,
// Handler): it translates them as Prometheus 3 does by default and stores the result through
// the remote-write path (remote.WriteHandler.WriteTimeSeries), so an OTLP point and a remote
// write of the same sample are stored alike.
//
// # Request
//
// The body is an ExportMetricsServiceRequest, protobuf (Content-Type application/x-protobuf)
// or OTLP's JSON (application/json), plain or gzip-compressed (Content-Encoding: gzip, which
// the SDK exporters send). It is at most Options.MaxBodyBytes, compressed and decompressed.
//
// # Translation
//
// Prometheus' own translator (storage/remote/otlptranslator/prometheusremotewrite) with the
// settings of Prometheus 3's default OTLP configuration, translation strategy
// UnderscoreEscapingWithSuffixes:
//   - metric and label names escaped to [a-zA-Z0-9_], with unit and type suffixes
//     (a monotonic sum "http.requests" becomes http_requests_total, a gauge "memory" of unit
//     "By" memory_bytes);
//   - service.namespace/service.name become job ("namespace/name"), service.instance.id
//     instance; the other resource attributes become the labels of a target_info series
//     (value 1, at the latest timestamp of the resource's points);
//   - gauges and non-monotonic sums become gauges, monotonic sums counters, exponential
//     histograms native histograms (scales above 8 merged down to 8), explicit-bucket
//     histograms classic _bucket/_sum/_count series (or custom-bucket native histograms with
//     Options.ConvertHistogramsToNHCB, Prometheus' convert_histograms_to_nhcb), summaries
//     _sum/_count and quantile series;
//   - a point flagged "no recorded value" becomes a staleness marker; exemplars, metadata
//     and start times are dropped, as remote write drops exemplars and metadata.
//
// Prometheus 3 stores cumulative temporality only, and so does this endpoint: a request
// holding a delta (or unspecified) sum or histogram is answered 400 naming the metric, and
// nothing of it is stored, as for anything else the translator cannot convert (an
// exponential scale below -4, a metric or point without a type or value). A metric without
// data points is skipped with a warning in the answer.
//
// # Answer
//
// Per the OTLP/HTTP specification, in the request's encoding (protobuf or JSON):
//
//	status  when                                                            the exporter
//	200     every point stored: an ExportMetricsServiceResponse; its        done
//	        partial_success counts the samples refused as bad input (an
//	        invalid histogram, a sample older than the retention) while
//	        the others were stored, with the reason naming the series, or
//	        carries warnings with rejected_data_points 0
//	400     malformed body (gzip, protobuf, JSON), what cannot be           drops the request
//	        translated (delta temporality, ...), or every sample refused
//	        as bad input
//	405     not POST                                                        drops it
//	413     body over MaxBodyBytes, or more samples than the server takes   drops it
//	        in flight
//	415     Content-Type other than protobuf or JSON, Content-Encoding      drops it
//	        other than gzip
//	503     storage failed in a way a retry can fix (the account down or    retries with backoff
//	        throttling, an error of unknown kind)
//	429/503 over the tenant's ingestion rate (the server's                  retries after
//	        rate_limited_status), with Retry-After                          Retry-After
//
// A failure's body is a google.rpc.Status whose message says why. Retryable failures are 503
// and never 500: OTLP exporters retry 429, 502, 503 and 504 only, and a write of unknown
// outcome is retried rather than lost (writes are idempotent); only the tenant's ingestion
// rate answers 429, when the server is configured so. The other limits of the tenant
// (series per request, label count and lengths) answer as bad input does, see
// docs/limits.md. rejected_data_points
// counts Prometheus samples (a float sample or a histogram), not OTLP points: an
// explicit-bucket histogram point makes several samples.
package otlp
