package entity

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// Compare a change with:
//
//	go test -run '^$' -bench . -count 6 ./entity | tee new.txt && benchstat old.txt new.txt
//
// ns/point and allocs/point are per point of a full 240-slot row.

func benchRow() (map[int]float64, []byte) {
	rng := rand.New(rand.NewPCG(1, 1))
	values := make(map[int]float64, 240)
	for slot := range 240 {
		values[slot] = rng.NormFloat64() * 100
	}
	return values, encodeRow("cpu|001430222400", "001430222640", values)
}

func BenchmarkEncodeRow(b *testing.B) {
	values, _ := benchRow()
	slots := make([]float64, 240)
	for i := range slots {
		slots[i] = values[i]
	}
	buf := make([]byte, 0, 16<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendKeys(buf[:0], "cpu|001430222400", "001430222640")
		for slot, v := range slots {
			buf = AppendSlot(buf, slot, v)
		}
		buf = AppendEnd(buf)
	}
	perPoint(b, 240)
	b.ReportMetric(float64(len(buf))/240, "bytes/point")
}

func BenchmarkDecodeRow(b *testing.B) {
	_, body := benchRow()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		b.Fatal(err)
	}
	body, _ = json.Marshal(m) // as aztables hands it over
	var e Entity
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
	perPoint(b, 240)
}

func BenchmarkDecodeBasic(b *testing.B) {
	body := []byte(`{"PartitionKey":"cpu","RowKey":"001430222640123","Timestamp":"2024-01-01T00:00:00.0000000Z","V":12.375,"odata.etag":"W/\"datetime'2024-01-01T00%3A00%3A00.0000000Z'\""}`)
	var e Entity
	b.ReportAllocs()
	for b.Loop() {
		if err := e.Decode(body); err != nil {
			b.Fatal(err)
		}
	}
	perPoint(b, 1)
}

// perPoint reports time and allocations per point, computed after the loop.
func perPoint(b *testing.B, points int) {
	n := float64(b.N) * float64(points)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/point")
	b.ReportMetric(n/b.Elapsed().Seconds(), "points/s")
}
