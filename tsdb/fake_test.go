package tsdb

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/testkit/tablefake"
)

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
