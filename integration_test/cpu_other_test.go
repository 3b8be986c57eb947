//go:build !unix

package integration_test

import "time"

// cpuTime is not measured here: cpu-ns/point reads 0.
func cpuTime() time.Duration { return 0 }
