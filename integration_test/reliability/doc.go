// Package reliability holds the reliability tests of the store layouts on Azurite: the
// conformance suite under injected faults (503s, lost replies, latency), write errors that
// name the failed points, batch error indexes, cancellation, concurrent writers and
// malformed replies; and tsdb's Rollup through lost replies, beside another Rollup
// (tsdb_rollup_test.go). The tests are in _test.go files; this package has no code.
package reliability
