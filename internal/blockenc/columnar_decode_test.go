package blockenc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed71701133/tablets/entity"
)

// blockProps are the binary properties of b (a tier of a minute) by name.
func blockProps(t *testing.T, b *Columnar) map[string][]byte {
	t.Helper()
	props, err := columnarProps(time.Minute, b)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, p := range props {
		m[p.name] = p.value
	}
	return m
}

// Every rejection docs/format.md lists is a DecodeError, and what is not listed decodes.
func TestColumnarDecodeErrors(t *testing.T) {
	ex := blockProps(t, exampleBlock())
	with := func(name string, v []byte) map[string][]byte {
		m := map[string][]byte{}
		for k, x := range ex {
			m[k] = x
		}
		if v == nil {
			delete(m, name)
		} else {
			m[name] = v
		}
		return m
	}
	// The example with times of First and Last at 31 s, and at 1 s.
	late, early := exampleBlock(), exampleBlock()
	for _, w := range late.Windows {
		if w != nil {
			w.FirstAt = w.LastAt
		}
	}
	for _, w := range early.Windows {
		if w != nil {
			w.LastAt = w.FirstAt
		}
	}
	empty := blockProps(t, &Columnar{Start: testStart, Windows: make([]*Window, 3)})
	threes := exampleBlock()
	threes.Windows[0].Count, threes.Windows[0].Sketch = 3, nil
	type tc struct {
		name     string
		w        uint16
		props    map[string][]byte
		step     time.Duration
		accuracy float64
		edit     func(e *entity.Entity)
		reason   string
	}
	cases := []tc{
		{name: "W 0", w: 0, reason: "window count"},
		{name: "W 1441", w: 1441, reason: "window count"},
		{name: "W short of the counts", w: 2, reason: "count column"},
		{name: "W past the counts", w: 4, reason: "column"}, // the padding reads as a count 2
		{name: "W fractional", edit: func(e *entity.Entity) { e.Props[1].Value = 2.5 }, reason: "window count"},
		{name: "version 2", edit: func(e *entity.Entity) { e.Props[0].Value = 2 }, reason: "format version"},
		{name: "no R", edit: func(e *entity.Entity) { e.Props = e.Props[:2] }, reason: "no R"},
		{name: "RowKey", edit: func(e *entity.Entity) { e.RowKey = []byte("1716422400") }, reason: "RowKey"},
		{name: "no k", props: with("k", nil), reason: "sealed"},
		{name: "no c", props: with("c", nil), reason: "count column"},
		{name: "no s", props: with("s", nil), reason: "property s present: false"},
		{name: "s without points", props: func() map[string][]byte { m := with("", nil); m["c"] = empty["c"]; return m }(), reason: "present: true, with 0 windows"},
		{name: "not base64", edit: func(e *entity.Entity) { e.Strings[3].Value = []byte("!!") }, reason: "not base64"},
		{name: "q1 without q0", props: func() map[string][]byte { m := with("q0", nil); m["q1"] = ex["q0"]; return m }(), reason: "q1 without q0"},
		{name: "empty part", edit: func(e *entity.Entity) {
			e.Strings = append(e.Strings, entity.StringProp{Name: []byte("h0"), Value: nil})
		}, reason: "part"},
		{name: "exponent 23", props: with("s", append([]byte{0x2f}, ex["s"][1:]...)), reason: "column s"},
		{name: "predictor 3 in s", props: with("s", append([]byte{0xc3}, ex["s"][1:]...)), reason: "column s"},
		{name: "times past the step", step: 30 * time.Second, reason: "times"},
		{name: "First after Last", props: func() map[string][]byte {
			m := blockProps(t, early)
			m["f"] = blockProps(t, late)["f"]
			return m
		}(), reason: "First after Last"},
		{name: "another accuracy", accuracy: 0.02, reason: "gamma"},
		{name: "invalid accuracy", accuracy: 2, reason: "accuracy"},
		{name: "sketch count", props: func() map[string][]byte {
			m := blockProps(t, threes)
			m["q0"] = ex["q0"]
			return m
		}(), reason: "its sketch's"},
		{name: "sketches without points", props: func() map[string][]byte { m := empty; m["q0"] = ex["q0"]; return m }(), reason: "sketches without"},
		{name: "bytes after c", props: with("c", append([]byte{0xf7, 0x60}, 0)), reason: "count column"},
		{name: "padding", props: with("c", []byte{0xf7, 0x61}), reason: "count column"},
		{name: "bytes after q", props: with("q0", append(append([]byte{}, ex["q0"]...), 0)), reason: "sketch stream"},
		{name: "histogram length past the end", props: with("h0", []byte{0, 5, 1, 0}), reason: "histogram"},
		{name: "histogram uvarint not minimal", props: with("h0", []byte{0x80, 0, 0, 0}), reason: "histogram"},
		{name: "histograms for 2 windows", props: with("h0", []byte{0, 0}), reason: "histogram"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.w == 0 && !strings.HasPrefix(c.name, "W 0") {
				c.w = 3
			}
			if c.props == nil {
				c.props = ex
			}
			if c.step == 0 {
				c.step = time.Minute
			}
			if c.accuracy == 0 {
				c.accuracy = 0.01
			}
			e := columnarEntity(c.w, c.props)
			if c.edit != nil {
				c.edit(e)
			}
			_, err := DecodeColumnar(e, c.step, c.accuracy, AllColumns)
			var de *entity.DecodeError
			if !errors.As(err, &de) || !strings.Contains(de.Reason, c.reason) {
				t.Fatalf("error %v, want a DecodeError saying %q", err, c.reason)
			}
		})
	}
	// Unknown properties and nulls are no error; nor is a 3-window histogram stream.
	e := columnarEntity(3, with("h0", []byte{0, 2, 1, 2, 0}))
	e.Props = append(e.Props, entity.Prop{Name: []byte("Z"), Value: 1})
	b, err := DecodeColumnar(e, time.Minute, 0.01, AllColumns)
	if err != nil || string(b.Histograms[1]) != "\x01\x02" || b.Histograms[0] != nil {
		t.Fatalf("%+v, %v", b, err)
	}
}

// columnarEntity is the entity of a columnar block of w windows with binary properties
// props, rolled at 1.
func columnarEntity(w uint16, props map[string][]byte) *entity.Entity {
	e := fuzzEntity(w, nil)
	for _, name := range []string{"k", "c", "s", "n", "x", "l", "f", "q0", "q1", "h0"} {
		if v, ok := props[name]; ok {
			e.Strings = append(e.Strings, entity.StringProp{Name: []byte(name), Value: []byte(base64Encode(v))})
		}
	}
	return e
}
