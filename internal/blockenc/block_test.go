package blockenc

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/sketchenc"
)

// testBlock returns a block of random windows (some absent, some with infinities).
func testBlock(rng *rand.Rand, step time.Duration) *Block {
	b := &Block{Start: 1714521600, Rolled: 1714600000.25}
	for i := range Windows {
		if i%3 == 1 {
			continue
		}
		w := &Window{Sketch: sketchenc.New(0.01), Min: math.Inf(1), Max: math.Inf(-1)}
		for j := range 1 + rng.IntN(50) {
			v := rng.NormFloat64() * 100
			if rng.IntN(20) == 0 {
				v = math.Inf(1)
			}
			at := time.Duration(rng.Int64N(int64(step)))
			if j == 0 || at < w.FirstAt {
				w.First, w.FirstAt = v, at
			}
			if j == 0 || at >= w.LastAt {
				w.Last, w.LastAt = v, at
			}
			w.Count++
			w.Sum += v
			w.Min, w.Max = min(w.Min, v), max(w.Max, v)
			w.Sketch.Add(v)
		}
		b.Windows[i] = w
	}
	return b
}

// blockDiff says how two blocks differ, comparing every float bit for bit and the sketches
// by their encodings; "" if they do not.
func blockDiff(a, b *Block) string {
	if a.Start != b.Start || math.Float64bits(a.Rolled) != math.Float64bits(b.Rolled) || a.Stale != b.Stale {
		return "start, rolled or stale"
	}
	for i := range Windows {
		x, y := a.Windows[i], b.Windows[i]
		if (x == nil) != (y == nil) {
			return "windows present"
		}
		if x == nil {
			continue
		}
		if x.Count != y.Count || x.FirstAt != y.FirstAt || x.LastAt != y.LastAt {
			return "count or times"
		}
		for _, p := range [][2]float64{{x.Sum, y.Sum}, {x.Min, y.Min}, {x.Max, y.Max}, {x.First, y.First}, {x.Last, y.Last}} {
			if math.Float64bits(p[0]) != math.Float64bits(p[1]) {
				return "aggregates"
			}
		}
		if !bytes.Equal(x.Sketch.Append(nil), y.Sketch.Append(nil)) {
			return "sketch"
		}
	}
	for i := range Windows {
		if !bytes.Equal(a.Histograms[i], b.Histograms[i]) {
			return "histograms"
		}
	}
	return ""
}

func decodeBody(t testing.TB, body []byte, step time.Duration) (*Block, error) {
	e := entity.Entity{AllowStrings: true}
	if err := e.Decode(body); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return Decode(&e, step, 0.01)
}

// A block round-trips bit for bit; a flag-only entity decodes as stale; what is not a block
// is an error.
func TestRoundTrip(t *testing.T) {
	step := time.Minute
	for seed := range uint64(20) {
		b := testBlock(rand.New(rand.NewPCG(seed, 2)), step)
		body := Append(nil, "cpu'1", b)
		got, err := decodeBody(t, body, step)
		if err != nil {
			t.Fatal(err)
		}
		if d := blockDiff(b, got); d != "" {
			t.Fatalf("seed %d: decoded block differs in %s", seed, d)
		}
		if again := Append(nil, "cpu'1", got); !bytes.Equal(again, body) {
			t.Fatalf("seed %d: re-encodes to other bytes", seed)
		}
	}
	flagged, err := decodeBody(t, AppendStale(nil, "cpu", 1714521600), step)
	if err != nil || !flagged.Stale || flagged.Start != 1714521600 {
		t.Fatalf("flag-only entity: %+v, %v", flagged, err)
	}
	for name, bad := range map[string]string{
		"no version":        `{"PartitionKey":"cpu","RowKey":"001714521600","R":1}`,
		"version 2, no h":   `{"PartitionKey":"cpu","RowKey":"001714521600","V":2}`,
		"version 3":         `{"PartitionKey":"cpu","RowKey":"001714521600","V":3,"h0":"AQ==","h0@odata.type":"Edm.Binary"}`,
		"version 1 with h":  `{"PartitionKey":"cpu","RowKey":"001714521600","V":1,"h0":"AQ==","h0@odata.type":"Edm.Binary"}`,
		"h not base64":      `{"PartitionKey":"cpu","RowKey":"001714521600","V":2,"h0":"!!","h0@odata.type":"Edm.Binary"}`,
		"bad RowKey":        `{"PartitionKey":"cpu","RowKey":"x","V":1}`,
		"short RowKey":      `{"PartitionKey":"cpu","RowKey":"1714521600","V":1}`,
		"no sketch":         `{"PartitionKey":"cpu","RowKey":"001714521600","V":1,"c0":1}`,
		"count differs":     `{"PartitionKey":"cpu","RowKey":"001714521600","V":1,"c0":2,"q0":"AQ==","q0@odata.type":"Edm.Binary"}`,
		"S and more":        `{"PartitionKey":"cpu","RowKey":"001714521600","S":1,"c0":1}`,
		"time past step":    `{"PartitionKey":"cpu","RowKey":"001714521600","V":1,"c0":1,"a0":60000000000,"b0":60000000000,"q0":"AQUBWgIC/UqBWr9S8D8AAAAAAAAAAA==","q0@odata.type":"Edm.Binary"}`,
		"last before first": `{"PartitionKey":"cpu","RowKey":"001714521600","V":1,"c0":1,"a0":2,"b0":1,"q0":"AQUBWgIC/UqBWr9S8D8AAAAAAAAAAA==","q0@odata.type":"Edm.Binary"}`,
	} {
		if _, err := decodeBody(t, []byte(bad), step); err == nil {
			t.Errorf("%s: decodes", name)
		}
	}
	// The handmade sketch above (one value, 2.5) is valid: only the times were wrong.
	if _, err := decodeBody(t, []byte(`{"PartitionKey":"cpu","RowKey":"001714521600","V":1,"c0":1,"a0":0,"b0":0,"q0":"AQUBWgIC/UqBWr9S8D8AAAAAAAAAAA==","q0@odata.type":"Edm.Binary"}`), step); err != nil {
		t.Errorf("a valid handmade block: %v", err)
	}
}

