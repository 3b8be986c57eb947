package tsdb

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/tablefake"
)

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeService is a service client of an in-memory fake account (no retries).
func fakeService(t testing.TB, fake *tablefake.Transport) *aztables.ServiceClient {
	t.Helper()
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: fake, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// openFake opens a database on a fake account.
func openFake(t testing.TB, fake *tablefake.Transport, opts *Options) *DB {
	t.Helper()
	db, err := Open(context.Background(), fakeService(t, fake), "fakedb", opts)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
