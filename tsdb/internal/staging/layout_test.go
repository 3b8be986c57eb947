package staging

import (
	"hash/fnv"
	"testing"
)

// Hash is FNV-1a of 64 bits, as hash/fnv computes it (where a series' column is, a format
// docs/format.md keeps), without a copy of the series.
func TestHashIsFNV1a(t *testing.T) {
	for _, s := range []string{"", "a", `l31b6`, "cpu{host=\"x\"}", "\xff\x00é", string(make([]byte, 600))} {
		h := fnv.New64a()
		h.Write([]byte(s))
		v := h.Sum64()
		if slot, column := Hash(s); slot != int(v>>56) || column != int(v%Columns) {
			t.Errorf("Hash(%q) = %d, %d; FNV-1a gives %d, %d", s, slot, column, v>>56, v%Columns)
		}
	}
	if got := TimeKey(0); got != "8000000000000000" {
		t.Errorf("TimeKey(0) = %q", got)
	}
}
