package advanced

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/rounding"
)

func testLayout(t testing.TB, partition, row, resolution time.Duration) layout {
	format, err := rounding.NewKeyFormat(resolution)
	require.NoError(t, err)
	return layout{format: format, rowUnits: uint64(row / resolution), partUnits: uint64(partition / resolution),
		limits: filter.Limits{MaxComparisons: 15, MaxLength: filter.DefaultMaxLength}}
}

// The plan of any range, evaluated against every row of several series, selects exactly
// the rows that hold times of the range, in at most six comparisons.
func TestClausesSelectExactlyTheRange(t *testing.T) {
	l := testLayout(t, time.Hour, 4*time.Minute, time.Second)
	names := []string{"cpu", "cpu|001430222400", "cpu~", "cp", "cpu2", "c'p"}
	type row struct {
		series string
		start  uint64
		props  map[string]string
	}
	var rows []row
	base := uint64(1430222400) // an hour start, in seconds
	for _, name := range names {
		for r := range uint64(60) { // 4 hours of rows
			start := base + r*l.rowUnits
			pk := l.partitionKey(escapeSeries(name), start/l.partUnits*l.partUnits)
			rows = append(rows, row{name, start, map[string]string{"PartitionKey": pk, "RowKey": l.key(start)}})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		from := base + rng.Uint64N(4*3600)
		to := from + 1 + rng.Uint64N(4*3600)
		clauses := l.Clauses("cpu", from, to)
		expr := filter.Or(clauses...)
		require.LessOrEqual(t, expr.Comparisons(), 6)
		parsed, err := filter.Parse(expr.String())
		require.NoError(t, err)
		for _, r := range rows {
			want := r.series == "cpu" && r.start+l.rowUnits > from && r.start < to
			require.Equal(t, want, parsed.Eval(r.props), "[%d, %d) row %s %d: %s", from, to, r.series, r.start, expr)
		}
	}
}

func TestAtOrAfter(t *testing.T) {
	l := testLayout(t, time.Hour, 4*time.Minute, time.Second)
	base := uint64(1430222400)
	for _, u := range []uint64{base, base + 240, base + 3600 - 240, base + 3600} {
		e := l.AtOrAfter("cpu", u)
		for r := range uint64(30) {
			start := base + r*240
			props := map[string]string{"PartitionKey": l.partitionKey("cpu", start/3600*3600), "RowKey": l.key(start)}
			require.Equal(t, start >= u, e.Eval(props), "u %d row %d", u, start)
		}
		other := map[string]string{"PartitionKey": l.partitionKey("cpu~pX", base), "RowKey": l.key(base + 3600)}
		require.False(t, e.Eval(other))
	}
}

func TestEscapeAndOwns(t *testing.T) {
	l := testLayout(t, time.Hour, 4*time.Minute, time.Second)
	tests := map[string]string{"cpu": "cpu", "a|b": "a~pb", "a~b": "a~~b", "~p": "~~p", "|": "~p", "温|度": "温~p度"}
	for series, escaped := range tests {
		require.Equal(t, escaped, escapeSeries(series))
		pk := []byte(l.partitionKey(escaped, 1430222400))
		require.True(t, l.Owns(pk, series), series)
		for other := range tests {
			if other != series {
				require.False(t, l.Owns(pk, other), "%q owns %q's key", other, series)
			}
		}
	}
	require.False(t, l.Owns([]byte("cpu"), "cpu"))
	require.False(t, l.Owns([]byte("cpu_001430222400"), "cpu"))
	require.False(t, l.Owns([]byte("cpu|001430222400"), "cpu|"))
}

// Pure client cost of the advanced layout: a full row encoded, then decoded into points.
// Compare a change with:
//
//	go test -run '^$' -bench . -count 6 ./advanced | tee new.txt && benchstat old.txt new.txt
func BenchmarkRow(b *testing.B) {
	l := testLayout(b, time.Hour, 4*time.Minute, time.Second)
	rng := rand.New(rand.NewPCG(1, 1))
	values := make([]float64, 240)
	for i := range values {
		values[i] = rng.NormFloat64() * 100
	}
	pk, rk := l.partitionKey("cpu", 1430222400), l.key(1430222640)
	body := make([]byte, 0, 16<<10)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			body = entity.AppendKeys(body[:0], pk, rk)
			for slot, v := range values {
				body = entity.AppendSlot(body, slot, v)
			}
			body = entity.AppendEnd(body)
		}
		perPoint(b, len(values))
	})
	b.Run("decode", func(b *testing.B) {
		var e entity.Entity
		sum := 0.0
		b.ReportAllocs()
		for b.Loop() {
			if err := e.Decode(body); err != nil {
				b.Fatal(err)
			}
			if err := l.Points(&e, func(t uint64, v float64) { sum += v }); err != nil {
				b.Fatal(err)
			}
		}
		perPoint(b, len(values))
		_ = fmt.Sprint(sum)
	})
}

func perPoint(b *testing.B, points int) {
	n := float64(b.N) * float64(points)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/point")
	b.ReportMetric(n/b.Elapsed().Seconds(), "points/s")
}
