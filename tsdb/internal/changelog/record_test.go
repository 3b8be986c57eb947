package changelog_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
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
	name := logTable(t, svc)
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

// logTable makes a table of a random name on svc for a log, deleted at the end.
func logTable(t *testing.T, svc *aztables.ServiceClient) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "log" + hex.EncodeToString(b) + "m"
	_, err := svc.CreateTable(context.Background(), name, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = svc.DeleteTable(context.Background(), name, nil) })
	return name
}

// classRecorder sends requests on, recording their reqlimit class, and holds the first
// background one a while (so that others wait for its update).
type classRecorder struct {
	mu      sync.Mutex
	classes []string
	held    bool
}

func (r *classRecorder) Do(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	class := "other"
	switch {
	case reqlimit.IsIngest(ctx):
		class = "ingest"
	case reqlimit.IsBackground(ctx):
		class = "background"
	}
	r.mu.Lock()
	r.classes = append(r.classes, class)
	hold := class == "background" && !r.held
	r.held = r.held || hold
	r.mu.Unlock()
	if hold {
		time.Sleep(300 * time.Millisecond)
	}
	return azurite.DefaultTransport().Do(req)
}

// An update made for changes that waited (in the background) has the class of the account's
// request limit of a remote write among them, not none: else the write that waits for it
// waits behind the queries' share of the account's requests.
func TestRecordKeepsIngestClass(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	rec := &classRecorder{}
	checker := azurite.NewChecker(rec, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: checker, Retry: azurite.TestRetryOptions()}})
	require.NoError(t, err)
	log := changelog.New(svc.NewClient(logTable(t, svc)), func(p uint64) string { return fmt.Sprintf("%012d", p) }, nil)
	rec.mu.Lock()
	rec.classes = nil
	rec.mu.Unlock()

	const p = 1716422400
	var wg sync.WaitGroup
	wg.Go(func() { // a fold's record: its update under way while the writes come
		require.NoError(t, log.Record(reqlimit.Background(ctx), map[uint64]changelog.Range{p: {From: 0, To: 1}}))
	})
	time.Sleep(50 * time.Millisecond)
	for i := range 5 {
		wg.Go(func() {
			require.NoError(t, log.Record(reqlimit.Ingest(ctx), map[uint64]changelog.Range{p: {From: int64(i + 1), To: int64(i + 2)}}))
		})
	}
	wg.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t.Logf("the updates' requests: %v", rec.classes)
	require.Contains(t, rec.classes, "ingest", "the writes' changes were recorded by an update of their own")
	require.NotContains(t, rec.classes, "other")
}

// The entity keeps the hull of every change once its ranges no longer hold them all (the
// earliest change, at 1,000, is the first of 70); an entity a writer of an earlier version
// replaced (no hull) knows it again from its next change only while its ranges hold every
// change.
func TestRecordKeepsHull(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	svc, _ := dbtest.NewService(t)
	client := svc.NewClient(logTable(t, svc))
	key := func(p uint64) string { return fmt.Sprintf("%012d", p) }
	log := changelog.New(client, key, nil)
	const p, q = 1716422400, 1717027200

	record := func(p uint64, from, to int64) {
		t.Helper()
		require.NoError(t, log.Record(ctx, map[uint64]changelog.Range{p: {From: from, To: to}}))
	}
	hull := func(p uint64) (changelog.Range, bool) {
		t.Helper()
		s, err := log.State(ctx, p)
		require.NoError(t, err)
		return s.Hull()
	}
	record(p, 1000, 2000)
	for i := range changelog.Kept + 5 {
		record(p, int64(5000+i*10), int64(5000+i*10+5))
	}
	h, ok := hull(p)
	require.True(t, ok, "the entity keeps the hull past its ranges")
	require.Equal(t, changelog.Range{From: 1000, To: 5000 + (changelog.Kept+4)*10 + 5}, h)

	// An earlier version's writer replaces the entities without the hull: p's ranges no
	// longer hold its first changes, q's (two changes) do.
	earlier := func(p uint64, gen int, ranges ...int64) {
		t.Helper()
		var c []byte
		for _, v := range ranges {
			c = binary.BigEndian.AppendUint64(c, uint64(v))
		}
		body := fmt.Sprintf(`{"PartitionKey":%q,"RowKey":%q,"V":1,"V@odata.type":"Edm.Double","G":%d,"G@odata.type":"Edm.Double","C@odata.type":"Edm.Binary","C":%q}`,
			changelog.Partition, key(p), gen, base64.StdEncoding.EncodeToString(c))
		_, err := client.UpsertEntity(ctx, []byte(body), &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace})
		require.NoError(t, err)
	}
	earlier(p, changelog.Kept+10, 9000, 9001)
	earlier(q, 2, 300, 400, 100, 200)
	_, ok = hull(p)
	require.False(t, ok)
	record(p, 9100, 9200)
	_, ok = hull(p)
	require.False(t, ok, "not known again once the ranges lost a change")
	record(q, 500, 600)
	h, ok = hull(q)
	require.True(t, ok, "known again from the ranges that hold every change")
	require.Equal(t, changelog.Range{From: 100, To: 600}, h)
}
