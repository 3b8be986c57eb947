package entity

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/seed71701133/tablets"
)

// FuzzValidateSeries: a name is accepted iff it is non-empty valid UTF-8 with no forbidden
// character and a key of at most 1 KiB (UTF-16); a rejection always wraps ErrInvalidSeries;
// an accepted name always makes a valid key, and encodes to a body that decodes back to it.
func FuzzValidateSeries(f *testing.F) {
	for _, s := range []string{"cpu", "", "a/b", "O'Brien", "温度", "\x7f", "\u0085", "🙂", strings.Repeat("x", 512), "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateSeries(s, 0)
		want := s != "" && utf8.ValidString(s) && KeySize(s) <= MaxKeyBytes
		for _, r := range s {
			if forbiddenKeyRune(r) {
				want = false
			}
		}
		if (err == nil) != want {
			t.Fatalf("ValidateSeries(%q) = %v, want ok=%v", s, err, want)
		}
		if err != nil {
			if !errors.Is(err, tablets.ErrInvalidSeries) {
				t.Fatalf("error %v does not wrap ErrInvalidSeries", err)
			}
			return
		}
		if err := ValidateKey(s); err != nil {
			t.Fatalf("valid series %q is not a valid key: %v", s, err)
		}
		var e Entity
		if err := e.Decode(AppendEnd(AppendKeys(nil, s, "0"))); err != nil || string(e.PartitionKey) != s {
			t.Fatalf("%q: decoded %q, %v", s, e.PartitionKey, err)
		}
	})
}
