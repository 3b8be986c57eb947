package pager

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"net/http"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// Lister lists entities; *aztables.Client is one.
type Lister interface {
	NewListEntitiesPager(*aztables.ListEntitiesOptions) *runtime.Pager[aztables.ListEntitiesResponse]
}

// SubQuery is one request of a plan (and the pages that follow it).
type SubQuery struct {
	Filter string
	Select string // "" for every property
	Top    int32  // 0 for the service's page size
}

// Continuation is the service's resume position inside a sub-query; zero at its start.
type Continuation struct {
	PartitionKey, RowKey string
}

// Page is one page of a sub-query: Start is the continuation that fetched it, so that a
// token can point back at it.
type Page struct {
	Query    int
	Start    Continuation
	Entities [][]byte
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
			opts := &aztables.ListEntitiesOptions{}
			if f := plan[i].Filter; f != "" {
				opts.Filter = &f
			}
			if s := plan[i].Select; s != "" {
				opts.Select = &s
			}
			if plan[i].Top > 0 {
				top := plan[i].Top
				opts.Top = &top
			}
			var cont Continuation
			if i == first {
				cont = start
				if cont.PartitionKey != "" {
					opts.NextPartitionKey = &cont.PartitionKey
				}
				if cont.RowKey != "" {
					opts.NextRowKey = &cont.RowKey
				}
			}
			p := lister.NewListEntitiesPager(opts)
			for p.More() {
				var raw *http.Response
				resp, err := p.NextPage(runtime.WithCaptureResponse(ctx, &raw))
				if err == nil && len(resp.Entities) == 0 {
					err = checkEmptyReply(raw)
				}
				r := result{page: Page{Query: i, Start: cont, Entities: resp.Entities}, err: err}
				select {
				case results[i] <- r:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
				cont = Continuation{deref(resp.NextPartitionKey), deref(resp.NextRowKey)}
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
