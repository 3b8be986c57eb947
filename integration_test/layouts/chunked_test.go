package layouts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

func isList(req *http.Request) bool {
	return req.Method == http.MethodGet && !strings.Contains(req.URL.Path, "(PartitionKey=")
}

// newChunked returns a chunked store on a fresh table behind a hookable, checking transport.
func newChunked(t *testing.T, opts *chunked.Options) (*chunked.Store, *aztables.Client, *azurite.Checker, *itest.Hooked) {
	h := &itest.Hooked{}
	client, checker := azurite.NewTable(t, &azurite.TableOptions{Wrap: func(next policy.Transporter) policy.Transporter {
		h.Next = next
		return h
	}})
	s, err := chunked.New(client, opts)
	require.NoError(t, err)
	return s, client, checker, h
}

// chunkCount is the number of chunk entities of the table.
func chunkCount(t *testing.T, client *aztables.Client) int {
	sel := "PartitionKey,RowKey"
	n := 0
	for p := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Select: &sel}); p.More(); {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		n += len(page.Entities)
	}
	return n
}

var chunkedDay = time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)

// demoDay is the demo's series: a day at 1 Hz of a smooth 2-decimal gauge.
func demoDay(start time.Time) []tablets.Point {
	rng := rand.New(rand.NewPCG(1, 2))
	pts := make([]tablets.Point, 86400)
	for i := range pts {
		v := 20 + 5*math.Sin(2*math.Pi*float64(i)/86400) + 0.5*math.Sin(2*math.Pi*float64(i)/600) + rng.NormFloat64()*0.2
		pts[i] = tablets.Point{Time: start.Add(time.Duration(i) * time.Second), Value: math.Round(v*100) / 100}
	}
	return pts
}

// A day at 1 Hz in one Write is one request (the day is one partition), read back in one;
// the Write reads nothing.
func TestChunkedRequestCounts(t *testing.T) {
	s, _, checker, _ := newChunked(t, nil)
	ctx := context.Background()
	day := demoDay(chunkedDay)
	require.NoError(t, s.Write(ctx, "cpu", day...))
	w := checker.Stats()
	require.LessOrEqual(t, w.Requests, int64(2), "a day in one Write")
	require.Zero(t, w.Queries, "a Write never reads")
	got := itest.CollectPoints(t, s.Query(ctx, "cpu", chunkedDay, chunkedDay.Add(24*time.Hour)))
	itest.RequireSamePoints(t, day, got, "the day read back")
	r := checker.Stats()
	require.LessOrEqual(t, r.Requests-w.Requests, int64(2), "a day read back")
	t.Logf("a day at 1 Hz: written in %d requests (%d chunks, %.0f bytes of entities), read in %d", w.Requests, w.BatchOperations, float64(w.EntityBytes), r.Requests-w.Requests)

	// Not aligned to the partitions: two of them, two requests each way.
	offset := chunkedDay.Add(36 * time.Hour)
	shifted := demoDay(offset)
	before := checker.Stats()
	require.NoError(t, s.Write(ctx, "mem", shifted...))
	mid := checker.Stats()
	itest.RequireSamePoints(t, shifted, itest.CollectPoints(t, s.Query(ctx, "mem", offset, offset.Add(24*time.Hour))), "the shifted day")
	after := checker.Stats()
	require.LessOrEqual(t, mid.Requests-before.Requests, int64(2))
	require.LessOrEqual(t, after.Requests-mid.Requests, int64(2))
}

