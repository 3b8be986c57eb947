package staging

import (
	"context"
	"fmt"
	"iter"

	"github.com/seed71701133/tablets/internal/pager"
)

// fetchedPage is a page of a staging query, fetched under the read budget: done gives its
// bytes back.
type fetchedPage struct {
	entities [][]byte
	done     func()
	last     bool // no page follows
}

// pagesAhead yields the pages of q in order, each fetched under read's budget as a page of
// read, the next one requested as soon as the one before arrived: while the consumer
// decodes a page, the account sends the next. A read of a staging table's hour (a
// dashboard's first panel, two pages of 5 to 6 MB) spent about as long decoding each page
// as Azurite took to send it, one after the other. One page at most is fetched ahead
// (fetched, or waiting for the consumer), so that a read holds two pages' budget at most.
//
// The consumer calls done of every page it is given, stopped or not; stopping the
// iteration (or an error, yielded once) stops the fetching and gives back the budget of a
// page fetched ahead. No goroutine outlives the iteration.
func (st *Table) pagesAhead(ctx context.Context, q pager.SubQuery, read *collectRead) iter.Seq2[fetchedPage, error] {
	return func(yield func(fetchedPage, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		type result struct {
			page fetchedPage
			err  error
		}
		results := make(chan result) // unbuffered: the fetcher holds one page ahead, no more
		go func() {
			defer close(results)
			send := func(r result) bool {
				select {
				case results <- r:
					return true
				case <-ctx.Done():
					if r.page.done != nil {
						r.page.done()
					}
					return false
				}
			}
			top := q.Top
			var cont pager.Continuation
			for ctx.Err() == nil { // a page the consumer no longer waits for is not asked for
				done, err := st.Budget.budgetOf(read).take(ctx, read, int64(q.PageBytes))
				if err != nil {
					send(result{err: err})
					return
				}
				entities, next, err := pager.Fetch(ctx, st.client, q, top, cont)
				if err != nil {
					done()
					send(result{err: err})
					return
				}
				top = pager.NextTop(q, top, entities)
				if !send(result{page: fetchedPage{entities: entities, done: done, last: next.IsZero()}}) || next.IsZero() {
					return
				}
				cont = next
			}
		}()
		defer func() {
			cancel()
			for r := range results { // the page fetched ahead, if any: given back
				if r.page.done != nil {
					r.page.done()
				}
			}
		}()
		last := false
		for r := range results {
			if !yield(r.page, r.err) || r.err != nil {
				return
			}
			last = r.page.last
		}
		if !last {
			// The fetching stopped with ctx, before the last page or the error it met: the
			// read is cut short, which the consumer must not take for its end.
			yield(fetchedPage{}, fmt.Errorf("staging pages: %w", context.Cause(ctx)))
		}
	}
}
