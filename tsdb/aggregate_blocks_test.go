package tsdb

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/azurite"
	"github.com/seed71701133/tablets/internal/blockenc"
)

// fakeTable is a table of entities answering queries as the service does: entities in key
// order, a page of at most pageSize, a continuation to the next match, $select keeping the
// keys and the properties selected (null where absent).
type fakeTable struct {
	t        *testing.T
	pageSize int
	entities []fakeEntity
	queries  []string // the filters of the requests, in order
}

type fakeEntity struct {
	pk, rk string
	body   []byte
}

func (f *fakeTable) add(body []byte) {
	var keys struct{ PartitionKey, RowKey string }
	if err := json.Unmarshal(body, &keys); err != nil {
		f.t.Fatal(err)
	}
	f.entities = append(f.entities, fakeEntity{keys.PartitionKey, keys.RowKey, body})
	slices.SortFunc(f.entities, func(a, b fakeEntity) int { return cmp.Or(cmp.Compare(a.pk, b.pk), cmp.Compare(a.rk, b.rk)) })
}

func (f *fakeTable) NewListEntitiesPager(o *aztables.ListEntitiesOptions) *runtime.Pager[aztables.ListEntitiesResponse] {
	done := false
	return runtime.NewPager(runtime.PagingHandler[aztables.ListEntitiesResponse]{
		More: func(aztables.ListEntitiesResponse) bool { return !done },
		Fetcher: func(context.Context, *aztables.ListEntitiesResponse) (aztables.ListEntitiesResponse, error) {
			done = true
			return f.page(o), nil
		},
	})
}

func (f *fakeTable) page(o *aztables.ListEntitiesOptions) aztables.ListEntitiesResponse {
	text := ""
	if o.Filter != nil {
		text = *o.Filter
	}
	f.queries = append(f.queries, text)
	if n := azurite.CountComparisons(text); n > 15 {
		f.t.Errorf("filter of %d comparisons: %s", n, text)
	}
	expr, err := filter.Parse(text)
	if err != nil {
		f.t.Fatal(err)
	}
	from := fakeEntity{}
	if o.NextPartitionKey != nil {
		from.pk = *o.NextPartitionKey
	}
	if o.NextRowKey != nil {
		from.rk = *o.NextRowKey
	}
	var resp aztables.ListEntitiesResponse
	for _, e := range f.entities {
		if cmp.Or(cmp.Compare(e.pk, from.pk), cmp.Compare(e.rk, from.rk)) < 0 || !expr.Eval(map[string]string{"PartitionKey": e.pk, "RowKey": e.rk}) {
			continue
		}
		if len(resp.Entities) == f.pageSize {
			resp.NextPartitionKey, resp.NextRowKey = &e.pk, &e.rk
			break
		}
		resp.Entities = append(resp.Entities, f.project(e.body, o.Select))
	}
	return resp
}

// project keeps the keys, the ETag and the properties of sel ("": all) of body.
func (f *fakeTable) project(body []byte, sel *string) []byte {
	if sel == nil || *sel == "" {
		return body
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(body, &props); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]json.RawMessage{"PartitionKey": props["PartitionKey"], "RowKey": props["RowKey"]}
	if v, ok := props["odata.etag"]; ok {
		out["odata.etag"] = v
	}
	for _, name := range strings.Split(*sel, ",") {
		if name == "PartitionKey" || name == "RowKey" {
			continue
		}
		v, ok := props[name]
		if !ok {
			v = json.RawMessage("null")
		}
		out[name] = v
		if a, ok := props[name+"@odata.type"]; ok {
			out[name+"@odata.type"] = a
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// rowBlockEntity is a row block of series at start (a minute tier) whose first window holds
// one point of value v, rolled long after.
func rowBlockEntity(series string, start uint64, v float64) []byte {
	b := &block{start: start, rolled: float64(start + 1e6)}
	w := newWindow(at(start), 0)
	w.add(at(start), v)
	b.windows[0] = w
	return appendBlock(nil, series, time.Minute, b)
}

// A read of more series than two filters hold scans the partitions from the first name to
// the last, and falls back to filters for the names not reached when a page holds mostly
// other series; a read of fewer sends a filter per 13 series. Row blocks are read whole.
func TestReadTierBlocksMany(t *testing.T) {
	db := &DB{opts: Options{Tiers: DefaultTiers, SealDelay: DefaultSealDelay}}
	minute := Tier{Step: time.Minute, Period: 7 * 24 * time.Hour}
	span := uint64(24 * 60)
	table := &fakeTable{t: t, pageSize: 20}
	var asked []string
	for i := range 15 {
		asked = append(asked, fmt.Sprintf("a%02d", i), fmt.Sprintf("z%02d", i))
	}
	slices.Sort(asked)
	for _, s := range asked {
		for b := range 2 {
			table.add(rowBlockEntity(s, uint64(b)*span, 1))
		}
	}
	for i := range 200 {
		table.add(rowBlockEntity(fmt.Sprintf("m%03d", i), 0, 2))
	}
	type read struct {
		names   []string
		queries int
	}
	for _, c := range []read{
		// The scan: a00-a14 (2 pages, the second half m000-m004), then m005-m014, mostly
		// others: z00-z14 by 2 filters (13 series, 2 pages; 2 series, 1 page).
		{asked, 3 + 3},
		// 26 series: 2 filters, of 2 pages (26 blocks) each.
		{asked[:26], 4},
		{[]string{"m003", "z01"}, 1},
	} {
		table.queries = nil
		r := newBlockReader(db, minute, AllFields.columns(), c.names)
		require.NoError(t, r.readTable(context.Background(), table, c.names, blockKey(0), blockKey(2*span)))
		got := r.bySeries()
		if len(got) != len(c.names) {
			t.Fatalf("%d series: blocks of %d", len(c.names), len(got))
		}
		for _, s := range c.names {
			bs := got[s]
			want := 2
			if s[0] == 'm' {
				want = 1
			}
			if len(bs) != want {
				t.Fatalf("%s: %d blocks", s, len(bs))
			}
			for _, b := range bs {
				if b.version != 1 || b.windows[0] == nil || b.windows[0].Count != 1 || !b.sealed[0] {
					t.Fatalf("%s: block %+v", s, b)
				}
			}
		}
		extra := 0
		if blockenc.SelectColumnar(AllFields.columns()) != "" {
			extra = 1 // the row blocks, whole
		}
		t.Logf("%d series: %d queries", len(c.names), len(table.queries))
		if len(table.queries) < c.queries || len(table.queries) > c.queries+extra*(len(c.names)+12)/13 {
			t.Errorf("%d series: %d queries, want %d: %q", len(c.names), len(table.queries), c.queries, table.queries)
		}
	}
}
