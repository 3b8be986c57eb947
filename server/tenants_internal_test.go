package server

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/gate"
	"github.com/seed71701133/tablets/internal/testkit/tablefake"
	"github.com/seed71701133/tablets/server/limits"
)

// tableForm is what follows a database's name in the name of each of its tables (see
// docs/format.md, "tsdb: table names").
var tableForm = regexp.MustCompile(`^(m|w|[rih][0-9]+|t[0-9]+p[0-9]+)$`)

// No table of one tenant's database can be named like a table of another tenant's, or of the
// base database: every name of a table of the databases below has exactly one owner among
// them. (Why: a table of database D is D, then a kind letter m r i h t w, then digits and at
// most a "p". A tenant's database is base + "x" + ID: after the base name, its tables have
// "x", the base database's a kind letter. Of two tenants whose IDs are a and a + s, a table
// of the second is base + "x" + a + s + a kind letter..., so the first would own it only if
// s + that kind letter + ... were one of the forms above; but s is not empty, so the kind
// letter would fall where the forms have a digit or "p".) Table names are case-insensitive
// in Azure: IDs are lowercase, and names are compared folded.
func TestTenantTablesNeverCollide(t *testing.T) {
	ids := []string{"a", "r", "r1", "r12", "1", "12", "m", "w", "mm", "t", "t1", "t1p", "t1p2", "p", "p1", "i", "i1", "h1", "x", "xa",
		"teama", "teamam", "teamaw", "teamar1", "teamai1", "teamat3600p0", "teamax", "teamaxb"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789mrihtwpxab"
	for range 300 {
		b := make([]byte, 1+rng.IntN(8))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if !slices.Contains(ids, string(b)) {
			ids = append(ids, string(b))
		}
	}
	for _, base := range []string{"metrics", "Metrics", "abc", "abcx", "abcr"} {
		dbs := map[string]bool{strings.ToLower(base): true}
		for _, id := range ids {
			if checkTenantName(base, id) != nil {
				t.Fatalf("%s: tenant %q refused", base, id)
			}
			db := strings.ToLower(tenantDatabase(base, id))
			if dbs[db] {
				t.Fatalf("%s: tenant %q: database %s twice", base, id, db)
			}
			dbs[db] = true
		}
		for db := range dbs {
			for _, suffix := range []string{"m", "w", "r0", "r1716422400", "i1716422400", "h1716422400", "r7", "t3600p1698278400", "t60p0"} {
				table := db + suffix
				var owners []string
				for other := range dbs {
					if strings.HasPrefix(table, other) && tableForm.MatchString(table[len(other):]) {
						owners = append(owners, other)
					}
				}
				if len(owners) != 1 {
					t.Fatalf("base %s: table %s is named like a table of %q", base, table, owners)
				}
				// The base database lists its tables by ranges of names (its raw, index and
				// histogram tables between base + "h" and base + "s", its tiers' from base +
				// "t"): no tenant's table is in them, to be parsed or dropped there.
				lb := strings.ToLower(base)
				if db != lb && (table >= lb+"h" && table < lb+"s" || strings.HasPrefix(table, lb+"t")) {
					t.Fatalf("base %s: tenant table %s lies in the base database's listings", base, table)
				}
			}
		}
	}
	if tenantDatabase("metrics", limits.DefaultTenant) != "metrics" {
		t.Error("the default tenant's database is not the base database")
	}
}

// Tenant IDs: lowercase letters and digits, their database name at most 40 characters.
func TestCheckTenantName(t *testing.T) {
	base := "metrics" // 7: IDs of up to 32 characters
	for id, ok := range map[string]bool{"teama": true, "1": true, strings.Repeat("a", 32): true,
		strings.Repeat("a", 33): false, "": false, "TeamA": false, "team-a": false, "team a": false, "é": false, "a|b": false} {
		if err := checkTenantName(base, id); (err == nil) != ok {
			t.Errorf("%q: %v", id, err)
		}
	}
	long := strings.Repeat("m", 39)
	if err := checkTenantName(long, "a"); err == nil || !strings.Contains(err.Error(), "too long to have tenants") {
		t.Errorf("a 39-character base: %v", err)
	}
	if err := checkTenantName(long[:38], "a"); err != nil {
		t.Errorf("a 38-character base: %v", err)
	}
}

// The gate serves waiters in arrival order, gives up at the context's end, admits a request
// larger than the whole gate once it is empty, and follows a resize.
func TestBodyGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g := gate.New(100)
		if n, err := g.Acquire(ctx, 60); n != 60 || err != nil {
			t.Fatal(n, err)
		}
		done := make(chan struct{}, 2)
		for _, w := range []struct {
			name string
			n    int64
		}{{"big", 60}, {"small", 10}} {
			go func() {
				n, err := g.Acquire(ctx, w.n)
				if err != nil || n != w.n {
					t.Errorf("%s: %d %v", w.name, n, err)
				}
				done <- struct{}{}
			}()
			synctest.Wait() // queued in this order
		}
		if used, waiting := g.State(); used != 60 || waiting != 2 {
			t.Fatalf("used %d, waiting %d: the small one passed the big one", used, waiting)
		}
		g.Release(60)
		<-done
		<-done
		// Full: a waiter gives up at its deadline, and leaves the queue.
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := g.Acquire(tctx, 40); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("acquire on a full gate: %v", err)
		}
		if waited := time.Since(start); waited != 10*time.Second {
			t.Errorf("waited %v", waited)
		}
		if _, waiting := g.State(); waiting != 0 {
			t.Errorf("%d waiters left", waiting)
		}
		g.Release(70)
		// Larger than the gate: the whole gate, once empty.
		if n, err := g.Acquire(ctx, 500); n != 100 || err != nil {
			t.Fatal(n, err)
		}
		g.Release(100)
		// Shrunk below what is taken: no one until enough is released.
		_, _ = g.Acquire(ctx, 60)
		g.Resize(50)
		got := make(chan int64)
		go func() { n, _ := g.Acquire(ctx, 1); got <- n }()
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("admitted over the new size")
		default:
		}
		g.Release(60)
		if n := <-got; n != 1 {
			t.Errorf("took %d", n)
		}
		if used, _ := g.State(); used != 1 {
			t.Errorf("used %d", used)
		}
	})
}

