package blockenc

import (
	"bytes"
	"encoding/base64"
	"testing"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"

	"github.com/seed71701133/tablets/internal/sketchenc"
)

// exampleBlock is the worked example of docs/format.md, "Columnar tier blocks": three
// windows of the minute tier from 2024-05-23T00:00:00Z, rolled up an hour later; window 0
// holds 2.5 at 00:00:01 and 4 at 00:00:31, window 1 only a NaN, window 2 holds 5 at
// 00:02:01 and 6.5 at 00:02:31; windows 0 and 1 are sealed.
func exampleBlock() *Columnar {
	win := func(a, b float64) *Window {
		sk := sketchenc.New(0.01)
		sk.Add(a)
		sk.Add(b)
		return &Window{Count: 2, Sum: a + b, Min: min(a, b), Max: max(a, b), First: a, Last: b,
			FirstAt: time.Second, LastAt: 31 * time.Second, Sketch: sk}
	}
	return &Columnar{Start: 1716422400, Rolled: 1716426000, Windows: []*Window{win(2.5, 4), nil, win(5, 6.5)},
		Sealed: []bool{true, true, false}, Exact: true, NaNs: []uint64{0, 1, 0}}
}

// The worked example of docs/format.md is what the code writes, and reads back.
func TestColumnarFormatDoc(t *testing.T) {
	b := exampleBlock()
	body, err := AppendColumnar(nil, "l31b6fcee16e88a9a05158678b02cd548", time.Minute, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := formatdoc.JSON(t, "columnar-block"); string(body) != string(want) {
		t.Errorf("block:\n got %s\nwant %s", body, want)
	}
	e := entity.Entity{AllowStrings: true, AllowNull: true}
	if err := e.Decode(body); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{
		"k": formatdoc.Hex(t, "columnar-k"), "c": formatdoc.Hex(t, "columnar-c"), "s": formatdoc.Hex(t, "columnar-s"),
		"n": formatdoc.Hex(t, "columnar-n"), "x": formatdoc.Hex(t, "columnar-x"), "l": formatdoc.Hex(t, "columnar-l"),
		"f": formatdoc.Hex(t, "columnar-f"), "q0": formatdoc.Hex(t, "columnar-q0"), "r": formatdoc.Hex(t, "columnar-r"),
	} {
		enc, _ := e.String(name)
		if got, err := base64.StdEncoding.DecodeString(string(enc)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("property %s: % x (%v), want % x", name, got, err, want)
		}
	}
	got, err := DecodeColumnar(&e, time.Minute, 0.01, AllColumns)
	if err != nil {
		t.Fatal(err)
	}
	if d := columnarDiff(b, got, AllColumns); d != "" {
		t.Error(d)
	}
	if want := formatdoc.Lines(t, "columnar-select-sum"); len(want) != 1 || SelectColumnar(ColSum) != want[0] {
		t.Errorf("select %q, want %q", SelectColumnar(ColSum), want)
	}
}
