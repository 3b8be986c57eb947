// Package storetest is the one conformance suite every tablets.Store implementation passes,
// in the manner of gocloud.dev's docstore/drivertest: a store package supplies a Harness and
// calls RunConformanceTests from its integration test.
// Part of the test kit (internal/testkit): only tests and other kit packages import it.
package storetest
