package blockenc

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/sketchenc"
)

// Run the fuzzers with, for example:
//
//	go test -run '^$' -fuzz '^FuzzColumnarRoundTrip$' -fuzztime 200000x ./internal/blockenc
//	go test -run '^$' -fuzz '^FuzzDecodeColumnar$' -fuzztime 200000x ./internal/blockenc

var fuzzSteps = []time.Duration{time.Minute, time.Hour, 5 * time.Second, time.Nanosecond}

// fuzzReader hands out the bytes of a fuzz input, zeros past its end.
type fuzzReader struct{ data []byte }

func (r *fuzzReader) take(n int) uint64 {
	var buf [8]byte
	copy(buf[8-n:], r.data)
	r.data = r.data[min(n, len(r.data)):]
	return binary.BigEndian.Uint64(buf[:])
}

// fuzzValue is a value of one of four kinds: the previous one, a small decimal, any bits
// (NaN payloads included), the previous one plus a small integer.
func (r *fuzzReader) value(kind uint64, prev float64) float64 {
	switch kind & 3 {
	case 0:
		return prev
	case 1:
		return float64(int16(r.take(2))) / 100
	case 2:
		return math.Float64frombits(r.take(8))
	}
	return prev + float64(r.take(1))
}

// fuzzBlock derives a block and its step from data: the window count, the step, whether
// there are sealed flags and histograms, then each window from a control byte.
func fuzzBlock(data []byte) (*Columnar, time.Duration) {
	r := &fuzzReader{data}
	nw := 1 + int(r.take(2)%MaxColumnarWindows)
	step := fuzzSteps[r.take(1)%uint64(len(fuzzSteps))]
	flags := r.take(1)
	b := &Columnar{Start: testStart, Rolled: math.Float64frombits(r.take(8)), Windows: make([]*Window, nw)}
	if math.IsNaN(b.Rolled) { // R is a Double property: JSON keeps no NaN payload
		b.Rolled = 0
	}
	if flags&1 != 0 {
		b.Sealed = make([]bool, nw)
	}
	if flags&2 != 0 {
		b.Histograms = make([][]byte, nw)
	}
	if flags&4 != 0 {
		b.Exact = true
		if flags&8 != 0 {
			b.NaNs = make([]uint64, nw)
		}
	}
	lo, hi := sketchenc.KeyRange(0.01)
	var prev Window
	for i := range nw {
		if len(r.data) == 0 {
			break
		}
		ctl := r.take(1)
		if b.Sealed != nil {
			b.Sealed[i] = ctl&1 != 0
		}
		if b.Histograms != nil && ctl&2 != 0 {
			b.Histograms[i] = []byte(string(r.data[:min(int(r.take(1)%9), len(r.data))]))
		}
		if b.NaNs != nil && ctl&64 != 0 {
			b.NaNs[i] = r.take(2)
		}
		if ctl&12 == 0 {
			continue
		}
		kinds := r.take(2)
		w := &Window{Count: 1 + r.take(1)%5}
		if ctl&16 != 0 {
			w.Count = r.take(8) | 1
		}
		w.Sum, w.Min, w.Max = r.value(kinds, prev.Sum), r.value(kinds>>2, prev.Min), r.value(kinds>>4, prev.Max)
		w.First, w.Last = r.value(kinds>>6, prev.First), r.value(kinds>>8, prev.Last)
		if b.Exact {
			w.Resets = r.value(kinds>>10, prev.Resets)
		}
		w.FirstAt = time.Duration(r.take(5) % uint64(step))
		w.LastAt = w.FirstAt + time.Duration(r.take(5)%uint64(step-w.FirstAt))
		if ctl&32 != 0 { // a sketch, whose count becomes the window's
			zero := r.take(1) % 3
			var bins []sketchenc.Bin
			key := int64(lo) + int64(r.take(2))
			for range r.take(1) % 4 {
				if key > int64(hi) {
					break
				}
				bins = append(bins, sketchenc.Bin{Key: int32(key), Count: 1 + r.take(1)%4})
				key += 1 + int64(r.take(2)%200)
			}
			sk, err := sketchenc.FromBins(0.01, zero, bins, nil)
			if err != nil {
				panic(err)
			}
			if sk.Count() > 0 {
				w.Sketch, w.Count = sk, sk.Count()
			}
		}
		b.Windows[i], prev = w, *w
	}
	return b, step
}

