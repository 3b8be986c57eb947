// Package proc runs the helper programs the tests and the command depend on (Azurite,
// Prometheus): it installs them once under a file lock, finds a free port, starts a process
// in its own process group, keeps a bounded tail of its output, waits until it is ready and
// stops it. It holds no test code, so that the command binary does not link the testing
// package.
//
// On Linux a started process is also killed when this process dies (a parent-death signal);
// elsewhere on Unix a test binary killed without stopping it leaves it running. Installs are
// serialized across processes with flock on Unix only.
package proc
