// Package writer holds the integration test of the buffered writer on every layout on
// Azurite, with faults on the way. The tests are in _test.go files; this package has no code.
package writer