// A request whose body does not fit under max_body_bytes_waiting beside those being served
// waits, and after BodyWait is answered 503 with Retry-After, counted as a limit hit of its
// tenant; once the body in the way is done, requests pass again.
func TestTenantsBodyGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fake := tablefake.New()
		svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
			ClientOptions: policy.ClientOptions{Transport: fake, Retry: policy.RetryOptions{MaxRetries: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := limits.Parse([]byte("tenants:\n  allow: [teama]\nrequests:\n  max_body_bytes_waiting: 1000\n"), limits.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		front, err := NewTenants(ctx, svc, "gated", &TenantsOptions{Limits: func() *limits.Config { return cfg },
			Server: &Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}})
		if err != nil {
			t.Fatal(err)
		}
		defer front.Close()

		// A remote write of 1,000 bytes whose body trickles: it holds the whole gate.
		body, feed := io.Pipe()
		slow := httptest.NewRequest(http.MethodPost, "/api/v1/write", body)
		slow.ContentLength = 1000
		slowDone := make(chan int)
		go func() {
			w := httptest.NewRecorder()
			front.ServeHTTP(w, slow)
			slowDone <- w.Code
		}()
		synctest.Wait()

		post := func(tenant string, n int) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, "/api/v1/read", strings.NewReader(strings.Repeat("x", n)))
			if tenant != "" {
				r.Header.Set(TenantHeader, tenant)
			}
			w := httptest.NewRecorder()
			front.ServeHTTP(w, r)
			return w
		}
		start := time.Now()
		w := post("teama", 10)
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != strconv.Itoa(int(DefaultBodyWait/time.Second)) {
			t.Fatalf("a request with no room: %d, Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body)
		}
		if waited := time.Since(start); waited != DefaultBodyWait {
			t.Errorf("waited %v, want %v", waited, DefaultBodyWait)
		}
		if got := counterValue(t, front, "tablets_limit_hits_total", map[string]string{"tenant": "teama", "limit": "max_body_bytes_waiting"}); got != 1 {
			t.Errorf("limit hits %v, want 1", got)
		}
		// A query has no body to bound: it passes.
		r := httptest.NewRequest(http.MethodGet, "/api/v1/status/buildinfo", nil)
		qw := httptest.NewRecorder()
		front.ServeHTTP(qw, r)
		if qw.Code != http.StatusOK {
			t.Errorf("buildinfo: %d", qw.Code)
		}

		feed.CloseWithError(io.ErrUnexpectedEOF)
		if code := <-slowDone; code == http.StatusServiceUnavailable {
			t.Errorf("the slow write: %d", code)
		}
		if w := post("", 10); w.Code == http.StatusServiceUnavailable {
			t.Errorf("after the slow write: %d: %s", w.Code, w.Body)
		}
		if used, waiting := front.gate.State(); used != 0 || waiting != 0 {
			t.Errorf("gate: %d used, %d waiting", used, waiting)
		}
	})
}

