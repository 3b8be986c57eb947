package tsdb

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/storetest"
)

// tsdbCostHarness runs the cost tests on a database's raw tables (advanced, a table a week).
type tsdbCostHarness struct{ tsdbHarness }

func (h tsdbCostHarness) NewMeteredStore(t *testing.T) (tablets.Store, func() storetest.Usage) {
	db, _, checker := newDB(t, nil)
	return db, func() storetest.Usage {
		s := checker.Stats()
		return storetest.Usage{Requests: s.Calls, ResponseBytes: s.ResponseBytes}
	}
}

// LatestBudget: the raw tables' listing, a request for each table newer than the series'
// newest (the test writes two: in 9999 and a day ahead), then advanced's budget.
func (h tsdbCostHarness) LatestBudget() storetest.Usage {
	return storetest.Usage{Requests: 1 + 2 + 4, ResponseBytes: 64 << 10}
}

// TestTSDBLatestCost checks what Latest costs on a database, as TestCost does on each layout.
// (The database's other reads list its tables on every call: not yet within the budgets.)
func TestTSDBLatestCost(t *testing.T) {
	storetest.RunLatestCostTests(t, tsdbCostHarness{tsdbHarness{period: tsdbDefaultPeriod}})
}

// tsdbDefaultPeriod is tsdb's default raw period, named for the subtests.
const tsdbDefaultPeriod = 7 * 24 * time.Hour
