package promqlsuite_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/internal/engineselect"
	"github.com/seed71701133/tablets/tsdb"
)

// promqlNow is the clock of the suite's databases: the suite loads its samples from
// 1970-01-01 on, for at most about six weeks (1h x 1000), so the clock stands after every
// load. It stands still (every write of a database falls in one staging arrival bucket)
// unless the database is maintained after each load.
var promqlNow = time.Date(1970, 3, 1, 0, 0, 0, 0, time.UTC)

// promqlMaintainStep is how far a maintained database's clock moves before the maintenance
// after a load: past the end of the load's staging arrival bucket and the fold's margin, so
// that the fold folds it.
const promqlMaintainStep = time.Hour

// promqlMaintainParts is how many requests a maintained database's loads are cut into.
const promqlMaintainParts = 4

// promqlStorage is a storage.Storage over a fresh tsdb database on the shared Azurite,
// opened as `tablets serve` opens its database (chunked at a millisecond, staging on, the
// server's own options), but with no raw retention (the samples are from 1970) and a clock
// of its own. Reads go through the server's Queryable; appends through its remote-write
// handler.
type promqlStorage struct {
	name    string
	admin   *aztables.ServiceClient // drops the tables on Close, outside the Checker
	checker *azurite.Checker
	srv     *server.Server
	stats   *fileStats

	// maintained: each load is written as a Prometheus 3 streams it by default, in
	// promqlMaintainParts remote write 1.0 requests cut by time (a chunk each); after it
	// the clock moves on, and
	// the staged points are folded into the raw tables and the raw and histogram chunks
	// compacted, as the server's loops do: reads then see what a long-running server's
	// database holds.
	maintained bool
	clock      atomic.Int64 // Options.Now, Unix nanoseconds

	closeOnce sync.Once
	closeErr  error
}

var _ storage.Storage = (*promqlStorage)(nil)

// newPromQLStorage opens a fresh database; Close drops its tables. maintained: see
// promqlStorage.
func newPromQLStorage(t testing.TB, stats *fileStats, maintained bool) *promqlStorage {
	t.Helper()
	s := &promqlStorage{stats: stats, maintained: maintained}
	s.clock.Store(promqlNow.UnixNano())
	svc, checker := dbtest.NewService(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "pq" + hex.EncodeToString(b)
	db, err := tsdb.Open(context.Background(), svc, name, &tsdb.Options{
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, &chunked.Options{}) },
		Now:    func() time.Time { return time.Unix(0, s.clock.Load()).UTC() },
	})
	require.NoError(t, err)
	// No background loops: a database is folded and compacted only when maintained, after
	// each load, at a known time.
	srv, err := server.New(db, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1})
	require.NoError(t, err)
	admin, err := azurite.Shared(t).NewServiceClient(nil)
	require.NoError(t, err)
	stats.mu.Lock()
	stats.names = append(stats.names, name)
	stats.mu.Unlock()
	s.name, s.admin, s.checker, s.srv = name, admin, checker, srv
	return s
}

// Querier is the server's Queryable's, counting Selects.
func (s *promqlStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := s.srv.Queryable().Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &countingQuerier{Querier: q, stats: s.stats}, nil
}

// errChunkQuerier: the engine reads samples, and the suite never asks for chunks.
var errChunkQuerier = errors.New("promqltest storage: chunk queriers are not supported")

// ChunkQuerier is not served (errChunkQuerier).
func (s *promqlStorage) ChunkQuerier(int64, int64) (storage.ChunkQuerier, error) {
	return nil, errChunkQuerier
}

// StartTime is the oldest time tablets stores.
func (s *promqlStorage) StartTime() (int64, error) { return tablets.MinTime.UnixMilli(), nil }

// Appender buffers samples; Commit sends them as one remote write 2.0 request to the
// server (its /api/v1/write route), or maintained as 1.0 requests, counting what the write
// cost.
func (s *promqlStorage) Appender(context.Context) storage.Appender {
	var before int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		before = s.checker.Stats().Requests
		s.srv.ServeHTTP(w, r)
	})
	app := newRemoteWriteAppender(handler, func(samples, histograms int, took time.Duration) {
		requests := s.checker.Stats().Requests - before
		st := s.stats
		st.mu.Lock()
		defer st.mu.Unlock()
		st.writes++
		st.samples += samples
		st.histograms += histograms
		st.writeRequests += requests
		st.writeTime += took
	})
	if s.maintained {
		app.parts, app.v1, app.committed = promqlMaintainParts, true, s.maintain
	}
	return app
}

