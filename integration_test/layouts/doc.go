// Package layouts holds the integration tests of the store layouts (basic, advanced, chunked)
// on Azurite: the conformance suite and the cost tests of every layout, each layout's own
// behaviour (keys, request counts, compaction, races with a concurrent writer), Latest's cost,
// and the layouts' benchmarks. The tests are in _test.go files; this package has no code.
package layouts
