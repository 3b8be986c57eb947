// Package itest holds what the integration test packages (integration_test/...) share, so
// that no helper is copied from one package to another: the store layouts under test on
// Azurite ([Stores]), a transport that runs a hook around a chosen request ([Hooked]), reading
// a request's body without consuming it ([PeekBody]), the maintenance scheduler run on a
// database and the runs it reports ([Schedule], [LoopRuns]), the model of tsdb's windows
// that Aggregate is checked against ([ModelWindows], [RequireWindows]), point helpers, and
// the process's CPU time for benchmarks. Part of the test kit (internal/testkit): only tests import it.
package itest