// Stored bytes a point (entity bodies written over points): the demo series at most a third
// of advanced's, a counter and a constant at most 2 bytes; random floats reported.
func TestChunkedStoredBytes(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	kinds := map[string]func(i int) float64{
		"counter":  func(i int) float64 { return float64(i) },
		"constant": func(int) float64 { return 42.5 },
		"random":   func(int) float64 { return rng.Float64() },
	}
	demo := demoDay(chunkedDay)
	perPoint := func(store string, pts []tablets.Point) float64 {
		client, checker := azurite.NewTable(t, nil)
		var s tablets.Store
		var err error
		if store == "advanced" {
			s, err = advanced.New(client, nil)
		} else {
			s, err = chunked.New(client, nil)
		}
		require.NoError(t, err)
		require.NoError(t, s.Write(ctx, "s", pts...))
		return float64(checker.Stats().EntityBytes) / float64(len(pts))
	}
	adv, chk := perPoint("advanced", demo), perPoint("chunked", demo)
	t.Logf("demo series: advanced %.2f bytes a point, chunked %.2f", adv, chk)
	require.LessOrEqual(t, chk, adv/3, "chunked itest.Stores the demo series in at most a third of advanced's bytes")
	for _, kind := range []string{"counter", "constant", "random"} {
		pts := make([]tablets.Point, 86400)
		for i := range pts {
			pts[i] = tablets.Point{Time: chunkedDay.Add(time.Duration(i) * time.Second), Value: kinds[kind](i)}
		}
		b := perPoint("chunked", pts)
		t.Logf("%s: chunked %.2f bytes a point", kind, b)
		if kind != "random" {
			require.LessOrEqual(t, b, 2.0, "%s: at most 2 bytes a point", kind)
		}
	}
}

// Irregular times (1 Hz with up to ±500 ms of jitter) and every kind of float come back
// exactly, bit for bit: NaN payloads (Prometheus' staleness marker), -0, subnormals, ±Inf.
func TestChunkedExactTimesAndValues(t *testing.T) {
	s, _, _, _ := newChunked(t, nil)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	specials := []float64{math.Float64frombits(0x7ff0000000000002), math.Copysign(0, -1), 5e-324, -2.5e-310,
		math.Inf(1), math.Inf(-1), math.MaxFloat64, math.Float64frombits(0xfff8000000000abc)}
	var pts []tablets.Point
	for i := range 7200 {
		jitter := time.Duration(rng.IntN(1001)-500) * time.Millisecond
		v := math.Round(rng.NormFloat64()*1000) / 100
		if i%97 == 0 {
			v = specials[(i/97)%len(specials)]
		}
		pts = append(pts, tablets.Point{Time: chunkedDay.Add(time.Duration(i)*time.Second + jitter), Value: v})
	}
	require.NoError(t, s.Write(ctx, "jitter", pts...))
	got := itest.CollectPoints(t, s.Query(ctx, "jitter", chunkedDay.Add(-time.Hour), chunkedDay.Add(3*time.Hour)))
	itest.RequireSamePoints(t, pts, got, "jittered points")
	// Two points 1 ms apart are two points.
	require.NoError(t, s.Write(ctx, "close", tablets.Point{Time: chunkedDay, Value: 1}, tablets.Point{Time: chunkedDay.Add(time.Millisecond), Value: 2}))
	require.Len(t, itest.CollectPoints(t, s.Query(ctx, "close", chunkedDay, chunkedDay.Add(time.Second))), 2)
}

