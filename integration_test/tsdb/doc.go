// Package tsdb holds the integration tests of the tsdb database on Azurite: the conformance
// suite on its raw tables and its staging table, writes, staging and folding, labels, the
// table cache, rollup into tiers and reads from them, seals, compaction, progress, retention,
// histograms (their storage, staging and tiers, and their bytes against Prometheus' chunks),
// the cost of maintenance and of Latest, regressions (defect_test.go), and the staging
// benchmarks. The tests are in _test.go files; this package has no code. (tsdb's own tests,
// those that need its unexported parts, are in tsdb itself.)
package tsdb
