// Package dbtest opens tsdb databases on the shared test Azurite for tests, every request
// through the limit Checker.
// Part of the test kit (internal/testkit): only tests and other kit packages import it.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/reply"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb"
)

// NewDB opens a database with a fresh name on the shared Azurite, every request through a
// checking transport (a violated Azure limit fails the test), and drops its tables when the
// test ends. It skips under -short, as the harness does.
func NewDB(t testing.TB, opts *tsdb.Options) (*tsdb.DB, *aztables.ServiceClient, *azurite.Checker) {
	svc, checker := NewService(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "db" + hex.EncodeToString(b)
	db, err := tsdb.Open(context.Background(), svc, name, opts)
	require.NoError(t, err)
	DropOnCleanup(t, name)
	checker.Reset()
	return db, svc, checker
}

// NewService is a service client of the shared Azurite whose requests go through a Checker.
func NewService(t testing.TB) (*aztables.ServiceClient, *azurite.Checker) {
	srv := azurite.Shared(t)
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() { mu.Lock(); ended = true; mu.Unlock() })
	checker := azurite.NewChecker(nil, func(v string) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			t.Errorf("Azure limit violated: %s", v)
		}
	})
	svc, err := srv.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: checker, Retry: azurite.TestRetryOptions(), PerCallPolicies: []policy.Policy{runtime.NewRequestIDPolicy(), reply.Policy{}}}})
	require.NoError(t, err)
	return svc, checker
}

// DropOnCleanup deletes the tables of database name when the test ends.
func DropOnCleanup(t testing.TB, name string) {
	admin, err := azurite.Shared(t).NewServiceClient(nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		for p := admin.NewListTablesPager(nil); p.More(); {
			page, err := p.NextPage(context.Background())
			if err != nil {
				return
			}
			for _, tb := range page.Tables {
				if strings.HasPrefix(*tb.Name, name) {
					_, _ = admin.DeleteTable(context.Background(), *tb.Name, nil)
				}
			}
		}
	})
}
