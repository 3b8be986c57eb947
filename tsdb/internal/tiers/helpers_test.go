package tiers

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/testkit/tablefake"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
	"github.com/seed71701133/tablets/tsdb/internal/times"
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

// testTiers are the tiers of database name on svc with raw periods of a day, the default
// tiers, accuracy and seal delay, and the clock now: as Open makes them, without the other
// parts (Reads) the tests here do not read.
func testTiers(t testing.TB, svc *aztables.ServiceClient, name string, now time.Time) *Tiers {
	t.Helper()
	checked, err := CheckTiers(DefaultTiers)
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return now }
	names := naming.Names{Base: name, Period: 24 * time.Hour}
	c := catalog.New(svc.NewClient(names.Catalog()), 1<<10)
	cfg := Config{Tiers: checked, Accuracy: DefaultAccuracy, SealDelay: DefaultSealDelay, Now: clock}
	return New(svc, names, cfg, c, tables.NewPeriods(svc, names, c, clock), Reads{})
}

// at is Unix seconds as a time (the tests' shorthand for times.At).
func at(s uint64) time.Time { return times.At(s) }
