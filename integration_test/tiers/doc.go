// Package tiers holds the integration tests of tsdb's rollup tiers on Azurite: Rollup and the
// tier blocks it writes (columnar, scans, late points, races with writes and other
// processes), seals, tier retention and histogram tiers. What Aggregate reads of the tiers
// (requests and response bytes, over up to a year of data) is measured in
// integration_test/tiercost, a test binary of its own for the package timeout. The tests are
// in _test.go files; this package has no code.
package tiers
