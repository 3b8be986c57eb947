package itest

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

// Harness makes stores of one layout on fresh Azurite tables through the checking transport
// (a storetest harness).
type Harness struct {
	name       string
	resolution time.Duration
	// Make is a store of the layout, with the harness's options, on client.
	Make func(t *testing.T, client *aztables.Client) tablets.Store
	// latest is what Latest(n <= 100) may cost when the newest point is now (issue figures).
	latest storetest.Usage
}

func (h Harness) Name() string              { return h.name }
func (h Harness) Resolution() time.Duration { return h.resolution }

func (h Harness) NewStore(t *testing.T) (tablets.Store, func() int64) {
	client, checker := azurite.NewTable(t, nil)
	return h.Make(t, client), func() int64 { return checker.Stats().Requests }
}

func (h Harness) NewMeteredStore(t *testing.T) (tablets.Store, func() storetest.Usage) {
	client, checker := azurite.NewTable(t, nil)
	return h.Make(t, client), func() storetest.Usage {
		s := checker.Stats()
		return storetest.Usage{Requests: s.Calls, ResponseBytes: s.ResponseBytes}
	}
}

func (h Harness) LatestBudget() storetest.Usage { return h.latest }

// LastTime is the last time the harness's stores hold (storetest.Bounded).
func (h Harness) LastTime() time.Time {
	f, err := rounding.NewFineKeyFormat(h.resolution)
	if err != nil {
		panic(err)
	}
	if f.LastTime().Before(tablets.MaxTime) {
		return f.LastTime()
	}
	return tablets.MaxTime
}

// Stores are the layouts under test, each with the options the suite runs them with.
var Stores = []Harness{
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
