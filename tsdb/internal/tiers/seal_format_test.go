package tiers

import (
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The dirty marker of docs/format.md, "The catalog", is what a late write upserts, and its
// RowKey reads back as its slice and series.
func TestDirtyFormatDoc(t *testing.T) {
	k := dirtyKey{series: "cpu", slice: 1716422400}
	doc := formatdoc.JSON(t, "dirty")
	if body := appendDirty(k); string(body) != string(doc) {
		t.Errorf("marker %s, the document %s", body, doc)
	}
	if got, ok := parseDirtyKey(k.rowKey()); !ok || got != k {
		t.Errorf("parsed %+v, %v; want %+v", got, ok, k)
	}
}

// A RowKey that is not a marker's is not read as one; a series holding "|" is.
func TestParseDirtyKey(t *testing.T) {
	for _, bad := range []string{"", "lease", "001716422400", "001716422400|", "1716422400|cpu", "00171642240x|cpu", "|cpu"} {
		if k, ok := parseDirtyKey(bad); ok {
			t.Errorf("%q parsed as %+v", bad, k)
		}
	}
	if k, ok := parseDirtyKey("000000086400|a|b"); !ok || k != (dirtyKey{series: "a|b", slice: 86400}) {
		t.Errorf("parsed %+v, %v", k, ok)
	}
}