// The later of two calls wins where their chunks overlap, for every read, and after a
// compaction.
func TestChunkedLastWriteWins(t *testing.T) {
	s, _, _, _ := newChunked(t, &chunked.Options{MaxChunkBytes: 1 << 10})
	ctx := context.Background()
	at := func(i int) time.Time { return chunkedDay.Add(time.Duration(i) * time.Second) }
	want := map[int]float64{}
	write := func(from, to, step int, v float64) {
		var pts []tablets.Point
		for i := from; i < to; i += step {
			pts = append(pts, tablets.Point{Time: at(i), Value: v + float64(i)})
			want[i] = v + float64(i)
		}
		require.NoError(t, s.Write(ctx, "lww", pts...))
	}
	write(0, 3000, 1, 0.5)     // many chunks
	write(1000, 2000, 3, 1e6)  // overlaps them, every third second
	write(1500, 4000, 2, -1e6) // overlaps both, and goes on
	write(2999, 3001, 1, 7)    // a short one at the edge
	var expect []tablets.Point
	for i := range 4000 {
		if v, ok := want[i]; ok {
			expect = append(expect, tablets.Point{Time: at(i), Value: v})
		}
	}
	check := func(what string) {
		itest.RequireSamePoints(t, expect, itest.CollectPoints(t, s.Query(ctx, "lww", at(0), at(4000))), what+": Query")
		var paged []tablets.Point
		for token := ""; ; {
			page, err := s.QueryPage(ctx, "lww", at(0), at(4000), 333, token)
			require.NoError(t, err)
			paged = append(paged, page.Points...)
			if token = page.Next; token == "" {
				break
			}
		}
		itest.RequireSamePoints(t, expect, paged, what+": QueryPage")
		var many []tablets.Point
		for sp, err := range s.QueryMany(ctx, []string{"lww", "other"}, at(0), at(4000)) {
			require.NoError(t, err)
			many = append(many, sp.Point)
		}
		itest.RequireSamePoints(t, expect, many, what+": QueryMany")
		latest, err := s.Latest(ctx, "lww", 50)
		require.NoError(t, err)
		tail := slices.Clone(expect[len(expect)-50:])
		slices.Reverse(tail)
		itest.RequireSamePoints(t, tail, latest, what+": Latest")
	}
	check("before compaction")
	require.NoError(t, s.Compact(ctx, "lww", at(0), at(4000)))
	check("after compaction")
}

// Many small chunks (a write a second) become few; the points stay the same.
func TestChunkedCompaction(t *testing.T) {
	s, client, checker, _ := newChunked(t, nil)
	ctx := context.Background()
	var all []tablets.Point
	for i := range 300 {
		p := tablets.Point{Time: chunkedDay.Add(time.Duration(i) * time.Second), Value: float64(i % 17)}
		all = append(all, p)
		require.NoError(t, s.Write(ctx, "flush", p))
	}
	require.Equal(t, 300, chunkCount(t, client))
	before := checker.Stats()
	itest.RequireSamePoints(t, all, itest.CollectPoints(t, s.Query(ctx, "flush", chunkedDay, chunkedDay.Add(time.Hour))), "before")
	readBefore := checker.Stats().ResponseBytes - before.ResponseBytes

	require.NoError(t, s.Compact(ctx, "flush", chunkedDay, chunkedDay.Add(time.Hour)))
	require.Equal(t, 1, chunkCount(t, client), "300 one-point chunks compact into one")
	before = checker.Stats()
	itest.RequireSamePoints(t, all, itest.CollectPoints(t, s.Query(ctx, "flush", chunkedDay, chunkedDay.Add(time.Hour))), "after")
	readAfter := checker.Stats().ResponseBytes - before.ResponseBytes
	t.Logf("reading 300 points: %d bytes from 300 chunks, %d from the compacted one", readBefore, readAfter)
	require.Less(t, readAfter, readBefore/4)

	// Compacting again changes nothing, and sends no transaction.
	before = checker.Stats()
	require.NoError(t, s.Compact(ctx, "flush", chunkedDay, chunkedDay.Add(time.Hour)))
	require.Equal(t, before.Batches, checker.Stats().Batches)
}

