// Package promqlsuite holds no code: its tests run Prometheus' own PromQL test suite
// (promql/promqltest) over tablets serve's write and read paths (TestPromQLSuite), in a
// package of their own so that `go test ./...` runs them beside the server package's tests
// rather than after them.
package promqlsuite
