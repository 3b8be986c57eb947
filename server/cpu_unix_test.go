//go:build unix

package server_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) this process has used: the server's and the load
// generator's (Azurite is another process).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
