package tiers

import (
	"strconv"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

func TestMain(m *testing.M) { azurite.Main(m) }

// newDB opens a database with a fresh name on the shared Azurite, every request through a
// checking transport, and drops its tables when the test ends.
func newDB(t *testing.T, opts *tsdb.Options) (*tsdb.DB, *aztables.ServiceClient, *azurite.Checker) {
	return dbtest.NewDB(t, opts)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// chunkedLayout stores the raw points in chunks (cheap to write and read back).
func chunkedLayout(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }
