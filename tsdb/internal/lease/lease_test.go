package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
)

var (
	errBusy = errors.New("busy")
	errLost = errors.New("lost")
	kind    = Kind{PartitionKey: "compact", Term: 5 * time.Minute, Margin: time.Minute, Busy: errBusy, Lost: errLost}
)

// catalog is a table of its own on the shared Azurite, through the limit Checker.
func catalog(t *testing.T) *aztables.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("Azurite")
	}
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: checker}})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("lease%d", rand.Uint32())
	c := svc.NewClient(name)
	if _, err := c.CreateTable(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), nil) })
	return c
}

// One holder at a time: a second Take is Busy until the lease ends (by the clock) or is
// released; a holder whose lease another took loses it at its next renewal; Keep renews
// only once half the term has passed, and Check counts the lease lost within its margin.
func TestLeaseOneHolder(t *testing.T) {
	ctx := context.Background()
	c := catalog(t)
	clk := clock.New(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	a, err := Take(ctx, c, kind, "a", clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Take(ctx, c, kind, "b", clk.Now); !errors.Is(err, errBusy) {
		t.Fatalf("a second holder: %v, want busy", err)
	}
	until := func() time.Time {
		resp, err := c.GetEntity(ctx, "compact", RowKey, nil)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ U float64 }
		if err := json.Unmarshal(resp.Value, &e); err != nil {
			t.Fatal(err)
		}
		return time.UnixMilli(int64(e.U)).UTC()
	}
	if got, want := until(), clk.Now().Add(kind.Term); !got.Equal(want) {
		t.Fatalf("the lease ends at %v, want %v", got, want)
	}
	clk.Add(2 * time.Minute) // before half the term: Keep writes nothing
	if err := a.Keep(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := until(), clk.Now().Add(kind.Term-2*time.Minute); !got.Equal(want) {
		t.Fatalf("kept before half the term: ends at %v, want %v (not renewed)", got, want)
	}
	clk.Add(time.Minute) // past half: renewed for a term from now
	if err := a.Keep(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := until(), clk.Now().Add(kind.Term); !got.Equal(want) {
		t.Fatalf("kept past half the term: ends at %v, want %v", got, want)
	}
	clk.Add(kind.Term - kind.Margin + time.Second) // within the margin: lost for writing
	if err := a.Check(); !errors.Is(err, errLost) {
		t.Fatalf("within the margin: %v, want lost", err)
	}
	clk.Add(kind.Margin) // ended: another takes it
	b, err := Take(ctx, c, kind, "b", clk.Now)
	if err != nil {
		t.Fatalf("after the end: %v", err)
	}
	if err := a.Renew(ctx); !errors.Is(err, errLost) {
		t.Fatalf("the first holder renewing a lease another took: %v, want lost", err)
	}
	b.Release(ctx)
	if _, err := Take(ctx, c, kind, "c", clk.Now); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

// Do runs the work only when it takes the lease, releases it after, and cancels the work
// of a holder whose lease another process took, returning Lost.
func TestDo(t *testing.T) {
	ctx := context.Background()
	c := catalog(t)
	clk := clock.New(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	var ran atomic.Int32
	work := func(context.Context) error { ran.Add(1); return nil }
	if err := Do(ctx, c, kind, "a", clk.Now, time.Millisecond, 0, work); err != nil || ran.Load() != 1 {
		t.Fatalf("Do: %v, %d runs", err, ran.Load())
	}
	// Released: the next takes it at once.
	other, err := Take(ctx, c, kind, "other", clk.Now)
	if err != nil {
		t.Fatalf("after Do: %v", err)
	}
	if err := Do(ctx, c, kind, "a", clk.Now, time.Millisecond, 0, work); !errors.Is(err, errBusy) || ran.Load() != 1 {
		t.Fatalf("Do while another holds the lease: %v, %d runs; want busy, and no run", err, ran.Load())
	}
	other.Release(ctx)

	// A holder whose lease another took (it ended while the holder's clock said otherwise)
	// learns at its next renewal, and its work is cancelled.
	err = Do(ctx, c, kind, "a", clk.Now, time.Millisecond, 0, stolen(c, clk))
	if !errors.Is(err, errLost) {
		t.Fatalf("Do whose lease another took: %v, want lost", err)
	}
	if _, err := Take(ctx, c, kind, "b", clk.Now); !errors.Is(err, errBusy) {
		t.Fatalf("the thief's lease after Do: %v, want busy (Do released only its own)", err)
	}
}

// stolen is work during which another process takes the lease (it ended while the
// holder's clock said otherwise), then waits for its context to be cancelled: Keep renews,
// and finds the lease taken.
func stolen(c *aztables.Client, clk *clock.Clock) func(context.Context) error {
	return func(ctx context.Context) error {
		if _, err := c.UpsertEntity(ctx, Body("compact", "thief", clk.Now().Add(time.Hour)), &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace}); err != nil {
			return err
		}
		clk.Add(kind.Term/2 + time.Second)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
			return errors.New("not cancelled in a minute")
		}
	}
}

// Do with keepFor keeps the lease after the work: the same holder's next Do within it takes
// the lease again and runs, another's finds it busy until keepFor has passed. A lease the
// work lost is not kept.
func TestDoKeepFor(t *testing.T) {
	ctx := context.Background()
	c := catalog(t)
	clk := clock.New(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	var ran atomic.Int32
	work := func(context.Context) error { ran.Add(1); return nil }
	const keep = 3 * time.Minute
	if err := Do(ctx, c, kind, "a", clk.Now, time.Millisecond, keep, work); err != nil || ran.Load() != 1 {
		t.Fatalf("Do: %v, %d runs", err, ran.Load())
	}
	clk.Add(2 * time.Minute)
	if err := Do(ctx, c, kind, "b", clk.Now, time.Millisecond, keep, work); !errors.Is(err, errBusy) || ran.Load() != 1 {
		t.Fatalf("another holder's Do within keepFor: %v, %d runs; want busy, and no run", err, ran.Load())
	}
	if err := Do(ctx, c, kind, "a", clk.Now, time.Millisecond, keep, work); err != nil || ran.Load() != 2 {
		t.Fatalf("the keeper's next Do: %v, %d runs; want it run", err, ran.Load())
	}
	clk.Add(keep - time.Second) // kept from the second Do's end
	if _, err := Take(ctx, c, kind, "b", clk.Now); !errors.Is(err, errBusy) {
		t.Fatalf("another's take a second before the keeping ends: %v, want busy", err)
	}
	clk.Add(2 * time.Second)
	b, err := Take(ctx, c, kind, "b", clk.Now)
	if err != nil {
		t.Fatalf("another's take once the keeping ended: %v", err)
	}
	if err := Do(ctx, c, kind, "a", clk.Now, time.Millisecond, keep, work); !errors.Is(err, errBusy) || ran.Load() != 2 {
		t.Fatalf("the former keeper's Do while another holds it: %v, %d runs; want busy", err, ran.Load())
	}
	b.Release(ctx)

	// Lost during the work: not kept, the thief's lease stands.
	err = Do(ctx, c, kind, "a", clk.Now, time.Millisecond, keep, stolen(c, clk))
	if !errors.Is(err, errLost) {
		t.Fatalf("Do whose lease another took: %v, want lost", err)
	}
	resp, err := c.GetEntity(ctx, "compact", RowKey, nil)
	if err != nil || !strings.Contains(string(resp.Value), `"thief"`) {
		t.Fatalf("the lease after a lost Do with keepFor: %s, %v; want the thief's", resp.Value, err)
	}
}

// A kept lease ends early by its holder's ReleaseHeld (another takes it at once), or by a
// Do whose context ended (its process stopping); ReleaseHeld leaves another holder's lease
// alone, and one that is gone.
func TestReleaseHeld(t *testing.T) {
	ctx := context.Background()
	c := catalog(t)
	clk := clock.New(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	work := func(context.Context) error { return nil }
	const keep = time.Hour
	if ok, err := ReleaseHeld(ctx, c, kind, "a"); ok || err != nil {
		t.Fatalf("ReleaseHeld of no lease: %v, %v; want false, nil", ok, err)
	}
	if err := Do(ctx, c, kind, "a", clk.Now, time.Millisecond, keep, work); err != nil {
		t.Fatal(err)
	}
	if ok, err := ReleaseHeld(ctx, c, kind, "b"); ok || err != nil {
		t.Fatalf("ReleaseHeld by another holder: %v, %v; want false, nil", ok, err)
	}
	if _, err := Take(ctx, c, kind, "b", clk.Now); !errors.Is(err, errBusy) {
		t.Fatalf("another's take after another's ReleaseHeld: %v, want busy (still kept)", err)
	}
	if ok, err := ReleaseHeld(ctx, c, kind, "a"); !ok || err != nil {
		t.Fatalf("the keeper's ReleaseHeld: %v, %v; want true, nil", ok, err)
	}
	b, err := Take(ctx, c, kind, "b", clk.Now)
	if err != nil {
		t.Fatalf("another's take once the keeper released: %v", err)
	}
	b.Release(ctx)

	// A Do cut off by its context's end releases, keepFor or not.
	stop, cancel := context.WithCancel(ctx)
	err = Do(stop, c, kind, "a", clk.Now, time.Millisecond, keep, func(context.Context) error { cancel(); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if b, err := Take(ctx, c, kind, "b", clk.Now); err != nil {
		t.Fatalf("another's take after a Do whose context ended: %v, want taken (released)", err)
	} else {
		b.Release(ctx)
	}
}
