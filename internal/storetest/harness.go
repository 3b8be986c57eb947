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
