package tsdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/histenc"
)

// memHistTable is an in-memory histogram table that answers queries in pages of at most
// pageSize entities in key order, with continuations, as the service does; afterPage runs
// after each page is served (a concurrent compaction, say).
type memHistTable struct {
	mu        sync.Mutex
	rows      []memRow // sorted by PartitionKey, RowKey
	pageSize  int
	afterPage func(page int)
	pages     int
}

type memRow struct {
	pk, rk, last string
	body         []byte
}

func (m *memHistTable) put(rows ...histRow) {
	for _, r := range rows {
		var e struct{ L string }
		if err := json.Unmarshal(r.body, &e); err != nil {
			panic(err)
		}
		m.rows = append(m.rows, memRow{r.pk, r.rk, e.L, r.body})
	}
	slices.SortFunc(m.rows, func(a, b memRow) int {
		if c := filter.CompareUTF16(a.pk, b.pk); c != 0 {
			return c
		}
		return filter.CompareUTF16(a.rk, b.rk)
	})
}

func (m *memHistTable) remove(pk, rk string) {
	m.rows = slices.DeleteFunc(m.rows, func(r memRow) bool { return r.pk == pk && r.rk == rk })
}

func (m *memHistTable) NewListEntitiesPager(opts *aztables.ListEntitiesOptions) *azruntime.Pager[aztables.ListEntitiesResponse] {
	f, err := filter.Parse(*opts.Filter)
	if err != nil {
		panic(err)
	}
	var npk, nrk string
	if opts.NextPartitionKey != nil {
		npk, nrk = *opts.NextPartitionKey, *opts.NextRowKey
	}
	return azruntime.NewPager(azruntime.PagingHandler[aztables.ListEntitiesResponse]{
		More: func(r aztables.ListEntitiesResponse) bool { return r.NextPartitionKey != nil },
		Fetcher: func(ctx context.Context, _ *aztables.ListEntitiesResponse) (aztables.ListEntitiesResponse, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			var resp aztables.ListEntitiesResponse
			for _, r := range m.rows {
				if npk != "" && (filter.CompareUTF16(r.pk, npk) < 0 || r.pk == npk && filter.CompareUTF16(r.rk, nrk) < 0) {
					continue
				}
				if !f.Eval(map[string]string{"PartitionKey": r.pk, "RowKey": r.rk, "L": r.last}) {
					continue
				}
				if len(resp.Entities) == m.pageSize {
					pk, rk := r.pk, r.rk
					resp.NextPartitionKey, resp.NextRowKey = &pk, &rk
					break
				}
				resp.Entities = append(resp.Entities, r.body)
			}
			m.pages++
			if m.afterPage != nil {
				m.afterPage(m.pages)
			}
			return resp, nil
		},
	})
}

func intSample(u, n uint64) histenc.Sample {
	return histenc.Sample{Unit: u, H: &tablets.Histogram{Count: n, Sum: float64(n), ZeroCount: n}}
}

