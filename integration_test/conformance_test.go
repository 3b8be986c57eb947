package integration_test

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/basic"
	"github.com/seed71701133/tablets/internal/azurite"
	"github.com/seed71701133/tablets/internal/storetest"
)

func TestMain(m *testing.M) { azurite.Main(m) }

// harness makes stores of one layout on fresh Azurite tables through the checking transport.
type harness struct {
	name       string
	resolution time.Duration
	make       func(t *testing.T, client *aztables.Client) tablets.Store
}

func (h harness) Name() string              { return h.name }
func (h harness) Resolution() time.Duration { return h.resolution }

func (h harness) NewStore(t *testing.T) (tablets.Store, func() int64) {
	client, checker := azurite.NewTable(t, nil)
	return h.make(t, client), func() int64 { return checker.Stats().Requests }
}

// stores are the layouts under test, each with the options the suite runs them with.
var stores = []harness{
	{"basic", basic.DefaultResolution, func(t *testing.T, client *aztables.Client) tablets.Store {
		s, err := basic.New(client, nil)
		require.NoError(t, err)
		return s
	}},
	{"advanced", advanced.DefaultResolution, func(t *testing.T, client *aztables.Client) tablets.Store {
		s, err := advanced.New(client, nil)
		require.NoError(t, err)
		return s
	}},
	// Small factors: many partitions and rows in little data, so edges are everywhere.
	{"advanced-small", 10 * time.Millisecond, func(t *testing.T, client *aztables.Client) tablets.Store {
		s, err := advanced.New(client, &advanced.Options{PartitionFactor: time.Second, RowFactor: 200 * time.Millisecond, Resolution: 10 * time.Millisecond})
		require.NoError(t, err)
		return s
	}},
}

func TestConformance(t *testing.T) {
	for _, h := range stores {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			storetest.RunConformanceTests(t, h)
		})
	}
}
