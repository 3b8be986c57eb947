package pager

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

func TestTokenRoundTrip(t *testing.T) {
	b := Bind("basic/1/1000000", "O'Brien", 10, 1<<41)
	tok := Token{Binding: b, After: 1<<40 + 7}
	s := tok.Encode()
	got, err := DecodeToken(s, b, 10, 1<<41)
	require.NoError(t, err)
	require.Equal(t, tok, got)

	// A version 1 token (as the previous release issued them) is refused.
	v1 := []byte{1}
	v1 = append(v1, b[:]...)
	v1 = append(v1, 0, 20, 0, 0)
	v1 = binary.BigEndian.AppendUint32(v1, crc32.ChecksumIEEE(v1))

	bad := map[string]string{
		"empty":        "",
		"garbage":      "xyz",
		"truncated":    s[:len(s)-1],
		"version 1":    tokenEncoding.EncodeToString(v1),
		"other series": Token{Binding: Bind("basic/1/1000000", "O'Brien2", 10, 1<<41), After: 20}.Encode(),
		"other range":  Token{Binding: Bind("basic/1/1000000", "O'Brien", 10, 21), After: 20}.Encode(),
		"other layout": Token{Binding: Bind("advanced/1/1000000000/240/3600", "O'Brien", 10, 1<<41), After: 20}.Encode(),
		"at the start": Token{Binding: b, After: 10}.Encode(),
		"past the end": Token{Binding: b, After: 1<<41 + 1}.Encode(),
	}
	for name, s := range bad {
		_, err := DecodeToken(s, b, 10, 1<<41)
		require.ErrorIs(t, err, tablets.ErrInvalidToken, name)
	}
	// Every single-character change is caught.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range s {
		for _, c := range []byte{alphabet[(strings.IndexByte(alphabet, s[i])+1)%64], alphabet[(strings.IndexByte(alphabet, s[i])+37)%64]} {
			changed := s[:i] + string(c) + s[i+1:]
			_, err := DecodeToken(changed, b, 10, 1<<41)
			require.ErrorIs(t, err, tablets.ErrInvalidToken, "position %d", i)
		}
	}
}

func FuzzDecodeToken(f *testing.F) {
	b := Bind("x", "cpu", 0, 100)
	f.Add(Token{Binding: b, After: 42}.Encode())
	f.Add("")
	f.Add("Ag")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := DecodeToken(s, b, 0, 100)
		if err != nil {
			if !errors.Is(err, tablets.ErrInvalidToken) {
				t.Fatalf("error %v does not wrap ErrInvalidToken", err)
			}
			return
		}
		if tok.Binding != b || tok.After == 0 || tok.After > 100 {
			t.Fatalf("accepted %+v", tok)
		}
		if again := tok.Encode(); again != s {
			t.Fatalf("accepted a token that does not re-encode the same: %q vs %q", s, again)
		}
	})
}

// fakeLister serves pages from a script: for each filter, a list of pages, each page
// continuing to the next through a continuation token.
type fakeLister struct {
	pages    map[string][][]string // filter -> pages of entity bodies
	calls    atomic.Int64
	inFlight atomic.Int64
	maxSeen  atomic.Int64
	delay    time.Duration
}

func (f *fakeLister) NewListEntitiesPager(opts *aztables.ListEntitiesOptions) *azruntime.Pager[aztables.ListEntitiesResponse] {
	filter := *opts.Filter
	start := 0
	if opts.NextRowKey != nil {
		fmt.Sscanf(*opts.NextRowKey, "page%d", &start)
	}
	return azruntime.NewPager(azruntime.PagingHandler[aztables.ListEntitiesResponse]{
		More: func(r aztables.ListEntitiesResponse) bool { return r.NextRowKey != nil },
		Fetcher: func(ctx context.Context, prev *aztables.ListEntitiesResponse) (aztables.ListEntitiesResponse, error) {
			n := f.inFlight.Add(1)
			defer f.inFlight.Add(-1)
			for {
				m := f.maxSeen.Load()
				if n <= m || f.maxSeen.CompareAndSwap(m, n) {
					break
				}
			}
			f.calls.Add(1)
			page := start
			if prev != nil {
				fmt.Sscanf(*prev.NextRowKey, "page%d", &page)
			}
			select {
			case <-time.After(f.delay):
			case <-ctx.Done():
				return aztables.ListEntitiesResponse{}, ctx.Err()
			}
			pages := f.pages[filter]
			var resp aztables.ListEntitiesResponse
			if page < len(pages) {
				for _, e := range pages[page] {
					resp.Entities = append(resp.Entities, []byte(e))
				}
			}
			if page+1 < len(pages) {
				next := fmt.Sprintf("page%d", page+1)
				resp.NextPartitionKey, resp.NextRowKey = &next, &next
			}
			return resp, nil
		},
	})
}

func TestPagesOrderEmptyPagesAndConcurrency(t *testing.T) {
	f := &fakeLister{pages: map[string][][]string{}, delay: time.Millisecond}
	var plan []SubQuery
	var want []string
	for q := range 7 {
		name := fmt.Sprintf("q%d", q)
		plan = append(plan, SubQuery{Filter: name})
		// Empty pages that carry a continuation, between full ones.
		f.pages[name] = [][]string{{name + "a", name + "b"}, {}, {}, {name + "c"}, {}}
		want = append(want, name+"a", name+"b", name+"c")
	}
	var got []string
	for page, err := range Pages(context.Background(), f, plan, 0, Continuation{}, 3) {
		require.NoError(t, err)
		for _, e := range page.Entities {
			got = append(got, string(e))
		}
	}
	require.Equal(t, want, got)
	require.LessOrEqual(t, f.maxSeen.Load(), int64(3))
	require.Equal(t, int64(7*5), f.calls.Load())

	// Resuming from a page of a later sub-query.
	got = nil
	for page, err := range Pages(context.Background(), f, plan, 5, Continuation{"page3", "page3"}, 2) {
		require.NoError(t, err)
		require.Equal(t, 5 <= page.Query, true)
		for _, e := range page.Entities {
			got = append(got, string(e))
		}
	}
	require.Equal(t, []string{"q5c", "q6a", "q6b", "q6c"}, got)
}

