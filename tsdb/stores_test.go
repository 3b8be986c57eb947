package tsdb

import (
	"errors"
	"testing"

	"github.com/seed71701133/tablets"
)

func TestCachedSeriesOption(t *testing.T) {
	if err := CheckOptions("abc", &Options{CachedSeries: -1}); !errors.Is(err, tablets.ErrInvalidOptions) {
		t.Fatalf("a negative CachedSeries: %v", err)
	}
	o, err := withDefaults("abc", nil)
	if err != nil || o.CachedSeries != DefaultCachedSeries || o.Now == nil {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
}

func TestFoldWritersOption(t *testing.T) {
	if err := CheckOptions("abc", &Options{FoldWriters: -1}); !errors.Is(err, tablets.ErrInvalidOptions) {
		t.Fatalf("a negative FoldWriters: %v", err)
	}
	o, err := withDefaults("abc", nil)
	if err != nil || o.FoldWriters != DefaultFoldWriters {
		t.Fatalf("defaults: %d, %v", o.FoldWriters, err)
	}
}
