package storetest

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets"
)

// Harness makes stores for the suite.
type Harness interface {
	// NewStore returns a store on a fresh, empty table, and a function that reports how many
	// HTTP requests the store's client has sent so far (the suite uses it to prove that bad
	// input sends nothing, and to bound request counts).
	NewStore(t *testing.T) (tablets.Store, func() int64)
	// Resolution is the store's time resolution: written times truncate to it.
	Resolution() time.Duration
	// Name names the store in subtest names.
	Name() string
}

// Bounded is implemented by harnesses whose stores hold times only up to a time before
// tablets.MaxTime (a resolution under 14ns keeps 64-bit unit counts, which end in 2554). The
// suite then writes nothing after it, and checks that a write after it is rejected.
type Bounded interface {
	LastTime() time.Time
}

// lastTime is the last time h's stores hold.
func lastTime(h Harness) time.Time {
	if b, ok := h.(Bounded); ok {
		return b.LastTime()
	}
	return tablets.MaxTime
}
