package soak

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/prompb"
)

// Readback compares what the server acknowledged of a tenant with what it reads back.
type Readback struct {
	Samples int64 `json:"samples_read_back"` // of the tenant's own series
	// Missing counts acknowledged samples not read back; Extra, samples read back beyond
	// those acknowledged (a request answered 4xx or never answered may still have been
	// stored, so Extra is not an error by itself).
	Missing int64 `json:"samples_missing"`
	Extra   int64 `json:"samples_extra"`
	// SeriesMissing counts series with acknowledged samples of which none were read back.
	SeriesMissing int64 `json:"series_missing"`
	// CrossTenant counts series read back that carry another tenant's label or are none
	// of the tenant's.
	CrossTenant int64 `json:"series_cross_tenant"`
	// FirstMissing describes the first series with samples missing.
	FirstMissing string `json:"first_missing,omitempty"`
}

// readBack counts each series' samples over [from, to] through the query API
// (count_over_time of each metric name, without a tenant matcher: the tenant is the
// header's) and compares them with acked.
func readBack(ctx context.Context, client *http.Client, base, header string, series Series, acked []acked, from, to time.Time) (Readback, error) {
	var rb Readback
	read := make([]int64, series.Len())
	window := to.Sub(from).Truncate(time.Second) + time.Minute
	for _, name := range metricNames {
		form := url.Values{
			"query": {fmt.Sprintf("count_over_time(%s[%ds])", name, int64(window.Seconds()))},
			"time":  {strconv.FormatFloat(float64(to.UnixMilli())/1000, 'f', 3, 64)},
		}
		res, err := postQuery(ctx, client, base+"/api/v1/query", header, form)
		if err != nil {
			return rb, fmt.Errorf("read back %s of tenant %s: %w", name, series.Tenant, err)
		}
		for _, r := range res {
			i, ok := series.Index(name, r.Metric)
			if !ok || r.Metric["soak_tenant"] != series.Tenant {
				rb.CrossTenant++
				continue
			}
			if len(r.Value) != 2 {
				return rb, fmt.Errorf("read back %s of tenant %s: a value of %d fields", name, series.Tenant, len(r.Value))
			}
			s, _ := r.Value[1].(string)
			n, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return rb, fmt.Errorf("read back %s of tenant %s: value %q: %w", name, series.Tenant, s, err)
			}
			read[i] += int64(n)
		}
	}
	for i, a := range acked {
		rb.Samples += read[i]
		switch d := int64(a.n) - read[i]; {
		case d > 0:
			rb.Missing += d
			if rb.FirstMissing == "" {
				rb.FirstMissing = fmt.Sprintf("%s: %d acknowledged from %s to %s, %d read back",
					labelsText(series.Labels(i)), a.n, time.UnixMilli(a.first).UTC().Format(time.RFC3339Nano), time.UnixMilli(a.last).UTC().Format(time.RFC3339Nano), read[i])
			}
		case d < 0:
			rb.Extra -= d
		}
		if a.n > 0 && read[i] == 0 {
			rb.SeriesMissing++
		}
	}
	return rb, nil
}

// labelsText is labels as PromQL writes a series.
func labelsText(ls []prompb.Label) string {
	var b strings.Builder
	b.WriteString(ls[0].Value)
	b.WriteByte('{')
	for j, l := range ls[1:] {
		if j > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
	}
	b.WriteByte('}')
	return b.String()
}
