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
	"github.com/seed71701133/tablets/server/limits"
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

// With an allow list naming the tenants, the default tenant ranks first and the others
// follow in order, each waiting its rank's share of the spread; a list allowing any tenant,
// or a tenant it does not name, leaves the share to the hash of the name.
func TestSpreadRanked(t *testing.T) {
	const spread = 5 * time.Minute
	allow := []string{"soak3", "soak1", "soak0", "soak2", "soak1", "default"}
	for id, want := range map[string]time.Duration{"default": 0, "soak0": time.Minute, "soak1": 2 * time.Minute, "soak2": 3 * time.Minute, "soak3": 4 * time.Minute} {
		if d, ok := spreadRanked(id, allow, spread); !ok || d != want {
			t.Errorf("%s: %v %v, want %v", id, d, ok, want)
		}
	}
	if d, ok := spreadRanked("teama", []string{"teamb", "teama"}, spread); !ok || d != spread/3 {
		t.Errorf("teama of [default teama teamb]: %v %v", d, ok)
	}
	for _, tc := range []struct {
		id     string
		allow  []string
		spread time.Duration
	}{{"soak4", allow, spread}, {"soak0", []string{"soak0", "*"}, spread}, {"soak0", allow, 0}} {
		if d, ok := spreadRanked(tc.id, tc.allow, tc.spread); ok || d != 0 {
			t.Errorf("%s of %v, spread %v: %v %v, want the hash's", tc.id, tc.allow, tc.spread, d, ok)
		}
	}
}

// The front gives every tenant's database its FoldDelay and every tenant's server its
// RollupDelay: by rank where the configuration's allow list names the tenant, else by the
// hash of its database's name; unless the options set a FoldDelay of their own or no
// spread. A spread over tsdb.MaxFoldDelay is refused.
func TestTenantsSpread(t *testing.T) {
	ctx := context.Background()
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: tablefake.New(), Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	listed, err := limits.Parse([]byte("tenants:\n  allow: [teamb, teama]\n"), limits.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	anyone, err := limits.Parse([]byte("tenants:\n  allow: ['*']\n"), limits.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	off := &Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}
	hashed := func(spread time.Duration) func(string, string) time.Duration {
		return func(_, db string) time.Duration { return spreadOf(db, spread) }
	}
	ranked := func(spread time.Duration) func(string, string) time.Duration {
		return func(id, _ string) time.Duration {
			return map[string]time.Duration{"default": 0, "teama": spread / 3, "teamb": 2 * spread / 3}[id]
		}
	}
	for _, tc := range []struct {
		name         string
		opts         TenantsOptions
		fold, rollup func(id, db string) time.Duration
	}{
		{"listed", TenantsOptions{Server: off, Limits: func() *limits.Config { return listed }}, ranked(DefaultSpread), ranked(DefaultSpread)},
		{"listed, 9 minutes", TenantsOptions{Server: off, Limits: func() *limits.Config { return listed }, Spread: 9 * time.Minute},
			ranked(9 * time.Minute), ranked(9 * time.Minute)},
		{"any tenant", TenantsOptions{Server: off, Limits: func() *limits.Config { return anyone }}, hashed(DefaultSpread), hashed(DefaultSpread)},
		{"any tenant, 8 minutes", TenantsOptions{Server: off, Limits: func() *limits.Config { return anyone }, Spread: 8 * time.Minute},
			hashed(8 * time.Minute), hashed(8 * time.Minute)},
		{"none", TenantsOptions{Server: off, Limits: func() *limits.Config { return listed }, Spread: -1},
			func(string, string) time.Duration { return 0 }, func(string, string) time.Duration { return 0 }},
		{"a FoldDelay set", TenantsOptions{Server: off, Limits: func() *limits.Config { return listed }, DB: &tsdb.Options{FoldDelay: time.Minute}},
			func(string, string) time.Duration { return time.Minute }, ranked(DefaultSpread)},
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
				if got, want := s.db.Options().FoldDelay, tc.fold(id, db); got != want {
					t.Errorf("%s: FoldDelay %v, want %v", db, got, want)
				}
				if got, want := s.opts.RollupDelay, tc.rollup(id, db); got != want {
					t.Errorf("%s: RollupDelay %v, want %v", db, got, want)
				}
				if tc.name == "listed" { // the same share of the compactions' interval
					want := map[string]time.Duration{"default": 0, "teama": DefaultCompactEvery / 3, "teamb": 2 * DefaultCompactEvery / 3}[id]
					if got := s.opts.CompactPhase; got != want {
						t.Errorf("%s: CompactPhase %v, want %v", db, got, want)
					}
				}
			}
		})
	}
	if _, err := NewTenants(ctx, svc, "spread", &TenantsOptions{Server: off, Spread: tsdb.MaxFoldDelay + 1}); !errors.Is(err, tablets.ErrInvalidOptions) {
		t.Errorf("a spread over MaxFoldDelay: %v", err)
	}
}

// A tenant's compactions tick its share of the spread into their interval: the soak's five
// ranks (the default tenant and four) 24 s apart in 2 minutes, a minute apart in the
// default 5; none without a spread or a share.
func TestCompactPhase(t *testing.T) {
	for _, tc := range []struct {
		share, spread, every, want time.Duration
	}{
		{0, 5 * time.Minute, 2 * time.Minute, 0},
		{time.Minute, 5 * time.Minute, 2 * time.Minute, 24 * time.Second},
		{4 * time.Minute, 5 * time.Minute, 2 * time.Minute, 96 * time.Second},
		{3 * time.Minute, 5 * time.Minute, 0, 3 * time.Minute},
		{3 * time.Minute, 0, 2 * time.Minute, 0},
	} {
		if got := compactPhase(tc.share, tc.spread, tc.every); got != tc.want {
			t.Errorf("compactPhase(%v, %v, %v) = %v, want %v", tc.share, tc.spread, tc.every, got, tc.want)
		}
	}
}
