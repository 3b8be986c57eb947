package promqlsuite_test

import (
	"context"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/testutil"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

// TestPromQLSuite runs Prometheus' own PromQL test suite (promql/promqltest's 17 files at
// the pinned module) with tablets as the storage: each load goes through the server's
// remote-write handler as one remote write 2.0 request, each evaluation reads through the
// server's Queryable, on a fresh database for every file and every clear. The engine is the
// one Prometheus' TestEvaluations runs the suite with.
//
// The suite runs twice: on the database as one remote write 2.0 request a load leaves it
// (small loads staged, the others a chunk a series), every file; and maintained: each load
// sent as a Prometheus 3 streams it by default, remote write 1.0 requests cut by time (a
// chunk each), then staged points folded into the raw tables and the chunks compacted, as a
// long-running server's database is, every file but those of promqlNotMaintained.
//
// Tablets returns histogram samples as written, counter reset hints included. Prometheus'
// own TSDB re-codes them into chunks: it cuts a chunk at a counter reset it detects (or an
// explicit reset hint), a schema or zero threshold change, a staleness marker, and reads back
// UnknownCounterReset for a chunk's first sample, NotCounterReset for the others (GaugeType
// in a gauge chunk), widening an integer histogram's spans to its chunk's. The suite's
// expectations do not depend on that: it passes over a plain in-memory storage that returns
// the samples exactly as appended, and again with every non-gauge hint made unknown.
func TestPromQLSuite(t *testing.T) {
	azurite.Shared(t) // skips under -short, as every Azurite test
	// Beside the reference runs (TestPromQLSuiteReference), which take no Azurite.
	t.Parallel()
	for _, maintained := range []bool{false, true} {
		name := "written"
		if maintained {
			name = "maintained"
		}
		t.Run(name, func(t *testing.T) { runPromQLSuite(t, maintained) })
	}
}

// promqlNotMaintained are the suite's files the maintained pass leaves out (two fifths of
// its time): their loads are small float series, a few histograms, that the
// maintenance only folds (it compacts none of their chunks), as it folds functions.test's
// floats, integer, float and custom-bucket histograms, which the maintained pass runs with
// native_histograms.test and every other file; the written pass runs them all.
var promqlNotMaintained = []string{"aggregators.test", "histograms.test", "operators.test", "type_and_unit.test"}

func runPromQLSuite(t *testing.T, maintained bool) {
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	stats := &suiteStats{files: map[string]*fileStats{}}
	start := time.Now()
	var suite promqltest.TBRun = t
	if maintained {
		files := &suiteFiles{T: t, leaveOut: promqlNotMaintained}
		suite = files
		defer files.requireLeftOut()
	}
	promqltest.RunBuiltinTestsWithStorage(suite, engine, func(tt testutil.T) storage.Storage {
		tb, ok := tt.(testing.TB)
		if !ok {
			tb = t
		}
		return newPromQLStorage(tb, stats.of(tb.Name()), maintained)
	})
	stats.log(t, time.Since(start))
	if !t.Failed() {
		requireDropped(t, stats.databases())
		// The suite's instant evaluations are what tests SelectHints.Latest against the
		// engine over every sample.
		require.Positive(t, stats.latestSelects(), "no Select of an instant selector evaluated once")
	}
}

// suiteFiles runs the suite's files but those whose base name is in leaveOut.
type suiteFiles struct {
	*testing.T
	leaveOut []string
	ran      int
	left     map[string]bool
}

func (s *suiteFiles) Run(name string, f func(*testing.T)) bool {
	if base := path.Base(name); slices.Contains(s.leaveOut, base) {
		if s.left == nil {
			s.left = map[string]bool{}
		}
		s.left[base] = true
		return true
	}
	s.ran++
	return s.T.Run(name, f)
}

// requireLeftOut checks that every file left out is one of the suite's (not renamed by a
// module upgrade) and that the others ran.
func (s *suiteFiles) requireLeftOut() {
	for _, name := range s.leaveOut {
		require.True(s.T, s.left[name], "%s is not a file of the suite", name)
	}
	require.Positive(s.T, s.ran, "no file of the suite ran")
}

// requireDropped checks that none of the databases' tables is left: the suite closed every
// storage it opened, and Close dropped them.
func requireDropped(t *testing.T, names []string) {
	admin, err := azurite.Shared(t).NewServiceClient(nil)
	require.NoError(t, err)
	for p := admin.NewListTablesPager(nil); p.More(); {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, tb := range page.Tables {
			for _, name := range names {
				require.False(t, strings.HasPrefix(*tb.Name, name), "table %s of database %s is left", *tb.Name, name)
			}
		}
	}
}

// suiteStats gathers what each file of the suite cost, by file (subtest name).
type suiteStats struct {
	mu    sync.Mutex
	files map[string]*fileStats
	order []string
}

func (s *suiteStats) of(name string) *fileStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[name]
	if f == nil {
		f = &fileStats{}
		s.files[name] = f
		s.order = append(s.order, name)
	}
	return f
}

// databases are the names of the databases the suite opened.
func (s *suiteStats) databases() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, f := range s.files {
		f.mu.Lock()
		names = append(names, f.names...)
		f.mu.Unlock()
	}
	return names
}

// latestSelects is the files' Selects of an instant selector evaluated once.
func (s *suiteStats) latestSelects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.files {
		f.mu.Lock()
		n += f.latestSelects
		f.mu.Unlock()
	}
	return n
}

func (s *suiteStats) log(t *testing.T, elapsed time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total fileStats
	for _, name := range s.order {
		f := s.files[name]
		f.mu.Lock()
		t.Logf("%-40s %s", name, f)
		total.add(f)
		f.mu.Unlock()
	}
	t.Logf("%-40s %s", "all files", &total)
	t.Logf("suite ran in %v", elapsed.Round(time.Millisecond))
}
