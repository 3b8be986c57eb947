// Package testkit holds nothing itself: its subpackages are the test kit, the harness that
// only tests import (cmd/tablets' TestDeps checks that no binary or library package links
// any of them).
//
//   - [github.com/seed71701133/tablets/internal/testkit/clock]: the one fake clock, settable
//     and safe for concurrent use, for every Options.Now and clock func of the tests.
//   - [github.com/seed71701133/tablets/internal/testkit/azurite]: one Azurite per test binary,
//     a fresh table per test, and the limit Checker transport every integration test goes
//     through (it runs Azurite with internal/azurite/runner, which the command uses too).
//   - [github.com/seed71701133/tablets/internal/testkit/dbtest]: a tsdb database on that
//     Azurite.
//   - [github.com/seed71701133/tablets/internal/testkit/fault]: the fault-injecting transport
//     (503s, lost replies, latency).
//   - [github.com/seed71701133/tablets/internal/testkit/tablefake]: an in-memory Table service
//     at the transport, for tests of millions of requests.
//   - [github.com/seed71701133/tablets/internal/testkit/storetest]: the conformance suite every
//     store passes.
//   - [github.com/seed71701133/tablets/internal/testkit/formatdoc]: the worked examples of
//     docs/format.md, for the golden tests.
//   - [github.com/seed71701133/tablets/internal/testkit/promrun]: a real Prometheus (and
//     promtool) for the server's end-to-end tests.
//   - [github.com/seed71701133/tablets/internal/testkit/rwgen]: a remote-write load generator.
//   - [github.com/seed71701133/tablets/internal/testkit/itest]: what the integration test
//     packages (integration_test/...) share: the layouts under test, a hook transport, the
//     window model, loop runs.
//
// Not here, because the command links them: internal/azurite/runner and internal/azurite/npm
// (the demo and the soak start Azurite) and internal/soak (`tablets soak`).
package testkit
