package staging

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed71701133/tablets"
)

func TestReadBudgetChecked(t *testing.T) {
	for _, n := range []int64{0, -1} {
		if _, err := NewReadBudget(n); !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("NewReadBudget(%d): %v, want ErrInvalidOptions", n, err)
		}
	}
	b, err := NewReadBudget(10)
	if err != nil {
		t.Fatal(err)
	}
	done, err := b.take(context.Background(), nil, 25) // more than the budget: all of it
	if err != nil {
		t.Fatal(err)
	}
	if used, _ := b.InUse(); used != 10 {
		t.Fatalf("in use %d, want the whole budget 10", used)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.take(ctx, nil, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("take on a full budget, cancelled: %v", err)
	}
	done()
	if used, waiting := b.InUse(); used != 0 || waiting != 0 {
		t.Fatalf("after the release: %d in use, %d waiting", used, waiting)
	}
	var none *ReadBudget
	if done, err := none.take(ctx, nil, 1<<40); err != nil {
		t.Fatal(err)
	} else {
		done()
	}
	read := none.beginRead()
	if err := read.hold(ctx, 1<<40); err != nil {
		t.Fatal(err)
	}
	read.end()
}

// Reads that collect points hold them until they end, and the oldest never waits: reads
// that each hold some and want more cannot wait for each other forever. The others, and
// pages, wait in arrival order for room; the oldest read's waiters go first.
func TestReadBudgetOldestReadGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, err := NewReadBudget(100)
		if err != nil {
			t.Fatal(err)
		}
		oldest, other := b.beginRead(), b.beginRead()
		if err := other.hold(ctx, 60); err != nil {
			t.Fatal(err)
		}
		if err := oldest.hold(ctx, 60); err != nil { // past the size: it never waits
			t.Fatal(err)
		}
		if used, waiting := b.InUse(); used != 120 || waiting != 0 {
			t.Fatalf("in use %d, %d waiting; want 120 and 0", used, waiting)
		}
		var order []string
		var mu sync.Mutex
		note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
		go func() {
			if err := other.hold(ctx, 10); err != nil {
				t.Error(err)
			}
			note("other")
		}()
		synctest.Wait()
		go func() {
			done, err := b.take(ctx, nil, 40)
			if err != nil {
				t.Error(err)
				return
			}
			note("page")
			time.Sleep(time.Second)
			done()
		}()
		synctest.Wait()
		if used, waiting := b.InUse(); len(order) != 0 || used != 120 || waiting != 2 {
			t.Fatalf("before the oldest ends: %v went on, %d in use, %d waiting", order, used, waiting)
		}
		// The oldest's page goes past the two waiting.
		done, err := b.take(ctx, oldest, 8)
		if err != nil {
			t.Fatal(err)
		}
		done()
		oldest.end()
		synctest.Wait()
		// other is the oldest now: it goes on; the page (40) waits for room (70 of 100 in use).
		if used, waiting := b.InUse(); !slices.Equal(order, []string{"other"}) || used != 70 || waiting != 1 {
			t.Fatalf("after the oldest ended: %v went on, %d in use, %d waiting", order, used, waiting)
		}
		other.end()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		if used, waiting := b.InUse(); !slices.Equal(order, []string{"other", "page"}) || used != 0 || waiting != 0 {
			t.Fatalf("at the end: %v went on, %d in use, %d waiting", order, used, waiting)
		}
	})
}

// Many reads sharing a small budget, each collecting in steps far more than the budget,
// all end; the budget never held more than its size and the oldest read's points; a read
// whose context ends while it waits gives back what it held.
func TestReadBudgetReadsAllEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewReadBudget(1000)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		most := int64(0)
		for i := range 12 {
			wg.Go(func() {
				read := b.beginRead()
				defer read.end()
				for range 20 {
					done, err := b.take(context.Background(), read, 300) // a page
					if err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Duration(1+i%3) * time.Millisecond)
					done()
					if err := read.hold(context.Background(), 100); err != nil {
						t.Error(err)
						return
					}
					used, _ := b.InUse()
					mu.Lock()
					most = max(most, used)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		// At most the size, what the oldest read holds (2,000), and its page in flight.
		if used, waiting := b.InUse(); used != 0 || waiting != 0 || most > 1000+2000+300 {
			t.Fatalf("after all reads: %d in use, %d waiting; at most %d in use", used, waiting, most)
		}

		read, blocker := b.beginRead(), b.beginRead()
		if err := blocker.hold(context.Background(), 50); err != nil {
			t.Fatal(err)
		}
		if err := read.hold(context.Background(), 2000); err != nil { // the oldest
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := blocker.hold(ctx, 50); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a hold past its context: %v", err)
		}
		blocker.end()
		read.end()
		if used, waiting := b.InUse(); used != 0 || waiting != 0 {
			t.Fatalf("after a cancelled hold: %d in use, %d waiting", used, waiting)
		}
	})
}

// give hands back part of what a read holds (a decoded page it yielded): the waiters that
// now fit go on, and end gives back only the rest.
func TestReadBudgetGive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, err := NewReadBudget(100)
		if err != nil {
			t.Fatal(err)
		}
		read := b.beginRead()
		if err := read.hold(ctx, 80); err != nil {
			t.Fatal(err)
		}
		granted := false
		go func() {
			done, err := b.take(ctx, nil, 40)
			if err != nil {
				t.Error(err)
				return
			}
			granted = true
			done()
		}()
		synctest.Wait()
		if granted {
			t.Fatal("a page of 40 went on with 80 of 100 in use")
		}
		read.give(50)
		synctest.Wait()
		if used, waiting := b.InUse(); !granted || used != 30 || waiting != 0 {
			t.Fatalf("after giving back 50: page granted %v, %d in use, %d waiting; want true, 30, 0", granted, used, waiting)
		}
		read.give(1000) // at most what it holds
		if used, _ := b.InUse(); used != 0 {
			t.Fatalf("after giving back more than it held: %d in use", used)
		}
		read.end()
		if used, _ := b.InUse(); used != 0 {
			t.Fatalf("after the read ended: %d in use", used)
		}
	})
}

// A read that steps back (it waits for another's fetch, holding nothing) is no longer the
// oldest: the next oldest takes past the budget, where it waited for room.
func TestReadBudgetStepBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, err := NewReadBudget(100)
		if err != nil {
			t.Fatal(err)
		}
		waiting, fetching := b.beginRead(), b.beginRead()
		if !waiting.unheld() {
			t.Fatal("a read begun holds something")
		}
		if err := fetching.hold(ctx, 80); err != nil {
			t.Fatal(err)
		}
		went := make(chan struct{})
		go func() {
			if err := fetching.hold(ctx, 50); err != nil { // past the size: waits for room
				t.Error(err)
			}
			close(went)
		}()
		synctest.Wait()
		select {
		case <-went:
			t.Fatal("a read not the oldest took past the budget")
		default:
		}
		waiting.stepBack()
		synctest.Wait()
		select {
		case <-went:
		default:
			t.Fatal("the read stepped ahead of did not go on")
		}
		if used, n := b.InUse(); used != 130 || n != 0 || fetching.unheld() {
			t.Fatalf("%d in use, %d waiting; want 130 and 0", used, n)
		}
		fetching.end()
		waiting.end()
		if used, _ := b.InUse(); used != 0 {
			t.Fatalf("%d in use at the end", used)
		}
	})
}