// A write that lands between a compaction's read and its transaction is kept, and wins.
func TestChunkedCompactionKeepsConcurrentWrite(t *testing.T) {
	s, client, _, hook := newChunked(t, nil)
	ctx := context.Background()
	var want []tablets.Point
	for i := range 50 {
		p := tablets.Point{Time: chunkedDay.Add(time.Duration(i) * time.Second), Value: float64(i)}
		want = append(want, p)
		require.NoError(t, s.Write(ctx, "c", p))
	}
	late := tablets.Point{Time: chunkedDay.Add(10 * time.Second), Value: -10}
	extra := tablets.Point{Time: chunkedDay.Add(10*time.Second + 500*time.Millisecond), Value: -10.5}
	injected := false
	hook.Arm(itest.IsBatch, func() {
		injected = true
		require.NoError(t, s.Write(ctx, "c", late, extra))
	}, nil)
	require.NoError(t, s.Compact(ctx, "c", chunkedDay, chunkedDay.Add(time.Hour)))
	require.True(t, injected)
	want[10] = late
	want = slices.Insert(want, 11, extra)
	itest.RequireSamePoints(t, want, itest.CollectPoints(t, s.Query(ctx, "c", chunkedDay, chunkedDay.Add(time.Hour))), "after the race")
	// The concurrent write's chunk is left beside the merged one (the compaction does not
	// read the partition again after one run of all its chunks), and merged by the next.
	require.Equal(t, 2, chunkCount(t, client))
	require.NoError(t, s.Compact(ctx, "c", chunkedDay, chunkedDay.Add(time.Hour)))
	require.Equal(t, 1, chunkCount(t, client))
	itest.RequireSamePoints(t, want, itest.CollectPoints(t, s.Query(ctx, "c", chunkedDay, chunkedDay.Add(time.Hour))), "compacted again")
}

// A Delete that lands between a compaction's read and its transaction makes the compaction
// start again: the deleted points stay deleted. Two compactions at once both succeed.
func TestChunkedCompactionConflicts(t *testing.T) {
	s, client, _, hook := newChunked(t, nil)
	ctx := context.Background()
	var want []tablets.Point
	for i := range 60 {
		p := tablets.Point{Time: chunkedDay.Add(time.Duration(i) * time.Second), Value: float64(i)}
		want = append(want, p)
		require.NoError(t, s.Write(ctx, "d", p))
	}
	hook.Arm(itest.IsBatch, func() {
		require.NoError(t, s.Delete(ctx, "d", chunkedDay.Add(20*time.Second), chunkedDay.Add(30*time.Second)))
	}, nil)
	require.NoError(t, s.Compact(ctx, "d", chunkedDay, chunkedDay.Add(time.Hour)))
	want = slices.Delete(want, 20, 30)
	itest.RequireSamePoints(t, want, itest.CollectPoints(t, s.Query(ctx, "d", chunkedDay, chunkedDay.Add(time.Hour))), "after compaction beside a delete")
	require.Equal(t, 1, chunkCount(t, client))

	for i := range 40 {
		require.NoError(t, s.Write(ctx, "e", tablets.Point{Time: chunkedDay.Add(time.Duration(i) * time.Second), Value: float64(i)}))
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Compact(ctx, "e", chunkedDay, chunkedDay.Add(time.Hour))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, itest.CollectPoints(t, s.Query(ctx, "e", chunkedDay, chunkedDay.Add(time.Hour))), 40)
	require.Equal(t, 2, chunkCount(t, client), "d's chunk and e's")
}

