package staging

import (
	"context"
	"slices"
	"time"

	"github.com/seed71701133/tablets/internal/reqlimit"
)

// The fetches of staging entities under way, which other reads of the same entities wait
// for rather than fetch them again: the panels of a dashboard opened at once, over one
// metric, read the same columns of the same entities. A read waits only before it fetches
// anything, holding nothing of the read budget, and steps back behind every read of the
// budget meanwhile (collectRead.stepBack): the read it waits for may need the room that
// only the oldest read may take past the budget.

// fetchFlight is a fetch of entities of a staging partition under way (cachedEntities): of
// the columns (nil: every column, decoded), or, whole, of every column as read besides
// them; of the entities of etags (by RowKey). done is closed once what it fetched is
// cached, or it failed.
type fetchFlight struct {
	columns []int
	whole   bool
	etags   map[string]string
	done    chan struct{}
}

// holds says whether what f caches serves a read of columns (nil: every column) of the
// entities les.
func (f *fetchFlight) holds(les []listedEntity, columns []int) bool {
	switch {
	case f.columns == nil || f.whole:
	case columns == nil:
		return false
	default:
		for _, c := range columns {
			if !slices.Contains(f.columns, c) {
				return false
			}
		}
	}
	for _, le := range les {
		if f.etags[le.rk] != le.etag {
			return false
		}
	}
	return true
}

// boardFetches takes the fetches of the entities missing (by PartitionKey) of table, of
// columns (whole: by partition, see fetchWhole): with share, a partition whose entities
// another read is fetching now, with the columns asked for, is left to it (taken out of
// missing, and returned under the flight to wait for); the others are boarded on flights
// of this read (own, by partition), which landFetches must end. A read waits only for
// flights boarded before its own, which never wait for it: no cycle.
func (c *Cache) boardFetches(table string, missing map[string][]listedEntity, columns []int, whole map[string]bool, share bool) (
	waits map[*fetchFlight][]listedEntity, own map[string]*fetchFlight) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fetches == nil {
		c.fetches = map[[2]string]*fetchFlight{}
	}
	own = make(map[string]*fetchFlight, len(missing))
	for pk, les := range missing {
		k := [2]string{table, pk}
		if o := c.fetches[k]; share && o != nil && o.holds(les, columns) {
			if waits == nil {
				waits = map[*fetchFlight][]listedEntity{}
			}
			if waits[o] == nil {
				c.shared.Add(1)
			}
			waits[o] = append(waits[o], les...)
			delete(missing, pk)
			continue
		}
		f := &fetchFlight{columns: columns, whole: whole[pk], etags: make(map[string]string, len(les)), done: make(chan struct{})}
		for _, le := range les {
			f.etags[le.rk] = le.etag
		}
		c.fetches[k] = f
		own[pk] = f
	}
	return waits, own
}

// landFetches ends this read's flights of table (by partition): the partitions are no
// longer fetched here (unless a later read boarded its own), and their waiters go on.
func (c *Cache) landFetches(table string, own map[string]*fetchFlight) {
	if len(own) == 0 {
		return
	}
	c.mu.Lock()
	for pk, f := range own {
		if k := [2]string{table, pk}; c.fetches[k] == f {
			delete(c.fetches, k)
		}
	}
	c.mu.Unlock()
	for _, f := range own {
		close(f.done)
	}
}

// waitFetch waits for f to land, stepping read back behind the budget's other reads first.
func waitFetch(ctx context.Context, read *collectRead, f *fetchFlight) error {
	read.stepBack()
	defer reqlimit.TallyJoined(ctx, time.Now())
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
