// Command tablets writes, reads, plots and benchmarks time series stored in Azure Table
// Storage with the tablets library.
//
// Start with
//
//	go run ./cmd/tablets demo
//
// which starts a local Azurite (installing the pinned npm package the first time), writes a
// day of one series at 1 Hz with each store layout, reads it back and prints what each
// layout cost in requests, entities, bytes and time.
//
// The other subcommands work on a real account (or any Azurite) named by a connection
// string (--connection-string or $AZURE_TABLES_CONNECTION_STRING) or by an account URL with
// Azure AD credentials (--account-url or $AZURE_TABLES_ACCOUNT_URL; DefaultAzureCredential):
//
//	tablets write  --table T --series S --file data.csv      import CSV or JSON lines
//	tablets query  --table T --series S1,S2 --from -2h       print points (table, csv, json)
//	tablets query  --table T --series S --step 1m --agg p99  downsampled
//	tablets plot   --table T --series S --from -24h --out chart.png
//	tablets latest --table T --series S -n 10
//	tablets delete --table T --series S --from ... --to ...
//
// A --db database (tsdb: a raw table per period) also keeps series named by label sets, as
// Prometheus does, and finds them by Prometheus selectors:
//
//	tablets write  --db D --labels 'up{job="api",instance="a"}' --file up.csv
//	tablets series --db D 'up{job="api"}'                    the matching series and their keys
//	tablets labels --db D [job] [--match 'up']               label names, or a label's values
//	tablets query  --db D 'http_requests_total{code=~"5.."}' --from -1h  (native histograms too)
//	tablets plot   --db D 'up{job=~"api|web"}' --out up.png
//	tablets plot   --db D 'rpc_duration_seconds' --out q.png  native histograms: p50, p90, p99
//	tablets maintain --db D                                  fold, compact, roll up, retain: once, now
//
// Every subcommand has --help. On an error the command prints one line to stderr and exits
// with status 1 (2 for a usage error, 130 when interrupted).
package main