// A reader whose read takes several requests sees every point once when a compaction
// commits between two of them.
func TestChunkedReaderDuringCompaction(t *testing.T) {
	s, _, _, hook := newChunked(t, nil)
	ctx := context.Background()
	var want []tablets.Point
	// 1,200 one-point chunks: a Query takes two requests.
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 1200; i += 8 {
				p := tablets.Point{Time: chunkedDay.Add(time.Duration(i) * time.Second), Value: float64(i)}
				require.NoError(t, s.Write(ctx, "r", p))
			}
		}()
	}
	wg.Wait()
	for i := range 1200 {
		want = append(want, tablets.Point{Time: chunkedDay.Add(time.Duration(i) * time.Second), Value: float64(i)})
	}
	compacted := false
	compact := func() {
		compacted = true
		require.NoError(t, s.Compact(ctx, "r", chunkedDay, chunkedDay.Add(time.Hour)))
	}
	hook.Arm(isList, nil, compact)
	itest.RequireSamePoints(t, want, itest.CollectPoints(t, s.Query(ctx, "r", chunkedDay, chunkedDay.Add(time.Hour))), "Query across a compaction")
	require.True(t, compacted)

	// QueryPage and Latest read in several requests too.
	for i := range 300 {
		p := tablets.Point{Time: chunkedDay.Add(time.Duration(2000+i) * time.Second), Value: float64(i)}
		require.NoError(t, s.Write(ctx, "r", p))
		want = append(want, p)
	}
	var calls atomic.Int64
	hook.Arm(func(r *http.Request) bool { return isList(r) && calls.Add(1) == 3 }, nil, compact)
	var paged []tablets.Point
	for token := ""; ; {
		page, err := s.QueryPage(ctx, "r", chunkedDay, chunkedDay.Add(time.Hour), 700, token)
		require.NoError(t, err)
		paged = append(paged, page.Points...)
		if token = page.Next; token == "" {
			break
		}
		calls.Store(0)
		hook.Arm(func(r *http.Request) bool { return isList(r) && calls.Add(1) == 2 }, nil, compact)
	}
	itest.RequireSamePoints(t, want, paged, "QueryPage across compactions")
}

// A Write whose reply is lost is sent again by the retry policy with the same keys: the
// chunks are stored once.
func TestChunkedLostReplies(t *testing.T) {
	ctx := context.Background()
	clean, cleanClient, _, _ := newChunked(t, &chunked.Options{MaxChunkBytes: 1 << 10})
	lossyClient, _ := azurite.NewTable(t, &azurite.TableOptions{Wrap: func(next policy.Transporter) policy.Transporter {
		return fault.New(next, fault.Options{Seed: 7, LoseReply: 0.5})
	}, Retry: &policy.RetryOptions{MaxRetries: 20, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond}})
	lossy, err := chunked.New(lossyClient, &chunked.Options{MaxChunkBytes: 1 << 10})
	require.NoError(t, err)
	pts := demoDay(chunkedDay)[:20000]
	for i := 0; i < len(pts); i += 1000 {
		require.NoError(t, clean.Write(ctx, "s", pts[i:i+1000]...))
		require.NoError(t, lossy.Write(ctx, "s", pts[i:i+1000]...))
	}
	require.Equal(t, chunkCount(t, cleanClient), chunkCount(t, lossyClient), "the same chunks, once each")
	itest.RequireSamePoints(t, pts, itest.CollectPoints(t, lossy.Query(ctx, "s", chunkedDay, chunkedDay.Add(24*time.Hour))), "after lost replies")
}