// counterValue is the value of a counter of the front's registry with those labels.
func counterValue(t *testing.T, front *Tenants, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := front.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// Concurrent first requests of a tenant open its database and server once.
func TestTenantsOpenOnce(t *testing.T) {
	ctx := context.Background()
	fake := tablefake.New()
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: fake, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	front, err := NewTenants(ctx, svc, "once", &TenantsOptions{Server: &Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	before := fake.Stats()
	servers := make(chan *Server, 16)
	for range cap(servers) {
		go func() {
			s, err := front.open(ctx, "teama")
			if err != nil {
				t.Error(err)
			}
			servers <- s
		}()
	}
	first := <-servers
	for range cap(servers) - 1 {
		if s := <-servers; s != first {
			t.Fatal("two servers for one tenant")
		}
	}
	if d := fake.Stats().TableCreates - before.TableCreates; d != 1 {
		t.Errorf("%d tables created, want 1 (the catalog)", d)
	}
	if got := front.Opened(); !slices.Equal(got, []string{"default", "teama"}) {
		t.Errorf("opened %q", got)
	}
}

// Run runs the background work of every allowed tenant database in the account: those
// there at start, those another server creates later (at the next listing), not those not
// allowed; and stops it all when its context ends.
func TestTenantsRunListsTheAccount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		fake := tablefake.New()
		svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
			ClientOptions: policy.ClientOptions{Transport: fake, Retry: policy.RetryOptions{MaxRetries: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := limits.Parse([]byte("tenants:\n  allow: [teama, teamb]\n"), limits.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		opts := &TenantsOptions{Limits: func() *limits.Config { return cfg },
			Server: &Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}}
		// Another server made teama and teamz (allowed there); a database "basex" is no
		// tenant's, and a table not a catalog names no database.
		for _, name := range []string{"basexteamam", "basexteamzm", "basexm", "basexteamcr0"} {
			fake.CreateTable(name)
		}
		front, err := NewTenants(ctx, svc, "base", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer front.Close()
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- front.Run(runCtx) }()
		synctest.Wait()
		if got := front.Running(); !slices.Equal(got, []string{"default", "teama"}) {
			t.Errorf("running %q at start", got)
		}
		fake.CreateTable("basexteambm") // another server's first write of teamb
		time.Sleep(DefaultListTenantsEvery)
		synctest.Wait()
		if got := front.Running(); !slices.Equal(got, []string{"default", "teama", "teamb"}) {
			t.Errorf("running %q after a listing", got)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := front.Running(); len(got) != 0 {
			t.Errorf("still running %q", got)
		}
	})
}

// The configuration docs/tenants.md shows loads, and means what the document says.
func TestTenantsDocConfig(t *testing.T) {
	doc, err := os.ReadFile("../docs/tenants.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## The configuration")
	if !ok {
		t.Fatal("no configuration section")
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("no YAML block in the configuration section")
	}
	cfg, err := limits.Parse([]byte(block), limits.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, tenant string
		may          bool
	}{
		{"prometheus-a", "teama", true}, {"prometheus-a", "teamb", false}, {"prometheus-a", "default", false},
		{"grafana", "teamb", true}, {"grafana", "default", true}, {"grafana", "teamz", false},
		{"ops", "default", true}, {"ops", "teama", false}, {"", "default", false},
	} {
		if got := cfg.MayActFor(c.user, c.tenant); got != c.may {
			t.Errorf("%q for %q: %v", c.user, c.tenant, got)
		}
	}
}
