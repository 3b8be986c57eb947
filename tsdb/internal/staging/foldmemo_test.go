package staging

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// A foldMemo answers for the Folds it keeps, all of them or none: each series' samples as
// the Folds wrote them (values exact, NaN included), none for a series they did not write,
// and leaves out a series two of them wrote a millisecond of. It keeps the last memoFolds,
// and not a Fold it could not keep whole.
func TestFoldMemo(t *testing.T) {
	base := time.Date(2024, 5, 23, 10, 0, 0, 0, time.UTC)
	pts := func(values ...float64) []tablets.Point {
		out := make([]tablets.Point, len(values))
		for i, v := range values {
			out[i] = tablets.Point{Time: base.Add(time.Duration(i) * 15 * time.Second), Value: v}
		}
		return out
	}
	later := func(d time.Duration, p []tablets.Point) []tablets.Point {
		out := make([]tablets.Point, len(p))
		for i := range p {
			out[i] = tablets.Point{Time: p[i].Time.Add(d), Value: p[i].Value}
		}
		return out
	}
	receipt := func(b byte) changelog.Receipt { return changelog.Receipt{Digest: [16]byte{b}} }
	m := &foldMemo{}

	one := newMemoFold()
	one.addFloats("a", pts(1, 2.5, math.NaN()))
	one.addFloats("b", pts(4))
	h := histenc.Sample{Unit: uint64(base.UnixMilli()), H: &tablets.Histogram{Count: 3, Sum: 1.5}}
	one.addHists("h", []histenc.Sample{h})
	m.keep(receipt(1).Digest, one)

	if _, ok := m.memoFloats([]changelog.Receipt{receipt(2)}, []string{"a"}); ok {
		t.Fatal("a Fold not kept answered")
	}
	got, ok := m.memoFloats([]changelog.Receipt{receipt(1)}, []string{"a", "b", "c"})
	if !ok {
		t.Fatal("a kept Fold did not answer")
	}
	if len(got["a"]) != 3 || got["a"][1] != pts(1, 2.5)[1] || !math.IsNaN(got["a"][2].Value) || !got["a"][0].Time.Equal(base) {
		t.Errorf("a: %v", got["a"])
	}
	if c, ok := got["c"]; !ok || len(c) != 0 {
		t.Errorf("c, not written: %v %v, want known and empty", c, ok)
	}
	hists, ok := m.memoHists([]changelog.Receipt{receipt(1)}, []string{"h", "a"})
	if !ok || !reflect.DeepEqual(hists["h"], []histenc.Sample{h}) || len(hists["a"]) != 0 {
		t.Errorf("histograms: %v %v", hists, ok)
	}

	two := newMemoFold()
	two.addFloats("a", later(time.Hour, pts(7, 8)))
	two.addFloats("b", pts(5)) // a millisecond the first Fold wrote too
	m.keep(receipt(2).Digest, two)
	got, ok = m.memoFloats([]changelog.Receipt{receipt(1), receipt(2)}, []string{"a", "b"})
	if !ok || len(got["a"]) != 5 || got["a"][4].Value != 8 {
		t.Errorf("two Folds: %v %v", got, ok)
	}
	if _, ok := got["b"]; ok {
		t.Error("b, a millisecond of both Folds: answered")
	}
	if _, ok := m.memoFloats([]changelog.Receipt{receipt(1), receipt(3)}, []string{"a"}); ok {
		t.Error("one of two Folds kept: answered")
	}

	for i := range memoFolds {
		f := newMemoFold()
		f.addFloats("a", pts(float64(i)))
		m.keep(receipt(byte(10+i)).Digest, f)
	}
	if _, ok := m.memoFloats([]changelog.Receipt{receipt(2)}, []string{"a"}); ok {
		t.Errorf("more than %d Folds kept", memoFolds)
	}
	if _, ok := m.memoFloats([]changelog.Receipt{receipt(10 + memoFolds - 1)}, []string{"a"}); !ok {
		t.Error("the last Fold not kept")
	}

	early := newMemoFold()
	early.addFloats("a", []tablets.Point{{Time: time.Unix(-1, 0), Value: 1}})
	early.addFloats("b", pts(1))
	m.keep(receipt(20).Digest, early)
	if _, ok := m.memoFloats([]changelog.Receipt{receipt(20)}, []string{"b"}); ok {
		t.Error("a Fold with a series it could not keep answered")
	}
	var none *foldMemo
	none.keep(receipt(21).Digest, newMemoFold())
	if _, ok := none.memoFloats([]changelog.Receipt{receipt(21)}, []string{"a"}); ok {
		t.Error("no memo answered")
	}
}
