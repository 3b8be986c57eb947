package staging

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The staging mark of docs/format.md is the entity markStaged writes, in the staging log's
// partition, before the log's entity: a listing reads it first.
func TestStagingMarkFormat(t *testing.T) {
	doc := formatdoc.JSON(t, "staging-mark")
	var r [16]byte
	for i := range r {
		r[i] = byte(0xf0 - i*0x0f)
	}
	if body := stagingMarkBody(r); !bytes.Equal(bytes.TrimSpace(doc), body) {
		t.Errorf("the document's entity\n%s\nmarkStaged's\n%s", doc, body)
	}
	if !(StagingMarkKey < StagingLogKey) {
		t.Errorf("the mark's RowKey %q does not sort before the staging log's %q", StagingMarkKey, StagingLogKey)
	}
	if !strings.Contains(listingSelect, ","+logsMarkProp) {
		t.Errorf("the listing's $select %q lacks the mark's value %s", listingSelect, logsMarkProp)
	}
}

// A change waits for a write of the mark that began after it: changes made while a write
// is under way share the next one (two writes for three changes here), each gets its
// write's error, and one whose context ends stops waiting.
func TestMarkWritesJoin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		results := make(chan error) // each write's outcome, given by the test
		var writes atomic.Int32
		m := &markWrites{write: func(ctx context.Context) error {
			writes.Add(1)
			return <-results
		}}
		ctx := context.Background()
		done := make([]chan error, 3)
		call := func(i int) {
			done[i] = make(chan error, 1)
			go func() { done[i] <- m.mark(ctx) }()
		}
		pending := func(i int) bool {
			select {
			case err := <-done[i]:
				done[i] <- err
				return false
			default:
				return true
			}
		}

		call(0)
		synctest.Wait()
		if writes.Load() != 1 {
			t.Fatalf("%d writes for the first change, want 1", writes.Load())
		}
		call(1)
		call(2)
		synctest.Wait()
		if writes.Load() != 1 {
			t.Fatalf("a write began while one was under way (%d)", writes.Load())
		}
		results <- nil // the first write ends
		synctest.Wait()
		if err := <-done[0]; err != nil {
			t.Fatalf("the first change: %v", err)
		}
		if !pending(1) || !pending(2) {
			t.Fatal("a change made during the first write took it")
		}
		if writes.Load() != 2 {
			t.Fatalf("%d writes, want the second under way", writes.Load())
		}
		failed := errors.New("503")
		results <- failed
		synctest.Wait()
		for i := 1; i < 3; i++ {
			if err := <-done[i]; !errors.Is(err, failed) {
				t.Errorf("change %d: %v, want the second write's error", i, err)
			}
		}
		if writes.Load() != 2 {
			t.Errorf("%d writes for three changes, want 2", writes.Load())
		}

		// A change whose context ends while its write is under way.
		cctx, cancel := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() { stopped <- m.mark(cctx) }()
		synctest.Wait()
		cancel()
		if err := <-stopped; !errors.Is(err, context.Canceled) {
			t.Errorf("a change whose context ended: %v", err)
		}
		results <- nil // the write ends all the same, and none follows
		synctest.Wait()
		if writes.Load() != 3 {
			t.Errorf("%d writes, want 3", writes.Load())
		}
	})
}
