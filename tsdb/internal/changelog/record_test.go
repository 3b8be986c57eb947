package changelog_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// Two processes record 40 changes of one period at once: none is lost (each is inside a
// range of a generation after the state read before), and a process's concurrent changes
// share updates.
func TestRecordConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	svc, checker := dbtest.NewService(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "log" + hex.EncodeToString(b) + "m"
	_, err := svc.CreateTable(ctx, name, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = svc.DeleteTable(context.Background(), name, nil) })
	key := func(p uint64) string { return fmt.Sprintf("%012d", p) }
	logs := []*changelog.Log{changelog.New(svc.NewClient(name), key, nil), changelog.New(svc.NewClient(name), key, nil)}
	const p = 1716422400

	before, err := logs[0].State(ctx, p)
	require.NoError(t, err)
	require.Zero(t, before.Gen(), "no entity: generation 0")
	checker.Reset()
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Go(func() {
			errs[i] = logs[i%2].Record(ctx, map[uint64]changelog.Range{p: {From: int64(i * 10), To: int64(i*10 + 1)}})
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	after, err := logs[1].State(ctx, p)
	require.NoError(t, err)
	t.Logf("40 changes in %d generations, %d requests", after.Gen(), checker.Stats().Requests)
	require.GreaterOrEqual(t, after.Gen(), uint64(2), "two processes: two updates at least")
	require.LessOrEqual(t, after.Gen(), uint64(40))
	// What was read before generation 0 over each change's range stands no longer.
	for i := range errs {
		from := int64(i * 10)
		require.Equal(t, from, after.ValidUntil(0, from, from+1), "change %d", i)
	}
	// And a range no change touched still stands.
	require.Equal(t, int64(406), after.ValidUntil(0, 401, 406))
}
