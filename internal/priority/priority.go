// Package priority orders the writes of one time: a priority is the wall clock in Unix
// nanoseconds, made strictly increasing within the process. chunked's chunks and tsdb's
// staging entities take theirs from the same counter, so that of two writes of one process
// the later has the higher, whichever path each took.
package priority

import (
	"sync/atomic"
	"time"
)

var last atomic.Uint64

// Next returns a priority above every one this process returned before.
func Next() uint64 {
	for {
		l := last.Load()
		p := max(l+1, uint64(time.Now().UnixNano()))
		if last.CompareAndSwap(l, p) {
			return p
		}
	}
}
