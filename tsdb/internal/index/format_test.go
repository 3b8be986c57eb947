package index

import (
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
)

// The index entries Register writes are docs/format.md's ("The series index"): a label set's
// in its metric's partition, flagged or not, and a plain series' in PlainPartition.
func TestEntityFormatDoc(t *testing.T) {
	up := labels.FromStrings("job", "api", "__name__", "up")
	hist := labels.FromStrings("__name__", "rpc_seconds", "job", "api")
	for _, tc := range []struct {
		golden, series string
		ls             labels.Labels // nil: a plain series
		histograms     bool
		pk             string
	}{
		{"index-labels", labels.Key(up), up, false, catalog.MetricPartition("up")},
		{"index-histograms", labels.Key(hist), hist, true, catalog.MetricPartition("rpc_seconds")},
		{"index-plain", "cpu", nil, false, PlainPartition},
	} {
		var e catalog.Entry
		if tc.ls != nil {
			e = catalog.NewEntry(tc.ls)
		}
		pk, body := Entity(tc.series, e, tc.ls != nil, tc.histograms)
		if pk != tc.pk {
			t.Errorf("%s: partition %s, want %s", tc.golden, pk, tc.pk)
		}
		if string(body) != string(formatdoc.JSON(t, tc.golden)) {
			t.Errorf("%s: %s, the document %s", tc.golden, body, formatdoc.JSON(t, tc.golden))
		}
	}
}
