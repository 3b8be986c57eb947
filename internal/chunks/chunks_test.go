package chunks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/rounding"
)

// histLayout is the layout of tsdb's histogram tables: milliseconds, a partition a day,
// chunks of up to 16 KiB.
func histLayout(t testing.TB) Layout[histenc.Sample] {
	f, err := rounding.NewKeyFormat(time.Millisecond)
	require.NoError(t, err)
	return Layout[histenc.Sample]{Name: "histograms", Format: f, PartUnits: uint64(24 * time.Hour / time.Millisecond), MaxChunk: 16 << 10,
		Limits: filter.Limits{MaxComparisons: entity.MaxFilterComparisons, MaxLength: filter.DefaultMaxLength}, Codec: Histograms{}}
}

const histDayUnits = uint64(24 * time.Hour / time.Millisecond)

func histRows(l Layout[histenc.Sample], series string, samples []histenc.Sample, prio uint64) []engine.Row {
	var rows []engine.Row
	l.Rows(series, HistogramUnits(samples), samples, prio, func(r engine.Row) { rows = append(rows, r) })
	return rows
}

// memTable is an in-memory table of chunks that answers queries in pages of at most
// pageSize entities in key order, with continuations, as the service does; afterPage runs
// after each page is served (a concurrent compaction, say). It lists only.
type memTable struct {
	engine.Client
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

func (m *memTable) put(rows ...engine.Row) {
	for _, r := range rows {
		var e struct{ L string }
		if err := json.Unmarshal(r.Body, &e); err != nil {
			panic(err)
		}
		m.rows = append(m.rows, memRow{r.PartitionKey, r.RowKey, e.L, r.Body})
	}
	slices.SortFunc(m.rows, func(a, b memRow) int {
		if c := filter.CompareUTF16(a.pk, b.pk); c != 0 {
			return c
		}
		return filter.CompareUTF16(a.rk, b.rk)
	})
}

func (m *memTable) remove(pk, rk string) {
	m.rows = slices.DeleteFunc(m.rows, func(r memRow) bool { return r.pk == pk && r.rk == rk })
}

func (m *memTable) NewListEntitiesPager(opts *aztables.ListEntitiesOptions) *azruntime.Pager[aztables.ListEntitiesResponse] {
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
func TestReadAcrossCompaction(t *testing.T) {
	l := histLayout(t)
	const day = 19_000 * histDayUnits
	for _, many := range []bool{false, true} {
		t.Run(fmt.Sprintf("many=%v", many), func(t *testing.T) {
			m := &memTable{pageSize: 3}
			var chunks []engine.Row
			want := map[uint64]uint64{}
			for i := range 10 { // ten chunks of one sample, priorities 1..10
				rows := histRows(l, "a", []histenc.Sample{intSample(day+uint64(i)*1000, uint64(i))}, uint64(i+1))
				chunks = append(chunks, rows...)
				want[day+uint64(i)*1000] = uint64(i)
			}
			// A later write of millisecond 2000 (priority 20) and a chunk of series b.
			chunks = append(chunks, histRows(l, "a", []histenc.Sample{intSample(day+2000, 99)}, 20)...)
			want[day+2000] = 99
			m.put(chunks...)
			m.put(histRows(l, "b", []histenc.Sample{intSample(day+500, 7)}, 1)...)
			// After the first page (three chunks of a read), compact every chunk of a: one
			// chunk of priority 20, as a compaction writes it.
			m.afterPage = func(page int) {
				if page != 1 {
					return
				}
				var samples []histenc.Sample
				for _, u := range slices.Sorted(maps.Keys(want)) {
					samples = append(samples, intSample(u, want[u]))
				}
				for _, c := range chunks {
					m.remove(c.PartitionKey, c.RowKey)
				}
				m.put(histRows(l, "a", samples, 20)...)
			}
			table := Table[histenc.Sample]{Client: m, Layout: l, Concurrency: 8}
			got := map[string][]histenc.Sample{}
			var err error
			if many {
				names := []string{"b", "a"}
				err = table.ReadMany(context.Background(), names, day, day+histDayUnits, func(i int, _ uint64, s histenc.Sample) bool {
					got[names[i]] = append(got[names[i]], s)
					return true
				})
			} else {
				err = table.Read(context.Background(), "a", day, day+histDayUnits, 0, false, func(_ uint64, s histenc.Sample) bool {
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

// Rows cut samples by day (partition) and never across one; keys parse back.
func TestRowsPartitionsAndKeys(t *testing.T) {
	l := histLayout(t)
	const day = 19_000 * histDayUnits
	samples := []histenc.Sample{intSample(day-1, 1), intSample(day, 2), intSample(day+5, 3), intSample(day+histDayUnits, 4)}
	rows := histRows(l, "x|y~", samples, 0xabc)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3 (one a day)", len(rows))
	}
	for i, want := range [][2]int{{0, 1}, {1, 3}, {3, 4}} {
		r := rows[i]
		if r.From != want[0] || r.To != want[1] {
			t.Errorf("row %d holds [%d, %d), want %v", i, r.From, r.To, want)
		}
		first, prio, ok := l.ParseRowKey([]byte(r.RowKey))
		if !ok || first != samples[r.From].Unit || prio != 0xabc {
			t.Errorf("row %d RowKey %s: %d %x %v", i, r.RowKey, first, prio, ok)
		}
		if wantPK := l.PartitionKey("x~py~~", samples[r.From].Unit); r.PartitionKey != wantPK {
			t.Errorf("row %d PartitionKey %s, want %s", i, r.PartitionKey, wantPK)
		}
	}
	// The same samples, the same keys: a retried write lands on the same entities.
	again := histRows(l, "x|y~", samples, 0xabc)
	for i := range rows {
		if rows[i].RowKey != again[i].RowKey || string(rows[i].Body) != string(again[i].Body) {
			t.Errorf("row %d differs on a retry", i)
		}
	}
	for _, bad := range []string{"", "001716422460000-18ea95edac91e707-87c33dae0", "0017164224600x0-18ea95edac91e707-87c33dae",
		"001716422460000+18ea95edac91e707-87c33dae", "001716422460000-18ea95edac91e70g-87c33dae"} {
		if _, _, ok := l.ParseRowKey([]byte(bad)); ok {
			t.Errorf("RowKey %q accepted", bad)
		}
	}
}

// The merger releases the values below a bound in time order, one per time: the value of
// the highest priority, and among equal priorities (the same chunk read twice) the last
// added; values at or after the bound wait.
func TestMerger(t *testing.T) {
	var m Merger[float64]
	m.Add(5, 1, 10)
	m.Add(3, 2, 10)
	m.Add(5, 3, 30) // a later write of time 5
	m.Add(5, 4, 20)
	m.Add(9, 5, 10)
	m.Add(3, 6, 10) // the same priority again: the last added wins
	type point struct {
		t uint64
		v float64
	}
	var got []point
	collect := func(t uint64, v float64) bool { got = append(got, point{t, v}); return true }
	require.True(t, m.Release(9, collect))
	require.Equal(t, []point{{3, 6}, {5, 3}}, got)
	m.Add(9, 7, 5) // lower priority than the held 9
	got = nil
	require.True(t, m.Release(^uint64(0), collect))
	require.Equal(t, []point{{9, 5}}, got)
	got = nil
	require.True(t, m.Release(^uint64(0), collect), "nothing left")
	require.Empty(t, got)

	// A consumer that stops stops the release.
	m.Add(1, 1, 1)
	m.Add(2, 2, 1)
	n := 0
	require.False(t, m.Release(10, func(uint64, float64) bool { n++; return false }))
	require.Equal(t, 1, n)
}

// The merger of histogram samples keeps the highest priority's sample of a millisecond, the
// later of equals.
func TestMergerHistograms(t *testing.T) {
	var m Merger[histenc.Sample]
	add := func(s histenc.Sample, prio uint64) { m.Add(s.Unit, s, prio) }
	add(intSample(5, 1), 1)
	add(intSample(3, 2), 2)
	add(intSample(5, 3), 3)
	add(intSample(5, 4), 2)
	add(intSample(9, 5), 1)
	add(intSample(9, 6), 1)
	var got []uint64
	m.Release(9, func(_ uint64, s histenc.Sample) bool { got = append(got, s.Unit*100+s.H.Count); return true })
	if !slices.Equal(got, []uint64{302, 503}) {
		t.Fatalf("released %v", got)
	}
	got = nil
	m.Release(10, func(_ uint64, s histenc.Sample) bool { got = append(got, s.Unit*100+s.H.Count); return true })
	if !slices.Equal(got, []uint64{906}) {
		t.Fatalf("released %v", got)
	}
}

// Runs are closed segments of at least two chunks, at most maxRunChunks each.
func TestRuns(t *testing.T) {
	table := Table[histenc.Sample]{Layout: histLayout(t)}
	var chunks []Chunk
	for i := range 200 {
		chunks = append(chunks, Chunk{RowKey: fmt.Sprint(i), First: uint64(10 * i), Last: uint64(10*i + 5), Data: make([]byte, 100)})
	}
	chunks[3].Last = 45 // overlaps 4: one segment of 3, 4
	runs := table.runs(chunks)
	total := 0
	for _, r := range runs {
		if len(r) < 2 || len(r) > maxRunChunks {
			t.Fatalf("a run of %d chunks", len(r))
		}
		total += len(r)
	}
	if total != 200 || len(runs) != 3 {
		t.Fatalf("%d runs of %d chunks", len(runs), total)
	}
	// A segment is never cut: 3 and 4 are in one run.
	for _, r := range runs {
		has3 := slices.ContainsFunc(r, func(c Chunk) bool { return c.RowKey == "3" })
		has4 := slices.ContainsFunc(r, func(c Chunk) bool { return c.RowKey == "4" })
		if has3 != has4 {
			t.Fatal("a segment cut between runs")
		}
	}
}

// Whatever a histogram table's entity holds, decoding it never panics: it is a chunk whose
// keys and header agree, or an error.
func FuzzDecodeHistogramChunk(f *testing.F) {
	l := histLayout(f)
	const day = 19_000 * histDayUnits
	for _, rows := range [][]engine.Row{
		histRows(l, "a", []histenc.Sample{intSample(day+1, 2), intSample(day+9, 3)}, 7),
		histRows(l, `up{job="x|y"}`, []histenc.Sample{intSample(day+60_000, 5), intSample(day+75_000, 6)}, 1),
	} {
		for _, r := range rows {
			f.Add(r.Body)
		}
	}
	f.Add([]byte(`{"PartitionKey":"a|001641600000000","RowKey":"001641600000001-0000000000000007-00000000","L":"001641600000000","H@odata.type":"Edm.Binary","H":""}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		e := entity.Entity{AllowStrings: true}
		if e.Decode(raw) != nil {
			return
		}
		c, err := l.Decode(&e, true)
		if err != nil {
			return
		}
		if c.First > c.Last {
			t.Fatalf("accepted a chunk from %d to %d", c.First, c.Last)
		}
		prev, n := uint64(0), 0
		err = l.Values(c, 0, ^uint64(0), func(u uint64, s histenc.Sample) {
			if u != s.Unit || s.Unit < c.First || s.Unit > c.Last || n > 0 && s.Unit <= prev {
				t.Fatalf("sample at %d after %d in a chunk from %d to %d", s.Unit, prev, c.First, c.Last)
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
