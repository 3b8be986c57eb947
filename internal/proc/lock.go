package proc

import (
	"context"
	"fmt"
	"os"
	"time"
)

// lockPoll is how often Lock retries a lock another process holds.
const lockPoll = 100 * time.Millisecond

// Lock takes an exclusive lock on the file path (created if missing), polling so that ctx can
// cancel the wait, and returns the function that releases it. Another process, or another
// Lock of the same path in this process, waits until then.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, err
		}
		if ok {
			return func() { unlockFile(f); f.Close() }, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another process's lock on %s: %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
