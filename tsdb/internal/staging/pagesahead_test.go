package staging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/pager"
)

// pagedTable answers the queries of a table with pages of entities (RowKey "p<page>-<i>"),
// a continuation after each but the last, and a 400 for the page fail (-1: none). It
// sends the index of each page asked for to asked.
type pagedTable struct {
	pages, perPage, fail int
	asked                chan int
}

func (p *pagedTable) Do(req *http.Request) (*http.Response, error) {
	page, _ := strconv.Atoi(req.URL.Query().Get("NextPartitionKey"))
	p.asked <- page
	header := http.Header{"Content-Type": {"application/json;odata=nometadata"}}
	if page == p.fail {
		return &http.Response{StatusCode: http.StatusBadRequest, Header: header, Request: req,
			Body: io.NopCloser(strings.NewReader(`{"odata.error":{"code":"InvalidInput","message":{"value":"no"}}}`))}, nil
	}
	var entities []string
	for i := range p.perPage {
		entities = append(entities, fmt.Sprintf(`{"PartitionKey":"p","RowKey":"p%d-%d"}`, page, i))
	}
	if page+1 < p.pages {
		header.Set("x-ms-continuation-NextPartitionKey", strconv.Itoa(page+1))
		header.Set("x-ms-continuation-NextRowKey", "r")
	}
	return &http.Response{StatusCode: http.StatusOK, Header: header, Request: req,
		Body: io.NopCloser(strings.NewReader(`{"value":[` + strings.Join(entities, ",") + `]}`))}, nil
}

// pagedStaging is a Table over a pagedTable of pages (the page fail answering 400), its
// reads under a budget of its own.
func pagedStaging(t *testing.T, pages, fail int) (*Table, *pagedTable) {
	t.Helper()
	fake := &pagedTable{pages: pages, perPage: 3, fail: fail, asked: make(chan int, pages+1)}
	svc, err := aztables.NewServiceClientWithNoCredential("http://account.invalid/", &aztables.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: fake, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	budget, err := NewReadBudget(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	return &Table{client: svc.NewClient("stw"), Budget: budget}, fake
}

var rowKey = regexp.MustCompile(`"RowKey":"([^"]+)"`)

// pageBytes is what each page of the tests takes of the budget.
const pageBytes = 1000

// A staging read's pages are fetched one ahead of the consumer: the next page is asked for
// while the consumer holds the one before, never two ahead (two pages' budget at most), and
// every entity comes once, in order.
func TestPagesAhead(t *testing.T) {
	st, fake := pagedStaging(t, 4, -1)
	q := pager.SubQuery{Top: 3, PageBytes: pageBytes}
	var keys []string
	n := 0
	for page, err := range st.pagesAhead(context.Background(), q, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			// The consumer holds the first page: the second is asked for meanwhile.
			for want := range 2 {
				select {
				case got := <-fake.asked:
					if got != want {
						t.Fatalf("page %d asked for, want %d", got, want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("page %d not asked for while the consumer holds page 0", want)
				}
			}
		}
		for _, e := range page.entities {
			m := rowKey.FindSubmatch(e)
			if m == nil {
				t.Fatalf("entity %s: no RowKey", e)
			}
			keys = append(keys, string(m[1]))
		}
		page.done()
		n++
	}
	if n != 4 {
		t.Fatalf("%d pages, want 4", n)
	}
	want := []string{"p0-0", "p0-1", "p0-2", "p1-0", "p1-1", "p1-2", "p2-0", "p2-1", "p2-2", "p3-0", "p3-1", "p3-2"}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("entities %v, want %v", keys, want)
	}
	if most := MostUsed(st.Budget); most != 2*pageBytes {
		t.Fatalf("at most %d bytes of the budget taken at once, want two pages' (%d)", most, 2*pageBytes)
	}
	if used, waiting := st.Budget.InUse(); used != 0 || waiting != 0 {
		t.Fatalf("after the read: %d bytes in use, %d waiting", used, waiting)
	}
}

// A consumer that stops, or an error, stops the fetching: the budget of the page fetched
// ahead is given back, and the error comes once, after the pages before it.
func TestPagesAheadStops(t *testing.T) {
	t.Run("stopped", func(t *testing.T) {
		st, fake := pagedStaging(t, 4, -1)
		for page, err := range st.pagesAhead(context.Background(), pager.SubQuery{Top: 3, PageBytes: pageBytes}, nil) {
			if err != nil {
				t.Fatal(err)
			}
			<-fake.asked
			<-fake.asked // the second page, fetched ahead
			page.done()
			break
		}
		if used, _ := st.Budget.InUse(); used != 0 {
			t.Fatalf("%d bytes of the budget in use after the consumer stopped", used)
		}
		if len(fake.asked) != 0 {
			t.Fatalf("%d more pages asked for after the consumer stopped", len(fake.asked))
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		// The read's context ends while the consumer holds a page: the consumer is told,
		// and does not take the pages it got for the whole read.
		st, fake := pagedStaging(t, 4, -1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pages := 0
		var last error
		for page, err := range st.pagesAhead(ctx, pager.SubQuery{Top: 3, PageBytes: pageBytes}, nil) {
			if err != nil {
				last = err
				continue
			}
			pages++
			<-fake.asked
			cancel()
			page.done()
		}
		if !errors.Is(last, context.Canceled) {
			t.Fatalf("after %d pages: error %v, want context.Canceled", pages, last)
		}
		if used, _ := st.Budget.InUse(); used != 0 {
			t.Fatalf("%d bytes of the budget in use after the cancel", used)
		}
	})
	t.Run("failed", func(t *testing.T) {
		st, _ := pagedStaging(t, 4, 2)
		pages, errs := 0, 0
		for page, err := range st.pagesAhead(context.Background(), pager.SubQuery{Top: 3, PageBytes: pageBytes}, nil) {
			if err != nil {
				errs++
				if !strings.Contains(err.Error(), "InvalidInput") {
					t.Errorf("error %v, want the account's", err)
				}
				continue
			}
			pages++
			page.done()
		}
		if pages != 2 || errs != 1 {
			t.Fatalf("%d pages and %d errors, want 2 and 1", pages, errs)
		}
		if used, _ := st.Budget.InUse(); used != 0 {
			t.Fatalf("%d bytes of the budget in use after the error", used)
		}
	})
}