// maintain moves the clock on, folds the staged points and compacts every raw and
// histogram table of the suite's times.
func (s *promqlStorage) maintain() error {
	ctx := context.Background()
	now := time.Unix(0, s.clock.Add(int64(promqlMaintainStep))).UTC()
	before := s.checker.Stats()
	db := s.srv.DB()
	report, err := db.Fold(ctx)
	if err != nil {
		return fmt.Errorf("promqltest storage: fold: %w", err)
	}
	folded := s.checker.Stats()
	if err := db.Compact(ctx, tablets.MinTime, now); err != nil {
		return fmt.Errorf("promqltest storage: compact: %w", err)
	}
	after := s.checker.Stats()
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	s.stats.maintainRequests += after.Requests - before.Requests
	s.stats.foldedPoints += report.Points
	s.stats.compactBatches += after.Batches - folded.Batches
	return nil
}

// Close counts what the database cost and drops its tables.
func (s *promqlStorage) Close() error {
	s.closeOnce.Do(func() {
		st, qs := s.checker.Stats(), s.srv.Queryable().Stats()
		s.stats.mu.Lock()
		s.stats.requests += st.Requests
		s.stats.responseBytes += st.ResponseBytes
		s.stats.rawSelects += qs.RawSelects
		s.stats.tierSelects += qs.TierSelects
		s.stats.mu.Unlock()
		s.closeErr = errors.Join(s.srv.Close(), s.drop())
	})
	return s.closeErr
}

// drop deletes the database's tables (their names start with its name).
func (s *promqlStorage) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for p := s.admin.NewListTablesPager(nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list tables of %s: %w", s.name, err)
		}
		for _, tb := range page.Tables {
			if tb.Name != nil && strings.HasPrefix(*tb.Name, s.name) {
				if _, err := s.admin.DeleteTable(ctx, *tb.Name, nil); err != nil {
					errs = append(errs, fmt.Errorf("drop table %s: %w", *tb.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// countingQuerier counts the Selects of the engine.
type countingQuerier struct {
	storage.Querier
	stats *fileStats
}

func (q *countingQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
	q.stats.mu.Lock()
	q.stats.selects++
	if hints != nil && hints.Step == 0 && hints.Range == 0 && hints.Func != "series" {
		q.stats.latestSelects++
	}
	q.stats.mu.Unlock()
	// The engine's, as the query API's (NewTestEngine's subqueries have a step): its
	// instant selectors of instant queries read each series' latest sample only.
	return q.Querier.Select(engineselect.With(ctx), sortSeries, hints, matchers...)
}

// fileStats is what one file of the suite cost: its databases, its loads (remote writes),
// its Selects, and the requests to the account (every attempt, at the transport).
type fileStats struct {
	mu                  sync.Mutex
	names               []string // of the databases
	writes              int      // remote write requests (loads)
	samples, histograms int      // samples and histogram samples written
	writeRequests       int64    // requests to the account the remote writes made
	maintainRequests    int64    // requests of the maintenance after the loads (fold, compact)
	foldedPoints        int      // staged points the maintenance folded
	compactBatches      int64    // transactions of its compactions (each merges chunks)
	selects             int
	latestSelects       int    // of them, of an instant selector evaluated once (engineselect)
	rawSelects          uint64 // Selects the Queryable read raw points for
	tierSelects         uint64 // Selects the Queryable read a rollup tier for
	requests            int64  // every request to the account
	responseBytes       int64  // response body bytes from the account
	writeTime           time.Duration
}

func (f *fileStats) add(o *fileStats) {
	f.names = append(f.names, o.names...)
	f.writes += o.writes
	f.samples += o.samples
	f.histograms += o.histograms
	f.writeRequests += o.writeRequests
	f.maintainRequests += o.maintainRequests
	f.foldedPoints += o.foldedPoints
	f.compactBatches += o.compactBatches
	f.selects += o.selects
	f.latestSelects += o.latestSelects
	f.rawSelects += o.rawSelects
	f.tierSelects += o.tierSelects
	f.requests += o.requests
	f.responseBytes += o.responseBytes
	f.writeTime += o.writeTime
}

func (f *fileStats) String() string {
	reads := f.requests - f.writeRequests - f.maintainRequests
	perSelect := 0.0
	if f.selects > 0 {
		perSelect = float64(reads) / float64(f.selects)
	}
	return fmt.Sprintf("%3d DBs, %3d writes (%6d samples, %5d histograms, %5d requests, %v), %5d maintenance requests (%d points folded, %d compactions), %4d Selects (%d raw, %d tier, %d latest), %6d other requests (%.1f a Select), %d KB read",
		len(f.names), f.writes, f.samples, f.histograms, f.writeRequests, f.writeTime.Round(time.Millisecond), f.maintainRequests, f.foldedPoints, f.compactBatches,
		f.selects, f.rawSelects, f.tierSelects, f.latestSelects, reads, perSelect, f.responseBytes>>10)
}
