package tiers

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
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
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

// columnarEntity is a columnar block of a day of minutes of series at start whose first
// window holds one point of value v, sealed.
func columnarEntity(t *testing.T, series string, start uint64, v float64) []byte {
	windows, sealed := make([]*Window, 1440), make([]bool, 1440)
	for i := range sealed {
		sealed[i] = true
	}
	windows[0] = newWindow(at(start), 0)
	windows[0].add(at(start), v)
	body, err := blockenc.AppendColumnar(nil, series, time.Minute, toColumnar(start, windows, sealed, float64(start+1e6), true))
	require.NoError(t, err)
	return body
}

// A read of more series than two filters hold scans the partitions from the first name to
// the last, and falls back to filters for the names not reached when a page holds mostly
// other series; a read of fewer sends a filter per 13 series. Columnar blocks are read with
// the columns asked for, row blocks again whole: one more query for them all.
func TestReadTierBlocksMany(t *testing.T) {
	tr := New(nil, naming.Names{}, Config{Tiers: DefaultTiers, SealDelay: DefaultSealDelay}, nil, nil, Reads{})
	minute := Tier{Step: time.Minute, Period: 7 * 24 * time.Hour}
	const day = 86400
	table := &fakeTable{t: t, pageSize: 20}
	var asked []string
	for i := range 15 {
		asked = append(asked, fmt.Sprintf("a%02d", i), fmt.Sprintf("z%02d", i))
	}
	slices.Sort(asked)
	rows := map[string]bool{"a01": true, "z05": true} // not converted yet: two row blocks
	for _, s := range asked {
		if rows[s] {
			table.add(rowBlockEntity(s, 0, 1))
			table.add(rowBlockEntity(s, 1440, 1))
			continue
		}
		table.add(columnarEntity(t, s, 0, 1))
	}
	for i := range 200 {
		table.add(columnarEntity(t, fmt.Sprintf("m%03d", i), 0, 2))
	}
	for _, c := range []struct {
		names   []string
		fields  Fields
		queries int
	}{
		// The scan: a00-a14 (16 entities) and m000-m003, then m004-m023, mostly others:
		// z00-z14 by 2 filters (13 series, 14 entities; 2 series); the row blocks again.
		{asked, FieldLast, 2 + 2 + 1},
		// 26 series: 2 filters of 14 entities each; the row blocks again.
		{asked[:26], FieldSum | FieldQuantiles, 3},
		{[]string{"m003", "z01"}, FieldLast, 1},
	} {
		table.queries = nil
		r := newBlockReader(tr, minute, c.fields.columns(), c.names)
		require.NoError(t, r.readTable(context.Background(), table, c.names, 0, day))
		got := r.bySeries()
		require.Len(t, got, len(c.names))
		for _, s := range c.names {
			want, version := 1, blockenc.VersionColumnar
			if rows[s] {
				want, version = 2, 1
			}
			require.Len(t, got[s], want, s)
			for _, b := range got[s] {
				require.Equal(t, version, b.version, s)
				require.True(t, b.sealed[0], s)
				w := b.windows[0]
				require.Equal(t, uint64(1), w.Count, s)
				v := 1.0
				if s[0] == 'm' {
					v = 2
				}
				if version == 1 || c.fields&FieldLast != 0 {
					require.Equal(t, v, w.Last, s)
				} else {
					require.Zero(t, w.Last, "%s: a column not read", s)
				}
				require.Equal(t, version == 1 || c.fields&FieldQuantiles != 0, w.sk != nil, "%s: the sketch read only for quantiles", s)
			}
		}
		t.Logf("%d series: %d queries", len(c.names), len(table.queries))
		require.Len(t, table.queries, c.queries, "%d series: %q", len(c.names), table.queries)
	}
}
