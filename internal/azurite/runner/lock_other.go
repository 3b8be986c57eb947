//go:build !unix

package runner

import "os"

// Without flock, concurrent installs are not serialized (best effort: each installs into
// its own temporary directory and renames it into place). Only Unix systems are supported.
func tryLock(f *os.File) (bool, error) { return true, nil }

func unlockFile(f *os.File) {}