// A compaction that commits between two pages of a read (its chunks replaced by one, some
// read already and some not) neither hides a sample nor shows one twice, for one series
// and for a packed read of several; the latest write of a millisecond wins throughout.
func TestReadHistogramsAcrossCompaction(t *testing.T) {
	const day = 19_000 * histPartUnits
	for _, many := range []bool{false, true} {
		t.Run(fmt.Sprintf("many=%v", many), func(t *testing.T) {
			m := &memHistTable{pageSize: 3}
			var chunks []histRow
			want := map[uint64]uint64{}
			for i := range 10 { // ten chunks of one sample, priorities 1..10
				rows := histRows("a", []histenc.Sample{intSample(day+uint64(i)*1000, uint64(i))}, uint64(i+1))
				chunks = append(chunks, rows...)
				want[day+uint64(i)*1000] = uint64(i)
			}
			// A later write of millisecond 2000 (priority 20) and a chunk of series b.
			chunks = append(chunks, histRows("a", []histenc.Sample{intSample(day+2000, 99)}, 20)...)
			want[day+2000] = 99
			m.put(chunks...)
			m.put(histRows("b", []histenc.Sample{intSample(day+500, 7)}, 1)...)
			// After the first page (three chunks of a read), compact every chunk of a: one
			// chunk of priority 20, as Compact writes it.
			m.afterPage = func(page int) {
				if page != 1 {
					return
				}
				var samples []histenc.Sample
				for _, u := range slices.Sorted(mapsKeys(want)) {
					samples = append(samples, intSample(u, want[u]))
				}
				for _, c := range chunks {
					m.remove(c.pk, c.rk)
				}
				m.put(histRows("a", samples, 20)...)
			}
			got := map[string][]histenc.Sample{}
			var err error
			if many {
				names := []string{"b", "a"}
				err = readHistMany(context.Background(), m, names, day, day+histPartUnits, func(i int, s histenc.Sample) bool {
					got[names[i]] = append(got[names[i]], s)
					return true
				})
			} else {
				err = readHistOne(context.Background(), m, "a", day, day+histPartUnits, func(s histenc.Sample) bool {
					got["a"] = append(got["a"], s)
					return true
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got["a"]) != len(want) {
				t.Fatalf("%d samples of a, want %d", len(got["a"]), len(want))
			}
			for i, s := range got["a"] {
				if i > 0 && s.Unit <= got["a"][i-1].Unit {
					t.Fatalf("sample %d at %d after %d", i, s.Unit, got["a"][i-1].Unit)
				}
				if w, ok := want[s.Unit]; !ok || s.H.Count != w {
					t.Fatalf("sample at %d holds %d, want %d (%v)", s.Unit, s.H.Count, w, ok)
				}
			}
			if many && (len(got["b"]) != 1 || got["b"][0].H.Count != 7) {
				t.Fatalf("b: %+v", got["b"])
			}
			if m.pages < 2 {
				t.Fatalf("%d pages: the read was never cut", m.pages)
			}
		})
	}
}

func mapsKeys(m map[uint64]uint64) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Rows cut samples by day (partition) and never across one; keys parse back.
func TestHistRowsPartitionsAndKeys(t *testing.T) {
	const day = 19_000 * histPartUnits
	samples := []histenc.Sample{intSample(day-1, 1), intSample(day, 2), intSample(day+5, 3), intSample(day+histPartUnits, 4)}
	rows := histRows("x|y~", samples, 0xabc)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3 (one a day)", len(rows))
	}
	for i, want := range [][2]int{{0, 1}, {1, 3}, {3, 4}} {
		r := rows[i]
		if r.from != want[0] || r.to != want[1] {
			t.Errorf("row %d holds [%d, %d), want %v", i, r.from, r.to, want)
		}
		first, prio, ok := parseHistRowKey([]byte(r.rk))
		if !ok || first != samples[r.from].Unit || prio != 0xabc {
			t.Errorf("row %d RowKey %s: %d %x %v", i, r.rk, first, prio, ok)
		}
		if wantPK := histPartitionKey("x~py~~", samples[r.from].Unit); r.pk != wantPK {
			t.Errorf("row %d PartitionKey %s, want %s", i, r.pk, wantPK)
		}
	}
	// The same samples, the same keys: a retried write lands on the same entities.
	again := histRows("x|y~", samples, 0xabc)
	for i := range rows {
		if rows[i].rk != again[i].rk || string(rows[i].body) != string(again[i].body) {
			t.Errorf("row %d differs on a retry", i)
		}
	}
	for _, bad := range []string{"", "001716422460000-18ea95edac91e707-87c33dae0", "0017164224600x0-18ea95edac91e707-87c33dae",
		"001716422460000+18ea95edac91e707-87c33dae", "001716422460000-18ea95edac91e70g-87c33dae"} {
		if _, _, ok := parseHistRowKey([]byte(bad)); ok {
			t.Errorf("RowKey %q accepted", bad)
		}
	}
}

// The merger keeps the highest priority's sample of a millisecond, the later of equals.
func TestHistMerger(t *testing.T) {
	var m histMerger
	m.add(intSample(5, 1), 1)
	m.add(intSample(3, 2), 2)
	m.add(intSample(5, 3), 3)
	m.add(intSample(5, 4), 2)
	m.add(intSample(9, 5), 1)
	m.add(intSample(9, 6), 1)
	var got []uint64
	m.release(9, func(s histenc.Sample) bool { got = append(got, s.Unit*100+s.H.Count); return true })
	if !slices.Equal(got, []uint64{302, 503}) {
		t.Fatalf("released %v", got)
	}
	got = nil
	m.release(10, func(s histenc.Sample) bool { got = append(got, s.Unit*100+s.H.Count); return true })
	if !slices.Equal(got, []uint64{906}) {
		t.Fatalf("released %v", got)
	}
}

// Runs are closed segments of at least two chunks, at most histMaxRunChunks each.
func TestHistRuns(t *testing.T) {
	var chunks []histChunk
	for i := range 200 {
		chunks = append(chunks, histChunk{rk: fmt.Sprint(i), first: uint64(10 * i), last: uint64(10*i + 5), chunk: make([]byte, 100)})
	}
	chunks[3].last = 45 // overlaps 4: one segment of 3, 4
	runs := histRuns(chunks)
	total := 0
	for _, r := range runs {
		if len(r) < 2 || len(r) > histMaxRunChunks {
			t.Fatalf("a run of %d chunks", len(r))
		}
		total += len(r)
	}
	if total != 200 || len(runs) != 3 {
		t.Fatalf("%d runs of %d chunks", len(runs), total)
	}
	// A segment is never cut: 3 and 4 are in one run.
	for _, r := range runs {
		has3 := slices.ContainsFunc(r, func(c histChunk) bool { return c.rk == "3" })
		has4 := slices.ContainsFunc(r, func(c histChunk) bool { return c.rk == "4" })
		if has3 != has4 {
			t.Fatal("a segment cut between runs")
		}
	}
}

// A sample too large for a chunk of its own (Azure's 64 KiB binary property) is invalid
// input, found before any request; ordinary ones pass without being encoded twice.
func TestValidHistSampleSize(t *testing.T) {
	big := func(n int) HistogramPoint {
		h := &tablets.FloatHistogram{Schema: 0, PositiveSpans: []tablets.HistogramSpan{{Length: uint32(n)}}}
		for i := range n {
			v := float64(i*7919%1000) + 1.0/float64(i+3)
			h.PositiveBuckets = append(h.PositiveBuckets, v)
			h.Count += v
		}
		return HistogramPoint{FH: h}
	}
	if err := validHistSample(big(160)); err != nil {
		t.Fatalf("160 buckets: %v", err)
	}
	err := validHistSample(big(20000))
	if !errors.Is(err, tablets.ErrInvalidHistogram) {
		t.Fatalf("20,000 buckets: %v", err)
	}
}

// Whatever a histogram table's entity holds, decoding it never panics: it is a chunk whose
// keys and header agree, or an error.
func FuzzDecodeHistChunk(f *testing.F) {
	const day = 19_000 * histPartUnits
	for _, rows := range [][]histRow{
		histRows("a", []histenc.Sample{intSample(day+1, 2), intSample(day+9, 3)}, 7),
		histRows(`up{job="x|y"}`, formatHistSamples(), 1),
	} {
		for _, r := range rows {
			f.Add(r.body)
		}
	}
	f.Add([]byte(`{"PartitionKey":"a|001641600000000","RowKey":"001641600000001-0000000000000007-00000000","L":"001641600000000","H@odata.type":"Edm.Binary","H":""}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		e := entity.Entity{AllowStrings: true}
		if e.Decode(raw) != nil {
			return
		}
		c, err := decodeHistChunk(&e, true)
		if err != nil {
			return
		}
		if c.first > c.last {
			t.Fatalf("accepted a chunk from %d to %d", c.first, c.last)
		}
		prev, n := uint64(0), 0
		err = c.samples(0, ^uint64(0), func(s histenc.Sample) {
			if s.Unit < c.first || s.Unit > c.last || n > 0 && s.Unit <= prev {
				t.Fatalf("sample at %d after %d in a chunk from %d to %d", s.Unit, prev, c.first, c.last)
			}
			if (s.H == nil) == (s.FH == nil) {
				t.Fatalf("sample at %d holds H %v and FH %v", s.Unit, s.H != nil, s.FH != nil)
			}
			prev, n = s.Unit, n+1
		})
		if err == nil && n == 0 {
			t.Fatal("a chunk of no sample accepted")
		}
	})
}
