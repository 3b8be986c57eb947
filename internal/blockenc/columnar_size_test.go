package blockenc

import (
	"math/rand/v2"
	"testing"
	"time"
)

// wireMetadata is what a query answer adds to an entity beyond its selected properties:
// odata.etag, and the page's odata.metadata and framing, generously.
const wireMetadata = 200

// wireBytes is the size on the wire of block b read with cols selected: its JSON as the
// service answers, plus wireMetadata.
func wireBytes(t testing.TB, b *Columnar, step time.Duration, cols Columns) int {
	body, err := AppendColumnar(nil, "http_requests_total|job=api|instance=10.0.0.1:9090", step, b)
	if err != nil {
		t.Fatal(err)
	}
	return len(selectBody(t, body, SelectColumnar(cols))) + wireMetadata
}

const nonSketch = ColCount | ColSum | ColMin | ColMax | ColFirst | ColLast

func TestColumnarSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct {
		name string
		b    *Columnar
		step time.Duration
		max  float64 // bytes per window of the non-sketch columns (the target of issue 21)
		// maxSketch bounds the sketches' bytes per window: a quarter over those measured
		// when written, to catch a regression (the row blocks' are 4 to 7 times as many)
		maxSketch float64
	}{
		{"counter minutes", counterBlock(rng, 1440, time.Minute), time.Minute, 12, 1.5},
		{"gauge minutes", gaugeBlock(rng, 1440, time.Minute), time.Minute, 12, 2.3},
		{"narrow minutes", narrowBlock(rng, 1440, time.Minute), time.Minute, 0, 2.4},
		{"noisy minutes", noisyBlock(rng, 1440, time.Minute), time.Minute, 0, 6.5},
		{"counter hours", counterBlock(rng, 336, time.Hour), time.Hour, 0, 5},
		{"gauge hours", gaugeBlock(rng, 336, time.Hour), time.Hour, 0, 16.5},
		{"narrow hours", narrowBlock(rng, 336, time.Hour), time.Hour, 0, 4.3},
		{"noisy hours", noisyBlock(rng, 336, time.Hour), time.Hour, 0, 65},
	} {
		n := float64(len(tc.b.Windows))
		all := float64(wireBytes(t, tc.b, tc.step, nonSketch)) / n
		count := float64(wireBytes(t, tc.b, tc.step, ColCount)) / n
		sketch := float64(wireBytes(t, tc.b, tc.step, ColSketch)-wireBytes(t, tc.b, tc.step, ColCount)) / n
		per := map[string]float64{}
		for _, c := range []struct {
			name string
			col  Columns
		}{{"sum", ColSum}, {"min", ColMin}, {"max", ColMax}, {"last", ColLast}, {"first", ColFirst | ColLast}} {
			per[c.name] = float64(wireBytes(t, tc.b, tc.step, c.col)-wireBytes(t, tc.b, tc.step, ColCount)) / n
		}
		row := 0
		for _, w := range tc.b.Windows {
			row += len(w.Sketch.Append(nil))
		}
		t.Logf("%-15s non-sketch %5.2f B/window on the wire (count %.2f, sum %.2f, min %.2f, max %.2f, last %.2f, first+last %.2f); sketch %6.2f B/window (%.1f as row blocks' base64)",
			tc.name, all, count, per["sum"], per["min"], per["max"], per["last"], per["first"], sketch, float64(row)*4/3/n)
		if tc.max > 0 && all > tc.max {
			t.Errorf("%s: %.2f bytes a window, over %v", tc.name, all, tc.max)
		}
		if sketch > tc.maxSketch {
			t.Errorf("%s: sketches of %.2f bytes a window, over %v", tc.name, sketch, tc.maxSketch)
		}
	}
}
