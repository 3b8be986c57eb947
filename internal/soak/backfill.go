package soak

import (
	"context"
	"sync"
	"time"
)

// backfillConcurrency is how many backfill requests of one tenant are in flight at once.
const backfillConcurrency = 4

// backfillBatches are the requests that write series' samples at their scrape times in
// [end-span, end): each holds whole series, as many as fit in maxSamplesPerSend samples
// (a series with more goes in pieces of its own), so that each series' samples of a
// request are many and in time order, as Prometheus sends a WAL it replays after a restart.
func backfillBatches(s Series, end time.Time, span time.Duration) [][]sample {
	var (
		batches [][]sample
		batch   []sample
	)
	flush := func() {
		if len(batch) > 0 {
			batches = append(batches, batch)
			batch = nil
		}
	}
	iv, stop := s.Interval.Milliseconds(), end.UnixMilli()
	for t := range s.Targets {
		first := s.FirstScrape(t, end.Add(-span))
		n := int((stop - first + iv - 1) / iv) // scrapes in [first, stop)
		if n <= 0 {
			continue
		}
		for k := range seriesPerTarget {
			if len(batch)+n > maxSamplesPerSend {
				flush()
			}
			i := int32(t*seriesPerTarget + k)
			for ts := first; ts < stop; ts += iv {
				if len(batch) == maxSamplesPerSend {
					flush()
				}
				batch = append(batch, sample{i, ts})
			}
		}
	}
	flush()
	return batches
}

// backfill writes w's series' samples of the span before end (backfillBatches), a few
// requests at a time, each retried as the live writes are until it is answered for good.
// It counts them in w's stats as sent and acknowledged (or dropped) like any other.
func (w *writer) backfill(ctx context.Context, end time.Time, span time.Duration) {
	batches := backfillBatches(w.series, end, span)
	var sent int64
	for _, b := range batches {
		sent += int64(len(b))
	}
	w.mu.Lock()
	w.stats.Sent += sent
	w.stats.Backfilled += sent
	w.mu.Unlock()
	next := make(chan []sample)
	var wg sync.WaitGroup
	for range backfillConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range next {
				code := w.deliver(ctx, b)
				w.record(b, code)
				if code/100 == 2 {
					w.mu.Lock()
					w.stats.BackfillAcked += int64(len(b))
					w.mu.Unlock()
				}
			}
		}()
	}
	for _, b := range batches {
		if ctx.Err() != nil {
			w.mu.Lock()
			w.stats.Pending += int64(len(b))
			w.mu.Unlock()
			continue
		}
		next <- b
	}
	close(next)
	wg.Wait()
}
