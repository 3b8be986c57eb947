package integration_test

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/basic"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/storetest"
	"github.com/seed71701133/tablets/rounding"
)

func TestMain(m *testing.M) { azurite.Main(m) }

// harness makes stores of one layout on fresh Azurite tables through the checking transport.
type harness struct {
	name       string
	resolution time.Duration
	make       func(t *testing.T, client *aztables.Client) tablets.Store
	// latest is what Latest(n <= 100) may cost when the newest point is now (issue figures).
	latest storetest.Usage
}

func (h harness) Name() string              { return h.name }
func (h harness) Resolution() time.Duration { return h.resolution }

func (h harness) NewStore(t *testing.T) (tablets.Store, func() int64) {
	client, checker := azurite.NewTable(t, nil)
	return h.make(t, client), func() int64 { return checker.Stats().Requests }
}

func (h harness) NewMeteredStore(t *testing.T) (tablets.Store, func() storetest.Usage) {
	client, checker := azurite.NewTable(t, nil)
	return h.make(t, client), func() storetest.Usage {
		s := checker.Stats()
		return storetest.Usage{Requests: s.Calls, ResponseBytes: s.ResponseBytes}
	}
}

func (h harness) LatestBudget() storetest.Usage { return h.latest }

// LastTime is the last time the harness's stores hold (storetest.Bounded).
func (h harness) LastTime() time.Time {
	f, err := rounding.NewFineKeyFormat(h.resolution)
	if err != nil {
		panic(err)
	}
	if f.LastTime().Before(tablets.MaxTime) {
		return f.LastTime()
	}
	return tablets.MaxTime
}

// stores are the layouts under test, each with the options the suite runs them with.
var stores = []harness{
	{"basic", basic.DefaultResolution, func(t *testing.T, client *aztables.Client) tablets.Store {
		s, err := basic.New(client, nil)
		require.NoError(t, err)
		return s
	}, storetest.Usage{Requests: 6, ResponseBytes: 64 << 10}},
	{"advanced", advanced.DefaultResolution, func(t *testing.T, client *aztables.Client) tablets.Store {
		s, err := advanced.New(client, nil)
		require.NoError(t, err)
		return s
	}, storetest.Usage{Requests: 4, ResponseBytes: 64 << 10}},
	// Small factors: many partitions and rows in little data, so edges are everywhere.
	{"advanced-small", 10 * time.Millisecond, func(t *testing.T, client *aztables.Client) tablets.Store {
		s, err := advanced.New(client, &advanced.Options{PartitionFactor: time.Second, RowFactor: 200 * time.Millisecond, Resolution: 10 * time.Millisecond})
		require.NoError(t, err)
		return s
	}, storetest.Usage{}},
	{"chunked", chunked.DefaultResolution, func(t *testing.T, client *aztables.Client) tablets.Store {
		s, err := chunked.New(client, nil)
		require.NoError(t, err)
		return s
	}, storetest.Usage{Requests: 4, ResponseBytes: 64 << 10}},
	// 1ns: exact Go times; times end in 2554 (64-bit units).
	{"chunked-1ns", time.Nanosecond, func(t *testing.T, client *aztables.Client) tablets.Store {
		s, err := chunked.New(client, &chunked.Options{Resolution: time.Nanosecond})
		require.NoError(t, err)
		return s
	}, storetest.Usage{}},
	// Small partitions and chunks: many of each in little data.
	{"chunked-small", time.Millisecond, func(t *testing.T, client *aztables.Client) tablets.Store {
		s, err := chunked.New(client, &chunked.Options{PartitionFactor: time.Second, MaxChunkBytes: 1 << 10})
		require.NoError(t, err)
		return s
	}, storetest.Usage{}},
}

// TestCost checks what reads and writes cost, per layout with its default options.
func TestCost(t *testing.T) {
	for _, h := range stores {
		run := storetest.RunCostTests
		switch h.name {
		case "basic", "advanced":
		case "chunked":
			// Only Latest: a page of overlapping chunks reads whole chunks (QueryPage's cost).
			run = storetest.RunLatestCostTests
		default:
			continue
		}
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			run(t, h)
		})
	}
}

func TestConformance(t *testing.T) {
	for _, h := range stores {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			storetest.RunConformanceTests(t, h)
		})
	}
}