// The maintenance scheduler's compaction (the server's loop) merges what a frequent writer
// writes into a chunked raw table, until its context ends: its first run covers the
// catch-up before it, and reports its range. Bad options are refused before any request.
func TestChunkedCompactedByScheduler(t *testing.T) {
	ctx := context.Background()
	db, svc, checker := dbtest.NewDB(t, &tsdb.Options{DirectWrites: true, Layout: func(c *aztables.Client) (tablets.Store, error) {
		return chunked.New(c, nil)
	}})
	now := time.Now().Truncate(time.Second).Add(-time.Minute)
	for i := range 30 {
		require.NoError(t, db.Write(ctx, "k", tablets.Point{Time: now.Add(time.Duration(i) * time.Second), Value: float64(i)}))
	}
	raw := map[string]*aztables.Client{} // the raw tables of the points (two across a period boundary)
	days := map[time.Time]bool{}         // their partitions (two across a day boundary)
	for _, at := range []time.Time{now, now.Add(29 * time.Second)} {
		days[at.Truncate(24*time.Hour)] = true
		period := int64(db.Options().RawPeriod / time.Second)
		name := db.Name() + "r" + strconv.FormatInt(at.Unix()/period*period, 10)
		raw[name] = svc.NewClient(name)
	}
	chunks := func() int {
		n := 0
		for _, c := range raw {
			n += chunkCount(t, c)
		}
		return n
	}
	require.Equal(t, 30, chunks())
	before := checker.Stats().Requests
	_, err := schedule.Tasks(db, schedule.Options{CompactEvery: 20 * time.Millisecond, CompactCatchUp: -time.Hour})
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
	require.Equal(t, before, checker.Stats().Requests, "refused before any request")
	runs, stop := itest.Schedule(t, db, schedule.Options{CompactEvery: 20 * time.Millisecond, CompactCatchUp: time.Hour}, schedule.Compact)
	runs.WaitCovered(t, now, now.Add(30*time.Second))
	require.Equal(t, len(days), chunks(), "a chunk a partition")
	require.Len(t, itest.CollectPoints(t, db.Query(ctx, "k", now, now.Add(time.Minute))), 30)
	// The scheduler keeps the compaction's lease for its next tick, and a minute
	// (tsdb.ExclusiveOptions.KeepFor): this process compacts next, another only after.
	leases := svc.NewClient(db.Name() + "m")
	lease, err := leases.GetEntity(ctx, tsdb.TaskCompact, "lease", nil)
	require.NoError(t, err, "the compaction's lease, kept between the runs")
	var e struct{ U float64 }
	require.NoError(t, json.Unmarshal(lease.Value, &e))
	require.Greater(t, time.UnixMilli(int64(e.U)), time.Now().Add(50*time.Second), "kept a minute past the next tick")

	// Another process's `tablets maintain` (schedule.Once) meanwhile leaves the compaction
	// to the keeper and goes on; it keeps no lease itself.
	other, err := tsdb.Open(ctx, svc, db.Name(), &tsdb.Options{DirectWrites: true, Layout: func(c *aztables.Client) (tablets.Store, error) {
		return chunked.New(c, nil)
	}})
	require.NoError(t, err)
	once := func() []string {
		var steps []string
		for s, err := range schedule.Once(ctx, other, nil) {
			require.NoError(t, err, s.Task)
			steps = append(steps, fmt.Sprintf("%s busy=%v", s.Task, s.Busy))
		}
		return steps
	}
	require.Equal(t, []string{"fold busy=false", "compact busy=true", "rollup busy=false", "flagged busy=false", "retain busy=false"}, once())
	for _, task := range []string{tsdb.TaskRollup, tsdb.TaskFlagged} {
		_, err := leases.GetEntity(ctx, task, "lease", nil)
		require.Error(t, err, "Once's %s lease, released", task)
	}

	// The scheduler stopped (its server's shutdown): it ends the lease it kept, and the
	// other process compacts at once, not a minute later.
	stop()
	_, err = leases.GetEntity(ctx, tsdb.TaskCompact, "lease", nil)
	var notFound *azcore.ResponseError
	require.True(t, errors.As(err, &notFound) && notFound.StatusCode == http.StatusNotFound, "the compaction's lease after the scheduler stopped: %v, want none", err)
	require.Equal(t, []string{"fold busy=false", "compact busy=false", "rollup busy=false", "flagged busy=false", "retain busy=false"}, once())
}

// The worked example of the README and the package doc, read back raw from the table.
func TestChunkedKeyLayout(t *testing.T) {
	s, client, _, _ := newChunked(t, nil)
	ctx := context.Background()
	at := time.Date(2015, 4, 28, 12, 4, 35, 250_000_000, time.UTC)
	require.NoError(t, s.Write(ctx, "cpu", tablets.Point{Time: at, Value: 0.5}, tablets.Point{Time: at.Add(1500 * time.Millisecond), Value: 0.75}))
	p := client.NewListEntitiesPager(nil)
	page, err := p.NextPage(ctx)
	require.NoError(t, err)
	require.Len(t, page.Entities, 1)
	var e map[string]any
	require.NoError(t, json.Unmarshal(page.Entities[0], &e))
	require.Equal(t, "cpu|001430179200000", e["PartitionKey"])
	require.Regexp(t, `^001430222675250-[0-9a-f]{16}-[0-9a-f]{8}$`, e["RowKey"])
	require.Equal(t, "001430222676750", e["L"])
	require.IsType(t, "", e["C"])
	t.Logf("entity: %s", page.Entities[0])
}

