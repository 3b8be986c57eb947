package partkey

import (
	"slices"
	"testing"
	"time"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/rounding"
)

func TestSplitInvertsKey(t *testing.T) {
	f, err := rounding.NewFineKeyFormat(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, series := range []string{"cpu", "a~b", "a|b", "~", "|", "~p", "|~|", "x~~p|", "héllo|wörld", "cpu|0000000001"} {
		for _, start := range []uint64{0, 86_400_000, f.Last} {
			pk := Key(f, Escape(series), start)
			got, gotStart, err := Split(f, []byte(pk))
			if err != nil || got != series || gotStart != start {
				t.Errorf("Split(%q) = %q, %d, %v; want %q, %d", pk, got, gotStart, err, series, start)
			}
			if !Owns(f, []byte(pk), series) {
				t.Errorf("%q does not own its key %q", series, pk)
			}
		}
	}
}

func TestSplitRejects(t *testing.T) {
	f, err := rounding.NewFineKeyFormat(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	digits := string(f.AppendUnits(nil, 5))
	for _, pk := range []string{
		"",                    // nothing
		"cpu",                 // no separator or start
		"cpu|",                // no start
		"cpu" + digits,        // no separator
		"|" + digits,          // no series
		"a~|" + digits,        // "~" at the end of the series
		"a~x|" + digits,       // "~" escaping nothing
		"a|b|" + digits,       // a separator inside the series
		"cpu|" + digits[1:],   // a start too short
		"cpu|x" + digits[1:],  // a start that is not digits
		"cpu|" + digits + "0", // a start too long: the separator is not where it belongs
	} {
		if series, start, err := Split(f, []byte(pk)); err == nil {
			t.Errorf("Split(%q) = %q, %d: want an error", pk, series, start)
		}
	}
}

func TestUnescape(t *testing.T) {
	for _, s := range []string{"", "plain", "~", "|", "~~", "~p", "a|b~c", "||~~"} {
		if got, ok := Unescape(Escape(s)); !ok || got != s {
			t.Errorf("Unescape(Escape(%q)) = %q, %v", s, got, ok)
		}
	}
	for _, bad := range []string{"~", "a~", "~q", "a|b"} {
		if got, ok := Unescape(bad); ok {
			t.Errorf("Unescape(%q) = %q: want not ok", bad, got)
		}
	}
}

// Compare is the order of the series' PartitionKeys, whatever their starts: the order a
// query over many series returns them in.
func TestCompareIsKeyOrder(t *testing.T) {
	f, err := rounding.NewFineKeyFormat(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"cpu", "cpu_total", "cpu!", "cpu|x", "cpu~", "cpu}", "cpu{", "c", "d", "~", "|", "a~pb", "a|b", "zz", "x\U0001F600", "x\uE000", "x\uFFFD"}
	for _, a := range names {
		for _, b := range names {
			want := Compare(a, b)
			if (want == 0) != (a == b) {
				t.Errorf("Compare(%q, %q) = %d", a, b, want)
			}
			for _, starts := range [][2]uint64{{0, f.Last}, {f.Last, 0}, {7, 7}} {
				ka, kb := Key(f, Escape(a), starts[0]), Key(f, Escape(b), starts[1])
				if got := filter.CompareUTF16(ka, kb); a != b && got != want {
					t.Errorf("Compare(%q, %q) = %d, keys %q %q compare %d", a, b, want, ka, kb, got)
				}
			}
		}
	}
	sorted := slices.Clone(names)
	slices.SortFunc(sorted, Compare)
	if slices.Index(sorted, "cpu_total") > slices.Index(sorted, "cpu") {
		t.Errorf("sorted %q: the keys of cpu_total sort before those of cpu", sorted)
	}
	if slices.Index(sorted, "x\U0001F600") > slices.Index(sorted, "x\uE000") {
		t.Errorf("sorted %q: a surrogate pair sorts before U+E000 in UTF-16", sorted)
	}
}
