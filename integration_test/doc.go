// Package integration runs the conformance suite and the benchmarks of every store
// against a real Azurite, started by the tests themselves (internal/testkit/azurite), through a
// transport that checks every request against Azure's real limits.
package integration
