// Package clock is the test kit's fake clock: a time that tests set and move by hand, read
// by the code under test through a func() time.Time (tsdb.Options.Now, a bucket's clock, a
// handler's Now option, ...). It is safe for concurrent use: the code under test may read it
// from its goroutines while the test moves it.
package clock

import (
	"sync"
	"time"
)

// Clock is a settable clock. Its zero value is ready to use and reads the zero time; it must
// not be copied after first use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads t until it is set or moved.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time. Pass the method value (c.Now) where a func() time.Time is
// wanted.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t (backwards too).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Add moves the clock by d (backwards for a negative d).
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
