package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/tablefake"
	"github.com/seed71701133/tablets/tsdb"
)

// A tenant's share of the spread is fixed by its database's name (every server gives it the
// same), within the spread, and spreads names apart.
func TestSpreadOf(t *testing.T) {
	const spread = 5 * time.Minute
	seen := map[time.Duration]bool{}
	for _, name := range []string{"soak", "soakxsoak0", "soakxsoak1", "soakxsoak2", "soakxsoak3", "metrics", "metricsxteama"} {
		d := spreadOf(name, spread)
		if d < 0 || d >= spread {
			t.Errorf("%s: %v, not in [0, %v)", name, d, spread)
		}
		if d != spreadOf(name, spread) {
			t.Errorf("%s: not the same twice", name)
		}
		seen[d] = true
	}
	if len(seen) < 6 {
		t.Errorf("7 names given %d delays", len(seen))
	}
	if d := spreadOf("soak", 0); d != 0 {
		t.Errorf("no spread: %v", d)
	}
}

// The front gives every tenant's database the FoldDelay of its name and every tenant's
// server the RollupDelay, unless the options set a FoldDelay of their own or no spread; a
// spread over tsdb.MaxFoldDelay is refused.
func TestTenantsSpread(t *testing.T) {
	ctx := context.Background()
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: tablefake.New(), Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	off := &Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}
	for _, tc := range []struct {
		name         string
		opts         TenantsOptions
		fold, rollup func(db string) time.Duration
	}{
		{"the default", TenantsOptions{Server: off},
			func(db string) time.Duration { return spreadOf(db, DefaultSpread) }, func(db string) time.Duration { return spreadOf(db, DefaultSpread) }},
		{"8 minutes", TenantsOptions{Server: off, Spread: 8 * time.Minute},
			func(db string) time.Duration { return spreadOf(db, 8*time.Minute) }, func(db string) time.Duration { return spreadOf(db, 8*time.Minute) }},
		{"none", TenantsOptions{Server: off, Spread: -1},
			func(string) time.Duration { return 0 }, func(string) time.Duration { return 0 }},
		{"a FoldDelay set", TenantsOptions{Server: off, DB: &tsdb.Options{FoldDelay: time.Minute}},
			func(string) time.Duration { return time.Minute }, func(db string) time.Duration { return spreadOf(db, DefaultSpread) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			front, err := NewTenants(ctx, svc, "spread", &tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer front.Close()
			for _, id := range []string{"default", "teama", "teamb"} {
				s, err := front.open(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				db := s.db.Name()
				if got, want := s.db.Options().FoldDelay, tc.fold(db); got != want {
					t.Errorf("%s: FoldDelay %v, want %v", db, got, want)
				}
				if got, want := s.opts.RollupDelay, tc.rollup(db); got != want {
					t.Errorf("%s: RollupDelay %v, want %v", db, got, want)
				}
			}
		})
	}
	if _, err := NewTenants(ctx, svc, "spread", &TenantsOptions{Server: off, Spread: tsdb.MaxFoldDelay + 1}); !errors.Is(err, tablets.ErrInvalidOptions) {
		t.Errorf("a spread over MaxFoldDelay: %v", err)
	}
}
