package stageenc

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// docHistSeries are the series of the worked example of docs/format.md ("Histogram staging
// columns"): a label set's series with an integer histogram, then "cpu" with a float
// histogram whose sum is Prometheus' staleness marker.
func docHistSeries() []HistSeries {
	return []HistSeries{
		{Key: key1, Samples: []histenc.Sample{{Unit: 1716422400000, H: &tablets.Histogram{
			Schema: 0, Count: 3, Sum: 2.5,
			PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{1, 1},
		}}}},
		{Key: "cpu", Samples: []histenc.Sample{{Unit: 1716422405000, FH: &tablets.FloatHistogram{
			CounterResetHint: tablets.GaugeType, Schema: 0, Sum: math.Float64frombits(staleNaN),
		}}}},
	}
}

// histTestColumns are columns of the shapes a remote write stages: integer, float, custom
// bucket and stale samples, several series, several samples a series.
func histTestColumns() map[string][]HistSeries {
	custom := &tablets.Histogram{CounterResetHint: tablets.NotCounterReset, Schema: tablets.CustomBucketsSchema, Count: 4, Sum: 1,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{4, -4, 0}, CustomValues: []float64{0.1, 0.5, 2.5}}
	stale := &tablets.Histogram{Schema: 3, Sum: math.Float64frombits(staleNaN)}
	neg := &tablets.FloatHistogram{Schema: -2, ZeroThreshold: 0.001, ZeroCount: 0.5, Count: 3.5, Sum: -1,
		NegativeSpans: []tablets.HistogramSpan{{Offset: -3, Length: 1}}, NegativeBuckets: []float64{3}}
	return map[string][]HistSeries{
		"doc":    docHistSeries(),
		"one":    {{Key: "a", Samples: []histenc.Sample{{Unit: 0, H: custom}}}},
		"many":   {{Key: key1, Samples: []histenc.Sample{{Unit: 5, H: custom}, {Unit: 9, H: stale}, {Unit: 1 << 50, FH: neg}}}, {Key: "b", Samples: []histenc.Sample{{Unit: 7, FH: neg}}}},
		"twice":  {{Key: "x", Samples: []histenc.Sample{{Unit: 1, H: stale}}}, {Key: "x", Samples: []histenc.Sample{{Unit: 1, H: custom}}}},
		"nokeys": nil,
	}
}

func sameHists(t *testing.T, got, want []HistSeries) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Key != want[i].Key || len(got[i].Samples) != len(want[i].Samples) {
			t.Fatalf("series %d: %q of %d samples, want %q of %d", i, got[i].Key, len(got[i].Samples), want[i].Key, len(want[i].Samples))
		}
		// Samples compare by their encoding: NaN sums are equal by bits there, and empty
		// slices decode as nil.
		if g, w := histenc.Append(nil, got[i].Samples), histenc.Append(nil, want[i].Samples); !bytes.Equal(g, w) {
			t.Fatalf("series %q: samples %+v, want %+v", want[i].Key, got[i].Samples, want[i].Samples)
		}
	}
}

func TestHistRoundTrip(t *testing.T) {
	for name, series := range histTestColumns() {
		b := AppendHist(nil, series)
		got, err := DecodeHist(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameHists(t, got, series)
		if again := AppendHist(nil, got); !bytes.Equal(again, b) {
			t.Fatalf("%s: re-encoded %x, was %x", name, again, b)
		}
		size := 1
		for _, s := range series {
			size += HistRecordSize(s.Key, len(histenc.Append(nil, s.Samples)))
		}
		if size != len(b) {
			t.Errorf("%s: HistRecordSize sums to %d, the column has %d bytes", name, size, len(b))
		}
	}
}

// A float column and a histogram column never decode as each other.
func TestHistColumnVersions(t *testing.T) {
	hist := AppendHist(nil, docHistSeries())
	if _, err := Decode(hist); !errors.Is(err, ErrInvalid) {
		t.Errorf("Decode of a histogram column: %v", err)
	}
	floats := Append(nil, []Series{{Key: "a", Times: []int64{1}, Values: []float64{2}}})
	if _, err := DecodeHist(floats); !errors.Is(err, ErrInvalid) {
		t.Errorf("DecodeHist of a float column: %v", err)
	}
}

func TestDecodeHistRejects(t *testing.T) {
	good := AppendHist(nil, docHistSeries()[:1])
	chunk := histenc.Append(nil, docHistSeries()[0].Samples)
	cases := map[string][]byte{
		"empty":           {},
		"version 1":       append([]byte{1}, good[1:]...),
		"version 3":       append([]byte{3}, good[1:]...),
		"cut":             good[:len(good)-1],
		"trailing":        append(bytes.Clone(good), 0),
		"no tag":          {HistVersion, 7},
		"key cut":         {HistVersion, 1, 0x31},
		"zero length":     {HistVersion, 0, 1, 'a', 0},
		"long length":     append([]byte{HistVersion, 0, 1, 'a', byte(len(chunk) + 1)}, chunk...),
		"length not min.": append([]byte{HistVersion, 0, 1, 'a', 0x80 | byte(len(chunk)), 0}, chunk...),
		"empty chunk":     append([]byte{HistVersion, 0, 1, 'a', 4}, histenc.Append(nil, nil)...),
		"bad chunk":       {HistVersion, 0, 1, 'a', 3, 9, 9, 9},
	}
	for name, b := range cases {
		if got, err := DecodeHist(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: DecodeHist(%x) = %v, %v; want ErrInvalid", name, b, got, err)
		}
	}
}

func TestAppendHistPanics(t *testing.T) {
	for name, series := range map[string][]HistSeries{
		"no key":     {{Samples: docHistSeries()[0].Samples}},
		"no samples": {{Key: "a"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			AppendHist(nil, series)
		}()
	}
}

// The worked example of docs/format.md ("Histogram staging columns") is what AppendHist
// writes, and decodes back.
func TestHistFormatDoc(t *testing.T) {
	want := formatdoc.Hex(t, "stage-hist-column")
	got := AppendHist(nil, docHistSeries())
	if !bytes.Equal(got, want) {
		t.Errorf("AppendHist = %x, the document %x", got, want)
	}
	series, err := DecodeHist(want)
	if err != nil {
		t.Fatal(err)
	}
	sameHists(t, series, docHistSeries())
	if !reflect.DeepEqual(series[0].Samples[0].H, docHistSeries()[0].Samples[0].H) {
		t.Errorf("decoded %+v", series[0].Samples[0].H)
	}
}
