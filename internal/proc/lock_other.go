//go:build !unix

package proc

import "os"

// Without flock, concurrent installs by several processes are not serialized (best effort:
// each installs into its own temporary directory). Only Unix systems are supported.
func tryLock(f *os.File) (bool, error) { return true, nil }

func unlockFile(f *os.File) {}
