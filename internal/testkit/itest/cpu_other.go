//go:build !unix

package itest

import "time"

// CPUTime is not measured here: cpu-ns/point reads 0.
func CPUTime() time.Duration { return 0 }
