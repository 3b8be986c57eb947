package blockenc

import (
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The packed worked example of docs/format.md ("Packed tier blocks") is what the code
// writes, and reads back: the columnar example at its packed keys, with T.
func TestPackedFormatDoc(t *testing.T) {
	const series = "l31b6fcee16e88a9a05158678b02cd548"
	b := exampleBlock()
	body, err := AppendColumnarPacked(nil, series, time.Minute, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := formatdoc.JSON(t, "packed-block"); string(body) != string(want) {
		t.Errorf("block:\n got %s\nwant %s", body, want)
	}
	e := entity.Entity{AllowStrings: true, AllowNull: true}
	if err := e.Decode(body); err != nil {
		t.Fatal(err)
	}
	s, start, ok := ParsePacked(string(e.PartitionKey), string(e.RowKey))
	if !ok || s != series || start != b.Start {
		t.Errorf("keys parse as %q %d %v", s, start, ok)
	}
	got, err := DecodeColumnar(&e, time.Minute, 0.01, AllColumns)
	if err != nil {
		t.Fatal(err)
	}
	if d := columnarDiff(b, got, AllColumns); d != "" {
		t.Error(d)
	}
	// Read without T (a $select leaves it out): the same block.
	e.Strings = dropString(e.Strings, "T")
	if got, err = DecodeColumnar(&e, time.Minute, 0.01, AllColumns); err != nil || columnarDiff(b, got, AllColumns) != "" {
		t.Errorf("without T: %v", err)
	}
}

func dropString(props []entity.StringProp, name string) []entity.StringProp {
	var out []entity.StringProp
	for _, p := range props {
		if string(p.Name) != name {
			out = append(out, p)
		}
	}
	return out
}

func TestPackedKeys(t *testing.T) {
	for _, c := range []struct{ series, pk string }{
		{"l31b6fcee16e88a9a05158678b02cd548", "l3"}, {"cpu", "cp"}, {"a", "a"}, {"é€x", "é€"}, {"a|b", "a|"},
	} {
		if pk := PackedPartition(c.series); pk != c.pk {
			t.Errorf("PackedPartition(%q) = %q, want %q", c.series, pk, c.pk)
		}
		rk := PackedRowKey(c.series, 1716422400)
		if s, start, ok := ParsePacked(c.pk, rk); !ok || s != c.series || start != 1716422400 {
			t.Errorf("ParsePacked(%q, %q) = %q %d %v", c.pk, rk, s, start, ok)
		}
	}
	for _, k := range [][2]string{
		{"l3", "l31b6|00171642240"},   // 11 digits
		{"l3", "l31b6|0017164224000"}, // 13: the series would be "l31b6|0"
		{"l3", "l31b6-001716422400"},  // no "|"
		{"l4", "l31b6|001716422400"},  // another partition
		{"", "|001716422400"},         // no series
		{"l3", "l31b6|00171642240x"},
		{"l3", "001716422400"}, // the series layout's key
	} {
		if s, start, ok := ParsePacked(k[0], k[1]); ok {
			t.Errorf("ParsePacked(%q, %q) = %q %d, want no block", k[0], k[1], s, start)
		}
	}
	// A T that is not the RowKey's start: no block.
	body, err := AppendColumnarPacked(nil, "l31b6", time.Minute, exampleBlock())
	if err != nil {
		t.Fatal(err)
	}
	e := entity.Entity{AllowStrings: true}
	if err := e.Decode(body); err != nil {
		t.Fatal(err)
	}
	for i, p := range e.Strings {
		if string(p.Name) == "T" {
			e.Strings[i].Value = []byte("001716422460")
		}
	}
	if _, err := DecodeColumnar(&e, time.Minute, 0.01, AllColumns); err == nil {
		t.Error("a block whose T is not its RowKey's start decoded")
	}
}

// FuzzPackedKeys: every series (a valid key's characters) and start round-trip through the
// packed keys, and ParsePacked of any keys either fails or reads keys that encode back to
// them.
func FuzzPackedKeys(f *testing.F) {
	f.Add("l31b6fcee16e88a9a05158678b02cd548", uint64(1716422400), "l3", "l31b6|001716422400")
	f.Add("a|0", uint64(0), "a|", "a|0|000000000000")
	f.Fuzz(func(t *testing.T, series string, start uint64, pk, rk string) {
		start %= 1_000_000_000_000
		if series != "" && utf8.ValidString(series) {
			s, got, ok := ParsePacked(PackedPartition(series), PackedRowKey(series, start))
			if !ok || s != series || got != start {
				t.Errorf("%q at %d reads back as %q %d %v", series, start, s, got, ok)
			}
		}
		if s, got, ok := ParsePacked(pk, rk); ok && (PackedPartition(s) != pk || PackedRowKey(s, got) != rk) {
			t.Errorf("ParsePacked(%q, %q) = %q %d: not its keys", pk, rk, s, got)
		}
	})
}
