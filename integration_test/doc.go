// Package integration holds, in its subpackages, the integration tests: they run against a
// real Azurite, started by the tests themselves (internal/testkit/azurite), every request
// through a transport that checks it against Azure's real limits. They are grouped by
// subject, one Go package (so one test binary, run in parallel with the others by
// `go test ./...`, each well under Go's 10-minute package timeout) a subject:
//
//   - layouts: the store layouts (basic, advanced, chunked): the conformance suite, costs,
//     each layout's own behaviour, Latest, the layouts' benchmarks;
//   - reliability: the layouts under injected faults, cancellation, concurrent writers,
//     malformed replies, and tsdb's Rollup through lost replies;
//   - writer: the buffered writer on every layout;
//   - tsdb: the database: conformance, writes, staging and folding, labels, the table cache,
//     compaction, progress, histograms, the cost of maintenance and of Latest, regressions;
//   - tiers: tsdb's rollup tiers: Rollup and its blocks, seals, tier retention, histogram
//     tiers;
//   - tiercost: what Aggregate reads of the tiers (requests and bytes, up to a year of
//     data): the tiers' subject, in a test binary of its own for the package timeout.
//
// What two of them share is in the test kit (internal/testkit/itest), not copied.
// Under `go test -short` they skip.
package integration
