package blockenc

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seed71701133/tablets/entity"
)

// benchBlocks are a day of minutes of a counter and of a gauge.
func benchBlocks() map[string]*Columnar {
	rng := rand.New(rand.NewPCG(21, 22))
	return map[string]*Columnar{"counter": counterBlock(rng, 1440, time.Minute), "gauge": gaugeBlock(rng, 1440, time.Minute)}
}

func BenchmarkColumnarEncode(b *testing.B) {
	for name, blk := range benchBlocks() {
		b.Run(name, func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				var err error
				if buf, err = AppendColumnar(buf[:0], "cpu|host=a", time.Minute, blk); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf))/float64(len(blk.Windows)), "body-B/window")
		})
	}
}

func BenchmarkColumnarDecode(b *testing.B) {
	for name, blk := range benchBlocks() {
		body, err := AppendColumnar(nil, "cpu|host=a", time.Minute, blk)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			cols Columns
		}{{"all", AllColumns}, {"nonsketch", nonSketch}, {"sum", ColSum}} {
			b.Run(name+"/"+c.name, func(b *testing.B) {
				sel := selectBody(b, body, SelectColumnar(c.cols))
				e := entity.Entity{AllowStrings: true, AllowNull: true}
				for b.Loop() {
					if err := e.Decode(sel); err != nil {
						b.Fatal(err)
					}
					if _, err := DecodeColumnar(&e, time.Minute, 0.01, c.cols); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(blk.Windows)), "ns/window")
			})
		}
	}
}