// Decoding any entity never panics; what decodes re-encodes to an entity that decodes to
// the same block, bit for bit (but Stale, which Append does not write), and encodes again to
// the same bytes.
func FuzzDecodeBlock(f *testing.F) {
	step := time.Minute
	f.Add(Append(nil, "cpu", testBlock(rand.New(rand.NewPCG(1, 1)), step)))
	f.Add(AppendStale(nil, "cpu", 1714521600))
	f.Add([]byte(`{"PartitionKey":"cpu","RowKey":"001714521600","V":2,"h5":"AQID","h5@odata.type":"Edm.Binary"}`))
	f.Add([]byte(`{"PartitionKey":"cpu","RowKey":"001714521600","V":1,"c0":1,"a0":0,"b0":0,"q0":"AQUBWgIC/UqBWr9S8D8AAAAAAAAAAA==","q0@odata.type":"Edm.Binary"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e := entity.Entity{AllowStrings: true}
		if e.Decode(data) != nil {
			return
		}
		b, err := Decode(&e, step, 0.01)
		if err != nil {
			return
		}
		b.Stale = false
		body := Append(nil, string(e.PartitionKey), b)
		b2, err := decodeBody(t, body, step)
		if err != nil {
			t.Fatalf("the re-encoding does not decode: %v", err)
		}
		if d := blockDiff(b, b2); d != "" {
			t.Fatalf("decodes to another block after re-encoding: %s", d)
		}
		if again := Append(nil, string(e.PartitionKey), b2); !bytes.Equal(again, body) {
			t.Fatalf("re-encodes to other bytes")
		}
	})
}

// A block with histogram windows is version 2 and keeps their bytes as they are; one without
// stays version 1, byte for byte as before.
func TestBlockHistograms(t *testing.T) {
	step := time.Minute
	b := testBlock(rand.New(rand.NewPCG(7, 7)), step)
	v1 := Append(nil, "cpu", b)
	if !bytes.Contains(v1, []byte(`"V":1,`)) || bytes.Contains(v1, []byte(`"h`)) {
		t.Fatalf("a block without histograms: %s", v1)
	}
	b.Histograms[1] = []byte{1, 2, 3} // window 1 holds no points, only histogram samples
	b.Histograms[3] = []byte{4}
	body := Append(nil, "cpu", b)
	if !bytes.Contains(body, []byte(`"V":2,`)) || !bytes.Contains(body, []byte(`"h1@odata.type":"Edm.Binary","h1":"AQID"`)) {
		t.Fatalf("a block with histograms: %s", body)
	}
	got, err := decodeBody(t, body, step)
	if err != nil {
		t.Fatal(err)
	}
	if d := blockDiff(b, got); d != "" {
		t.Fatalf("decodes to another block: %s", d)
	}
	if n := bytes.Count(body, []byte(`@odata.type`)); n > 252 {
		t.Fatalf("%d typed properties", n)
	}
}
