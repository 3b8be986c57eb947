package pager

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"net/http"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/reply"
)

// Lister lists entities; *aztables.Client is one.
type Lister interface {
	NewListEntitiesPager(*aztables.ListEntitiesOptions) *runtime.Pager[aztables.ListEntitiesResponse]
}

// MaxTop is the most entities the service returns in one page.
const MaxTop = 1000

// SubQuery is one request of a plan (and the pages that follow it).
type SubQuery struct {
	Filter string
	Select string // "" for every property
	// Top is the $top of the first request (0 for the service's page size). With Grow, each
	// following page of the sub-query asks for twice as many, up to MaxTop: a reader that
	// guessed a page size from the density of full rows pays one extra request, not many,
	// when the rows turn out sparse.
	Top  int32
	Grow bool
	// PageBytes, when positive, sizes the pages after the first instead of Grow: each asks
	// for as many entities as fit in PageBytes at the size of the last page's largest. The
	// service pages by count (1,000) only, and an entity may hold up to 1 MiB: a reader of
	// large entities bounds the memory of a page (which the SDK holds about four times
	// over while decoding it) at the cost of more requests. The bound holds while no entity
	// is larger than those of the page before it.
	PageBytes int
}

// Continuation is the service's resume position inside a sub-query; zero at its start.
type Continuation struct {
	PartitionKey, RowKey string
}

// IsZero reports whether c is the start of a sub-query (or the end: Fetch returns a zero
// continuation after the last page).
func (c Continuation) IsZero() bool { return c == Continuation{} }

// Page is one page of a sub-query: Start is the continuation that fetched it.
type Page struct {
	Query    int
	Start    Continuation
	Entities [][]byte
}

// Fetch requests one page of q from cont, asking for top entities (0: the service's page
// size), and returns its entities and the continuation of the next page (zero when the
// sub-query is done). An empty page with a continuation is a normal answer.
func Fetch(ctx context.Context, lister Lister, q SubQuery, top int32, cont Continuation) ([][]byte, Continuation, error) {
	entities, next, _, err := FetchDated(ctx, lister, q, top, cont)
	return entities, next, err
}

// FetchDated is Fetch that also returns the service's time of the reply (its Date header,
// to the second; zero when the reply has none): what a later query of the entities written
// since compares their Timestamp with.
func FetchDated(ctx context.Context, lister Lister, q SubQuery, top int32, cont Continuation) ([][]byte, Continuation, time.Time, error) {
	opts := &aztables.ListEntitiesOptions{}
	if f := q.Filter; f != "" {
		opts.Filter = &f
	}
	if s := q.Select; s != "" {
		opts.Select = &s
	}
	if top > 0 {
		opts.Top = &top
	}
	if cont.PartitionKey != "" {
		opts.NextPartitionKey = &cont.PartitionKey
	}
	if cont.RowKey != "" {
		opts.NextRowKey = &cont.RowKey
	}
	var raw *http.Response
	ctx, slot := reply.Catch(ctx)
	resp, err := lister.NewListEntitiesPager(opts).NextPage(runtime.WithCaptureResponse(ctx, &raw))
	entities, caught := slot.Entities()
	if !caught {
		entities = resp.Entities
		if err == nil && len(entities) == 0 {
			err = checkEmptyReply(raw)
		}
	}
	if err != nil {
		return nil, Continuation{}, time.Time{}, err
	}
	var date time.Time
	if raw != nil {
		date, _ = http.ParseTime(raw.Header.Get("Date"))
	}
	return entities, Continuation{deref(resp.NextPartitionKey), deref(resp.NextRowKey)}, date, nil
}

// NextTop is the $top of the page after one that asked for top and got entities.
func NextTop(q SubQuery, top int32, entities [][]byte) int32 {
	if q.PageBytes > 0 {
		largest := 0
		for _, e := range entities {
			largest = max(largest, len(e))
		}
		if largest == 0 {
			return top // an empty page says nothing of the entities' size
		}
		return int32(min(max(q.PageBytes/largest, 1), MaxTop))
	}
	if q.Grow && top > 0 {
		return min(2*top, MaxTop)
	}
	return top
}

// Each yields the pages of one sub-query in order, fetching each only when the consumer
// asks for it: nothing is read ahead, so a reader that stops early pays for nothing more.
func Each(ctx context.Context, lister Lister, q SubQuery, index int) iter.Seq2[Page, error] {
	return func(yield func(Page, error) bool) {
		top := q.Top
		var cont Continuation
		for {
			entities, next, err := Fetch(ctx, lister, q, top, cont)
			if err != nil {
				yield(Page{}, err)
				return
			}
			top = NextTop(q, top, entities)
			if !yield(Page{Query: index, Start: cont, Entities: entities}, nil) || next.IsZero() {
				return
			}
			cont = next
		}
	}
}

// Pages runs plan[first:] (the first sub-query from start) and yields every page in plan
// order. Up to concurrency sub-queries are fetched at once, each one page ahead of the
// consumer; stopping early cancels them and waits for them, so nothing outlives the loop.
func Pages(ctx context.Context, lister Lister, plan []SubQuery, first int, start Continuation, concurrency int) iter.Seq2[Page, error] {
	if concurrency < 1 {
		concurrency = 1
	}
	return func(yield func(Page, error) bool) {
		type result struct {
			page Page
			err  error
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()

		results := make([]chan result, len(plan))
		fetch := func(i int) {
			defer wg.Done()
			defer close(results[i])
			var cont Continuation
			if i == first {
				cont = start
			}
			top := plan[i].Top
			for {
				entities, next, err := Fetch(ctx, lister, plan[i], top, cont)
				select {
				case results[i] <- result{page: Page{Query: i, Start: cont, Entities: entities}, err: err}:
				case <-ctx.Done():
					return
				}
				if err != nil || next.IsZero() {
					return
				}
				cont, top = next, NextTop(plan[i], top, entities)
			}
		}
		launched := first
		launch := func(upTo int) {
			for ; launched < len(plan) && launched < upTo; launched++ {
				results[launched] = make(chan result, 1)
				wg.Add(1)
				go fetch(launched)
			}
		}
		for i := first; i < len(plan); i++ {
			launch(i + concurrency)
			for r := range results[i] {
				if r.err != nil {
					yield(Page{}, r.err)
					return
				}
				if !yield(r.page, nil) {
					return
				}
			}
			if err := ctx.Err(); err != nil {
				yield(Page{}, err)
				return
			}
		}
	}
}

// checkEmptyReply tells a page that really has no entities (which the service sends, with a
// continuation, when a page's time runs out) from a reply that is not an entity list at all
// (an empty body, "{}"), which aztables reads as an empty page: points silently missing.
func checkEmptyReply(raw *http.Response) error {
	if raw == nil {
		return nil
	}
	body, err := runtime.Payload(raw)
	if err != nil {
		return err
	}
	if !bytes.Contains(body, []byte(`"value"`)) {
		return fmt.Errorf("pager: the reply to a query is not an entity list (%d bytes: %.60q)", len(body), body)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
