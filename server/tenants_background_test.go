package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// backgroundRetry is how often the tests' servers without a slot of the background lease
// try to take one.
const backgroundRetry = 100 * time.Millisecond

// backgroundFronts are fronts of one base database on Azurite, each another server's with
// the server options of its own in opts, their background lease of slots slots.
func backgroundFronts(t *testing.T, slots int, opts ...Options) []*Tenants {
	t.Helper()
	if testing.Short() {
		t.Skip("Azurite")
	}
	svc, _ := dbtest.NewService(t)
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	base := "bg" + hex.EncodeToString(b)
	dbtest.DropOnCleanup(t, base)
	var fronts []*Tenants
	for _, o := range opts {
		front, err := NewTenants(context.Background(), svc, base, &TenantsOptions{BackgroundServers: slots, BackgroundRetry: backgroundRetry, Server: &o})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = front.Close() })
		fronts = append(fronts, front)
	}
	return fronts
}

// loopsOn are options with a background loop (a fold an hour), loopsOff with none.
var (
	loopsOn  = Options{FoldEvery: time.Hour, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}
	loopsOff = Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}
)

// running is a front's Run (runFront), stopped (and waited for) by stop, or when the test ends.
type running struct {
	stop func()
	done chan error
}

func runFront(t *testing.T, front *Tenants) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- front.Run(ctx) }()
	t.Cleanup(func() { r.stop(); <-r.done })
	return r
}

// leaseHeld is the front's tablets_background_lease_held.
func leaseHeld(t *testing.T, front *Tenants) float64 {
	t.Helper()
	mfs, err := front.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tablets_background_lease_held" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no tablets_background_lease_held")
	return 0
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// ranJob reports whether the front's default server ran a background job it was given,
// and the job's error.
func ranJob(front *Tenants) (bool, error) {
	ran := false
	err := front.def.doJob(context.Background(), schedule.Fold, func(context.Context) error { ran = true; return nil })
	return ran, err
}

// With one slot of the background lease, one of two servers runs the background jobs, the
// other's count as busy; when the holder stops, it gives the slot back and the other takes
// it at its next try.
func TestTenantsBackgroundLease(t *testing.T) {
	fronts := backgroundFronts(t, 1, loopsOn, loopsOn)
	a, b := fronts[0], fronts[1]
	ra := runFront(t, a)
	eventually(t, "the first server takes the lease", func() bool { return leaseHeld(t, a) == 1 })
	runFront(t, b)
	time.Sleep(10 * backgroundRetry) // b tries ten times
	if leaseHeld(t, a) != 1 || leaseHeld(t, b) != 0 {
		t.Fatalf("lease held: a %v, b %v; want a alone", leaseHeld(t, a), leaseHeld(t, b))
	}
	if ran, err := ranJob(a); !ran || err != nil {
		t.Errorf("the holder's job: ran %v, %v", ran, err)
	}
	if ran, err := ranJob(b); ran || !errors.Is(err, tsdb.ErrTaskBusy) {
		t.Errorf("the other's job: ran %v, %v; want not run, busy", ran, err)
	}

	ra.stop()
	if err := <-ra.done; err != nil {
		t.Fatal(err)
	}
	ra.done <- nil // for the cleanup
	if leaseHeld(t, a) != 0 {
		t.Error("a stopped, and still holds the lease")
	}
	eventually(t, "the other server takes the slot given back", func() bool { return leaseHeld(t, b) == 1 })
	if ran, err := ranJob(b); !ran || err != nil {
		t.Errorf("b's job once it holds the lease: ran %v, %v", ran, err)
	}
}

// With two slots, two servers run their background work at once, and a third none; a
// server whose loops are all off (a backfill's) takes no slot.
func TestTenantsBackgroundLeaseSlots(t *testing.T) {
	fronts := backgroundFronts(t, 2, loopsOff, loopsOn, loopsOn, loopsOn)
	runFront(t, fronts[0])
	time.Sleep(5 * backgroundRetry)
	for _, f := range fronts[1:3] {
		runFront(t, f)
		eventually(t, "a server takes a free slot", func() bool { return leaseHeld(t, f) == 1 })
	}
	runFront(t, fronts[3])
	time.Sleep(10 * backgroundRetry)
	for i, want := range []float64{0, 1, 1, 0} {
		if got := leaseHeld(t, fronts[i]); got != want {
			t.Errorf("server %d: lease held %v, want %v", i, got, want)
		}
	}
}

// Without slots (the library's default) every server runs its jobs.
func TestTenantsBackgroundLeaseOff(t *testing.T) {
	fronts := backgroundFronts(t, 0, loopsOn)
	if leaseHeld(t, fronts[0]) != 1 {
		t.Error("without slots, the gauge says the server does not run its background work")
	}
	if ran, err := ranJob(fronts[0]); !ran || err != nil {
		t.Errorf("without slots: ran %v, %v", ran, err)
	}
}

func TestTenantsBackgroundServersOption(t *testing.T) {
	for _, o := range []TenantsOptions{{BackgroundServers: -1}, {BackgroundRetry: -time.Second}} {
		if _, err := NewTenants(context.Background(), nil, "bgwork", &o); err == nil || !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", o, err)
		}
	}
}
