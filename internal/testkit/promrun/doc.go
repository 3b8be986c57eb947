// Package promrun installs and runs a real Prometheus (Debian's 2.42 build) and promtool for
// tests of the remote-storage server: Prometheus remote-writes to it and remote-reads from it,
// and tests query Prometheus's HTTP API or run `promtool query range`. [Start] and [Need]
// import the testing package, so only tests and test helpers (and the install command) should
// import this package.
// It is part of the test kit (internal/testkit).
//
// # Install
//
// [Install] looks for usr/bin/prometheus and usr/bin/promtool under $TABLETS_PROMETHEUS_DIR
// if set, else under os.UserCacheDir()/tablets/prometheus-2.42 (~/.cache/tablets/prometheus-2.42
// on Linux), and checks that `prometheus --version` starts with [VersionPrefix]. If they are
// missing it picks the newest 2.42 version of the prometheus package that apt knows
// (`apt-cache madison prometheus`), downloads it with `apt-get download prometheus=<version>`
// (19 MB; no root needed, but apt's package lists must be present: `apt-get update`) and
// unpacks it with `dpkg -x` (96 MB) into that directory. Concurrent installs (go test ./...
// runs several test binaries at once) are serialized with a file lock in that directory, and
// the unpacked tree is moved into place only when complete. CI installs it once, before the
// tests, with
//
//	go run ./internal/testkit/promrun/cmd/promrun-install
//
// which prints the directory.
//
// # Run
//
// [Start] (or [StartServer] outside tests) writes a prometheus.yml from a [Config] (scrape
// jobs, among them optionally Prometheus itself; remote_write endpoints with a queue tuned
// for tests, sending within 1 s and retrying after 100 ms to 1 s; remote_read endpoints with
// read_recent: true), starts Prometheus on a free port of 127.0.0.1 with its TSDB in a
// temporary directory, waits until it is ready and stops it (SIGTERM, then SIGKILL) when the
// test ends. Its output goes to a log file, whose end is logged if the test fails.
//
// Prometheus 2.42 speaks remote write 1.0 only, and applies scrape targets about 5 s after it
// starts: [Prometheus.WaitFor] waits for a query to return data.
//
// [Prometheus.QueryRange], [Prometheus.Query], [Prometheus.Series], [Prometheus.LabelValues]
// and [Prometheus.LabelNames] call its HTTP API. Prometheus reports a failed remote read as a
// warning, not an error, so they return an answer that carries warnings together with a
// *[WarningsError]. [Binaries.PromtoolQueryRange] runs `promtool query range -o json` against
// any server.
package promrun
