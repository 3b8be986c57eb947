package tiers

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/entity"
)

// A block round-trips through its entity: every window's numbers, the times of First and
// Last, the sketch; a flag-only entity decodes as stale; what is not a block is an error.
func TestBlockRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	step := time.Minute
	start := uint64(1714521600)
	b := &block{start: start, rolled: 1714600000}
	for i := range blockWindows {
		if i%3 == 1 {
			continue
		}
		ws := time.Unix(int64(start), 0).UTC().Add(time.Duration(i) * step)
		w := newWindow(ws, 0.01)
		for range 1 + rng.IntN(50) {
			v := rng.NormFloat64() * 100
			if rng.IntN(20) == 0 {
				v = math.Inf(1)
			}
			w.add(ws.Add(time.Duration(rng.Int64N(int64(step)))), v)
		}
		b.windows[i] = w
	}
	body := appendBlock(nil, "cpu'1", step, b)
	e := entity.Entity{AllowStrings: true}
	require.NoError(t, e.Decode(body))
	got, err := decodeBlock(&e, step, 0.01)
	require.NoError(t, err)
	require.Equal(t, b.start, got.start)
	require.Equal(t, b.rolled, got.rolled)
	require.False(t, got.stale)
	for i, w := range b.windows {
		if w == nil {
			require.Nil(t, got.windows[i])
			continue
		}
		g := got.windows[i]
		require.Equal(t, w.Count, g.Count)
		for _, pair := range [][2]float64{{w.Sum, g.Sum}, {w.Min, g.Min}, {w.Max, g.Max}, {w.First, g.First}, {w.Last, g.Last}} {
			require.Equal(t, math.Float64bits(pair[0]), math.Float64bits(pair[1]))
		}
		require.True(t, w.firstT.Equal(g.firstT) && w.lastT.Equal(g.lastT))
		for _, q := range []float64{0, 0.5, 0.99, 1} {
			require.Equal(t, math.Float64bits(w.Quantile(q)), math.Float64bits(g.Quantile(q)))
		}
	}
	require.NoError(t, e.Decode([]byte(`{"PartitionKey":"cpu","RowKey":"001714521600","S":1}`)))
	flagged, err := decodeBlock(&e, step, 0.01)
	require.NoError(t, err)
	require.True(t, flagged.stale)
	for name, bad := range map[string]string{
		"no version":    `{"PartitionKey":"cpu","RowKey":"001714521600","R":1}`,
		"version 2":     `{"PartitionKey":"cpu","RowKey":"001714521600","V":2}`,
		"bad RowKey":    `{"PartitionKey":"cpu","RowKey":"x","V":1}`,
		"no sketch":     `{"PartitionKey":"cpu","RowKey":"001714521600","V":1,"c0":1}`,
		"count differs": `{"PartitionKey":"cpu","RowKey":"001714521600","V":1,"c0":2,"q0":"AQ==","q0@odata.type":"Edm.Binary"}`,
	} {
		require.NoError(t, e.Decode([]byte(bad)), name)
		_, err := decodeBlock(&e, step, 0.01)
		require.Error(t, err, name)
	}
}