func TestPagesBreakLeavesNoGoroutine(t *testing.T) {
	f := &fakeLister{pages: map[string][][]string{}, delay: 5 * time.Millisecond}
	var plan []SubQuery
	for q := range 20 {
		name := fmt.Sprintf("q%d", q)
		plan = append(plan, SubQuery{Filter: name})
		f.pages[name] = [][]string{{"a"}, {"b"}, {"c"}}
	}
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for _, err := range Pages(context.Background(), f, plan, 0, Continuation{}, 4) {
				require.NoError(t, err)
				if n++; n == 5 {
					break
				}
			}
		}()
	}
	wg.Wait()
	if !assertEventually(func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}

func TestPagesCanceledContext(t *testing.T) {
	f := &fakeLister{pages: map[string][][]string{"q": {{"a"}, {"b"}}}, delay: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var errs []error
	for _, err := range Pages(ctx, f, []SubQuery{{Filter: "q"}}, 0, Continuation{}, 1) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], context.Canceled)
}

func assertEventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// topLister serves a list of entities in order, honouring $top, and records each $top.
type topLister struct {
	entities [][]byte
	tops     []int32
}

func (l *topLister) NewListEntitiesPager(opts *aztables.ListEntitiesOptions) *azruntime.Pager[aztables.ListEntitiesResponse] {
	start := 0
	if opts.NextRowKey != nil {
		fmt.Sscanf(*opts.NextRowKey, "%d", &start)
	}
	top := int32(MaxTop)
	if opts.Top != nil {
		top = *opts.Top
	}
	return azruntime.NewPager(azruntime.PagingHandler[aztables.ListEntitiesResponse]{
		More: func(r aztables.ListEntitiesResponse) bool { return r.NextRowKey != nil },
		Fetcher: func(ctx context.Context, _ *aztables.ListEntitiesResponse) (aztables.ListEntitiesResponse, error) {
			l.tops = append(l.tops, top)
			end := min(start+int(top), len(l.entities))
			resp := aztables.ListEntitiesResponse{Entities: l.entities[start:end]}
			if end < len(l.entities) {
				next := strconv.Itoa(end)
				resp.NextPartitionKey, resp.NextRowKey = &next, &next
			}
			return resp, nil
		},
	})
}

// A sub-query with PageBytes sizes each page after the first by the largest entity of the
// page before: pages of small entities grow, and shrink after large ones.
func TestPageBytesSizesPages(t *testing.T) {
	var entities [][]byte
	add := func(n, size int) {
		for range n {
			entities = append(entities, bytes.Repeat([]byte("e"), size))
		}
	}
	add(100, 10)
	add(100, 1000)
	add(2000, 10)

	q := SubQuery{Filter: "f", Top: 50, PageBytes: 5000}
	for name, pages := range map[string]func(*topLister) iter.Seq2[Page, error]{
		"Each": func(l *topLister) iter.Seq2[Page, error] { return Each(context.Background(), l, q, 0) },
		"Pages": func(l *topLister) iter.Seq2[Page, error] {
			return Pages(context.Background(), l, []SubQuery{q}, 0, Continuation{}, 2)
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := &topLister{entities: entities}
			var got [][]byte
			var sizes []int
			for p, err := range pages(l) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p.Entities...)
				size := 0
				for _, e := range p.Entities {
					size += len(e)
				}
				sizes = append(sizes, size)
			}
			if !slices.EqualFunc(got, entities, bytes.Equal) {
				t.Fatalf("read %d entities, not the %d listed", len(got), len(entities))
			}
			// 50 small: 500 fit. The 50 small left, the 100 large and 350 small: 5 fit.
			// Then 500 small a page, 1,645 in all.
			wantTops := []int32{50, 500, 5, 500, 500, 500, 500}
			wantSizes := []int{500, 500 + 100000 + 3500, 50, 5000, 5000, 5000, 1450}
			if !slices.Equal(l.tops, wantTops) || !slices.Equal(sizes, wantSizes) {
				t.Fatalf("tops %v, bytes %v; want %v, %v", l.tops, sizes, wantTops, wantSizes)
			}
		})
	}
}

// A page of entities larger than PageBytes is followed by pages of one entity, and a page of
// tiny ones by pages of MaxTop at most.
func TestPageBytesBounds(t *testing.T) {
	q := SubQuery{PageBytes: 100}
	if got := NextTop(q, 7, [][]byte{make([]byte, 1000)}); got != 1 {
		t.Errorf("after an entity of 1,000 bytes: top %d, want 1", got)
	}
	if got := NextTop(SubQuery{PageBytes: 1 << 20}, 7, [][]byte{{1}}); got != MaxTop {
		t.Errorf("after an entity of 1 byte: top %d, want %d", got, MaxTop)
	}
	if got := NextTop(q, 7, nil); got != 7 {
		t.Errorf("after an empty page: top %d, want 7 (unchanged)", got)
	}
}