// FuzzColumnarRoundTrip derives a block from the input, encodes it, and checks it decodes
// bit for bit, whole and by columns.
func FuzzColumnarRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x03\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x3f\x55\x55\x01\x02\x03\x04\x05\x06\x07\x08\x09"))
	f.Add([]byte("\x05\xa0\x01\x01\xff\xff\xff\xff\xff\xff\xff\xff\x3f\xaa\xaa\x7f\xf8\x00\x00\x00\x00\x00\x01\xff\xf0\x00\x00\x00\x00\x00\x00\x2d\x7f\xf0\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x00\x10\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x2e\x02\x41\x42\x3c\x00\x01\x10\x20\x30\x40\x50\x60\x70\x80\x22\x02\x01\x02\x03\x04\x05\x06\x07\x08"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, step := fuzzBlock(data)
		body, err := AppendColumnar(nil, "cpu", step, b)
		if err != nil {
			t.Fatal(err)
		}
		want := *b
		if want.Sealed == nil {
			want.Sealed = make([]bool, len(b.Windows))
		}
		cols := AllColumns
		if len(data) > 0 {
			cols = Columns(data[len(data)-1])
		}
		for _, cols := range []Columns{AllColumns, cols} {
			e := entity.Entity{AllowStrings: true, AllowNull: true}
			if err := e.Decode(selectBody(t, body, SelectColumnar(cols))); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeColumnar(&e, step, 0.01, cols)
			if err != nil {
				t.Fatalf("cols %b: %v", cols, err)
			}
			if d := columnarDiff(&want, got, got.Columns); d != "" {
				t.Fatalf("cols %b: %s", cols, d)
			}
			if got.Columns == AllColumns {
				if again, err := AppendColumnar(nil, "cpu", step, got); err != nil || !bytes.Equal(again, body) {
					t.Fatalf("re-encodes to other bytes (%v)", err)
				}
			}
		}
	})
}

// fuzzEntity is the entity of a columnar block of w windows whose properties hold props
// (an empty one is absent).
func fuzzEntity(w uint16, props map[string][]byte) *entity.Entity {
	e := &entity.Entity{PartitionKey: []byte("cpu"), RowKey: []byte(Key(testStart)), AllowStrings: true,
		Props: []entity.Prop{{Name: []byte("V"), Value: VersionColumnar}, {Name: []byte("W"), Value: float64(w)}, {Name: []byte("R"), Value: 1}}}
	for _, name := range []string{"k", "c", "s", "n", "x", "l", "f", "q0", "h0", "r"} {
		if v := props[name]; len(v) > 0 {
			e.Strings = append(e.Strings, entity.StringProp{Name: []byte(name), Value: []byte(base64.StdEncoding.EncodeToString(v))})
		}
	}
	return e
}

// Decoding any columns never panics; what decodes re-encodes to an entity that decodes to
// the same block.
func FuzzDecodeColumnar(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, b := range []*Columnar{exampleBlock(), counterBlock(rng, 5, time.Minute), oddBlock(rng, 12, time.Minute)} {
		props, err := columnarProps(time.Minute, b)
		if err != nil {
			f.Fatal(err)
		}
		m := map[string][]byte{}
		for _, p := range props {
			m[p.name] = p.value
		}
		f.Add(uint16(len(b.Windows)), m["k"], m["c"], m["s"], m["n"], m["x"], m["l"], m["f"], m["q0"], m["h0"], m["r"])
	}
	f.Fuzz(func(t *testing.T, w uint16, k, c, s, n, x, l, fst, q, h, rst []byte) {
		e := fuzzEntity(w, map[string][]byte{"k": k, "c": c, "s": s, "n": n, "x": x, "l": l, "f": fst, "q0": q, "h0": h, "r": rst})
		got, err := DecodeColumnar(e, time.Minute, 0.01, AllColumns)
		if err != nil {
			var de *entity.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("not a DecodeError: %v", err)
			}
			return
		}
		body, err := AppendColumnar(nil, "cpu", time.Minute, got)
		if errors.Is(err, ErrTooLarge) {
			return
		}
		if err != nil {
			t.Fatalf("a decoded block does not encode: %v", err)
		}
		again, err := decodeColumnarBody(t, body, time.Minute, AllColumns)
		if err != nil {
			t.Fatalf("the re-encoding does not decode: %v", err)
		}
		if d := columnarDiff(got, again, AllColumns); d != "" {
			t.Fatalf("decodes to another block after re-encoding: %s", d)
		}
	})
}

func base64Encode(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
