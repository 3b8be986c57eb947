package chunked

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/internal/priority"
	"github.com/seed71701133/tablets/rounding"
)

func testLayout(t testing.TB, partition, resolution time.Duration) layout {
	format, err := rounding.NewKeyFormat(resolution)
	require.NoError(t, err)
	return layout{format: format, partUnits: uint64(partition / resolution), maxChunk: 1 << 10,
		limits: filter.Limits{MaxComparisons: 15, MaxLength: filter.DefaultMaxLength}}
}

type testChunk struct {
	series      string
	first, last uint64
	props       map[string]string
}

// randomChunks makes chunks of several series over 4 hours: any first time, any length up
// to the end of the first time's partition.
func randomChunks(l layout, rng *rand.Rand, base uint64, names []string) []testChunk {
	var chunks []testChunk
	for _, name := range names {
		for range 300 {
			first := base + rng.Uint64N(4*3600)
			partEnd := l.partitionOf(first) + l.partUnits
			last := first + rng.Uint64N(min(partEnd-first, 1+rng.Uint64N(600)))
			rk := l.rowKey(first, rng.Uint64(), []byte{byte(rng.Uint32())})
			chunks = append(chunks, testChunk{name, first, last, map[string]string{
				"PartitionKey": l.partitionKey(partkey.Escape(name), first), "RowKey": rk, lastProperty: l.key(last)}})
		}
	}
	return chunks
}

// The plan of any range, evaluated against chunks of several series, selects exactly the
// chunks that hold times of the range, in at most six comparisons; AtOrAfter exactly those
// that hold times at or after its unit.
func TestClausesSelectExactlyTheRange(t *testing.T) {
	l := testLayout(t, time.Hour, time.Second)
	names := []string{"cpu", "cpu|001430222400", "cpu~", "cp", "cpu2", "c'p"}
	base := uint64(1430222400)
	rng := rand.New(rand.NewPCG(1, 2))
	chunks := randomChunks(l, rng, base, names)
	for range 1000 {
		from := base + rng.Uint64N(4*3600)
		to := from + 1 + rng.Uint64N(4*3600)
		expr := filter.Or(l.Clauses("cpu", from, to)...)
		require.LessOrEqual(t, expr.Comparisons(), 6)
		parsed, err := filter.Parse(expr.String())
		require.NoError(t, err)
		at, err := filter.Parse(l.AtOrAfter("cpu", from).String())
		require.NoError(t, err)
		for _, c := range chunks {
			want := c.series == "cpu" && c.first < to && c.last >= from
			require.Equal(t, want, parsed.Eval(c.props), "[%d, %d) chunk %s [%d, %d]: %s", from, to, c.series, c.first, c.last, expr)
			require.Equal(t, c.series == "cpu" && c.last >= from, at.Eval(c.props), "AtOrAfter(%d) chunk %s [%d, %d]", from, c.series, c.first, c.last)
		}
	}
}

// Rows cuts points into chunks of at most maxChunk bytes within partitions, and an entity
// decodes back to its points with its Span and Priority.
func TestRowsRoundTrip(t *testing.T) {
	l := testLayout(t, time.Hour, time.Millisecond)
	rng := rand.New(rand.NewPCG(3, 4))
	var units []uint64
	var values []float64
	u := uint64(1430222400000)
	for range 5000 {
		u += 1 + rng.Uint64N(2000)
		units = append(units, u)
		values = append(values, math.Float64frombits(rng.Uint64()))
	}
	next := 0
	var e entity.Entity
	e.AllowStrings = true
	var prio uint64
	l.Rows("cpu", units, values, func(r engine.Row) {
		require.Equal(t, next, r.From)
		next = r.To
		require.NoError(t, e.Decode(r.Body))
		first, last, err := l.Span(&e)
		require.NoError(t, err)
		require.Equal(t, units[r.From], first)
		require.Equal(t, units[r.To-1], last)
		require.Equal(t, l.partitionOf(first), l.partitionOf(last), "a chunk in one partition")
		p, err := l.Priority(&e)
		require.NoError(t, err)
		if prio == 0 {
			prio = p
		}
		require.Equal(t, prio, p, "one priority a write")
		chunk, _ := e.String(chunkProperty)
		require.LessOrEqual(t, len(chunk), (l.maxChunk+2)/3*4, "base64 of at most maxChunk bytes")
		i := r.From
		require.NoError(t, l.Points(&e, func(t2 uint64, v float64) {
			require.Equal(t, units[i], t2)
			require.Equal(t, math.Float64bits(values[i]), math.Float64bits(v))
			i++
		}))
		require.Equal(t, r.To, i)
	})
	require.Equal(t, len(units), next)
	require.Greater(t, priority.Next(), prio, "priorities increase")
}

// Entities that are not chunks of this layout are errors naming the entity.
func TestPointsRejects(t *testing.T) {
	l := testLayout(t, time.Hour, time.Millisecond)
	good := func() []byte {
		var b []byte
		l.Rows("cpu", []uint64{1430222400000, 1430222400500}, []float64{1, 2}, func(r engine.Row) { b = r.Body })
		return b
	}()
	cases := map[string]string{
		"a slot":          `{"PartitionKey":"cpu|001430222400000","RowKey":"001430222400000-0000000000000001-00000000","L":"001430222400500","v1":1}`,
		"no chunk":        `{"PartitionKey":"cpu|001430222400000","RowKey":"001430222400000-0000000000000001-00000000","L":"001430222400500"}`,
		"no L":            `{"PartitionKey":"cpu|001430222400000","RowKey":"001430222400000-0000000000000001-00000000","C":"AQAA"}`,
		"bad RowKey":      `{"PartitionKey":"cpu|001430222400000","RowKey":"garbage","L":"001430222400500","C":"AQAA"}`,
		"L before first":  `{"PartitionKey":"cpu|001430222400000","RowKey":"001430222400000-0000000000000001-00000000","L":"001430222300500","C":"AQAA"}`,
		"other partition": `{"PartitionKey":"cpu|001430226000000","RowKey":"001430222400000-0000000000000001-00000000","L":"001430222400500","C":"AQAA"}`,
		"not base64":      `{"PartitionKey":"cpu|001430222400000","RowKey":"001430222400000-0000000000000001-00000000","L":"001430222400500","C":"!!"}`,
		"empty chunk":     `{"PartitionKey":"cpu|001430222400000","RowKey":"001430222400000-0000000000000001-00000000","L":"001430222400500","C":"AQAA"}`,
	}
	var e entity.Entity
	e.AllowStrings = true
	require.NoError(t, e.Decode(good))
	require.NoError(t, l.Points(&e, func(uint64, float64) {}))
	for name, body := range cases {
		require.NoError(t, e.Decode([]byte(body)), name)
		err := l.Points(&e, func(uint64, float64) {})
		var de *entity.DecodeError
		require.ErrorAs(t, err, &de, name)
		require.Equal(t, "cpu|"+map[bool]string{true: "001430226000000", false: "001430222400000"}[name == "other partition"], de.PartitionKey, name)
	}
}
