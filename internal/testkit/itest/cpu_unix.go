//go:build unix

package itest

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time (user + system) this process has used so far. Azurite runs in
// another process, so over a benchmark loop it is the client's: the library, aztables and
// the HTTP stack.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