// Options are checked before any request.
func TestChunkedOptions(t *testing.T) {
	client, checker := azurite.NewTable(t, nil)
	for name, opts := range map[string]chunked.Options{
		"negative resolution":                 {Resolution: -time.Second},
		"partition not a multiple":            {Resolution: 7 * time.Millisecond, PartitionFactor: time.Second},
		"chunks too small":                    {MaxChunkBytes: 100},
		"chunks over a binary property's max": {MaxChunkBytes: 60 << 10},
		"negative concurrency":                {Concurrency: -1},
	} {
		_, err := chunked.New(client, &opts)
		require.ErrorIs(t, err, tablets.ErrInvalidOptions, name)
	}
	_, err := chunked.New(nil, nil)
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
	s, err := chunked.New(client, nil)
	require.NoError(t, err)
	require.Equal(t, chunked.Options{Resolution: time.Millisecond, PartitionFactor: 24 * time.Hour, MaxChunkBytes: 16 << 10, Concurrency: 8}, s.Options())
	// 1ns works; its times end in 2554.
	ns, err := chunked.New(client, &chunked.Options{Resolution: time.Nanosecond})
	require.NoError(t, err)
	require.ErrorIs(t, ns.Write(context.Background(), "a", tablets.Point{Time: time.Date(2600, 1, 1, 0, 0, 0, 0, time.UTC)}), tablets.ErrInvalidTime)
	require.ErrorIs(t, s.Compact(context.Background(), "a/b", chunkedDay, chunkedDay.Add(time.Hour)), tablets.ErrInvalidSeries)
	require.ErrorIs(t, s.Compact(context.Background(), "a", chunkedDay, chunkedDay.Add(-time.Hour)), tablets.ErrInvalidTime)
	require.Zero(t, checker.Stats().Requests)
}

// WriteAt's priority, not the order of the calls, decides which value of a time is read: a
// point moved late from elsewhere with the priority of its first write does not hide a later
// write, and compaction keeps the order.
func TestChunkedWriteAtPriority(t *testing.T) {
	s, _, _, _ := newChunked(t, nil)
	ctx := context.Background()
	at := func(i int) time.Time { return chunkedDay.Add(time.Duration(i) * time.Second) }
	now := uint64(time.Now().UnixNano())
	require.ErrorIs(t, s.WriteAt(ctx, "p", 0, tablets.Point{Time: at(0), Value: 1}), tablets.ErrInvalidOptions)
	require.NoError(t, s.WriteAt(ctx, "p", now-2e9, tablets.Point{Time: at(0), Value: 2}, tablets.Point{Time: at(1), Value: 2}))
	require.NoError(t, s.WriteAt(ctx, "p", now-3e9, tablets.Point{Time: at(1), Value: 3}, tablets.Point{Time: at(2), Value: 3}))
	require.NoError(t, s.WriteAt(ctx, "p", now-1e9, tablets.Point{Time: at(2), Value: 4}))
	want := []tablets.Point{{Time: at(0), Value: 2}, {Time: at(1), Value: 2}, {Time: at(2), Value: 4}, {Time: at(3), Value: 5}}
	require.NoError(t, s.Write(ctx, "p", tablets.Point{Time: at(3), Value: 5})) // the clock: above them all
	require.NoError(t, s.WriteAt(ctx, "p", now-4e9, tablets.Point{Time: at(3), Value: 6}))
	itest.RequireSamePoints(t, want, itest.CollectPoints(t, s.Query(ctx, "p", at(0), at(10))), "before compaction")
	require.NoError(t, s.Compact(ctx, "p", at(0), at(10)))
	itest.RequireSamePoints(t, want, itest.CollectPoints(t, s.Query(ctx, "p", at(0), at(10))), "after compaction")
}
