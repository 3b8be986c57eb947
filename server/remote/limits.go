package remote

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/prometheus/storage"

	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/tsdb"
)

// Names of the ingest limits, as the configuration file and LimitHit name them.
const (
	LimitIngestionRate          = "ingestion_rate"
	LimitMaxSeriesPerRequest    = "max_series_per_request"
	LimitMaxLabelNamesPerSeries = "max_label_names_per_series"
	LimitMaxLabelNameLength     = "max_label_name_length"
	LimitMaxLabelValueLength    = "max_label_value_length"
	LimitMaxSeriesPerSelect     = "max_series_per_select"
)

// limitsNow returns the tenant's limits in force now and the status of a rate-limited
// write (zero Limits: none).
func (h *WriteHandler) limitsNow() (limits.Limits, int) {
	if h.opts.Limits == nil {
		return limits.Limits{}, 0
	}
	cfg := h.opts.Limits()
	if cfg == nil {
		return limits.Limits{}, 0
	}
	status := cfg.Requests.RateLimitedStatus
	if status == 0 { // a Config not made by Parse
		status = http.StatusServiceUnavailable
	}
	return cfg.For(h.opts.Tenant), status
}

func (h *WriteHandler) hit(limit string) {
	if h.opts.LimitHit != nil {
		h.opts.LimitHit(limit)
	}
}

// checkSeries refuses a request of more series than MaxSeriesPerRequest: 400, as the same
// request would always be refused (the sender drops it; Prometheus' max_samples_per_send
// keeps its requests far smaller than any sensible limit).
func (h *WriteHandler) checkSeries(d decoded, l limits.Limits) *httpError {
	if l.MaxSeriesPerRequest > 0 && d.series > l.MaxSeriesPerRequest {
		h.hit(LimitMaxSeriesPerRequest)
		return errorf(http.StatusBadRequest, "the request holds %d series, over the tenant's %s of %d: nothing stored",
			d.series, LimitMaxSeriesPerRequest, l.MaxSeriesPerRequest)
	}
	return nil
}

// takeTokens takes the request's samples from the tenant's ingestion bucket and returns how
// many it took. A request that does not fit now is answered status (503 or 429, as
// configured) with the seconds until it would fit in Retry-After: the sender keeps it and
// retries. One larger than the bucket never fits: 400.
func (h *WriteHandler) takeTokens(d decoded, l limits.Limits, status int) (int, *httpError) {
	if l.IngestionRate <= 0 || d.samples == 0 {
		return 0, nil
	}
	burst := l.Burst()
	if d.samples > burst {
		h.hit(LimitIngestionRate)
		return 0, errorf(http.StatusBadRequest, "the request holds %d samples, more than the tenant's ingestion_burst_size of %d: it can never be taken, nothing stored",
			d.samples, burst)
	}
	ok, wait := h.bucket.Take(d.samples, l.IngestionRate, burst)
	if !ok {
		h.hit(LimitIngestionRate)
		herr := errorf(status, "the tenant's %s of %g samples/s is used up: retry the %d samples later, nothing stored",
			LimitIngestionRate, l.IngestionRate, d.samples)
		herr.retryAfter = limits.RetryAfter(wait)
		return 0, herr
	}
	return d.samples, nil
}

// maxQuoted bounds what a refusal quotes of a label name: the names and values it is about
// may be megabytes long.
const maxQuoted = 64

// checkLabelLimits checks a canonical label set (empty values dropped) against the label
// limits; the error names the series (its metric name) and the limit, also returned.
func checkLabelLimits(ls tsdb.Labels, l limits.Limits) (string, error) {
	if l.MaxLabelNamesPerSeries == 0 && l.MaxLabelNameLength == 0 && l.MaxLabelValueLength == 0 {
		return "", nil
	}
	name := quote(ls.Get(tsdb.MetricName))
	if l.MaxLabelNamesPerSeries > 0 && len(ls) > l.MaxLabelNamesPerSeries {
		return LimitMaxLabelNamesPerSeries, fmt.Errorf("series of %s: %d labels, over the tenant's %s of %d",
			name, len(ls), LimitMaxLabelNamesPerSeries, l.MaxLabelNamesPerSeries)
	}
	for _, lb := range ls {
		if l.MaxLabelNameLength > 0 && len(lb.Name) > l.MaxLabelNameLength {
			return LimitMaxLabelNameLength, fmt.Errorf("series of %s: label name %s is %d bytes, over the tenant's %s of %d",
				name, quote(lb.Name), len(lb.Name), LimitMaxLabelNameLength, l.MaxLabelNameLength)
		}
		if l.MaxLabelValueLength > 0 && len(lb.Value) > l.MaxLabelValueLength {
			return LimitMaxLabelValueLength, fmt.Errorf("series of %s: the value of label %s is %d bytes, over the tenant's %s of %d",
				name, quote(lb.Name), len(lb.Value), LimitMaxLabelValueLength, l.MaxLabelValueLength)
		}
	}
	return "", nil
}

// quote quotes s, cut to maxQuoted bytes.
func quote(s string) string {
	if len(s) > maxQuoted {
		cut := maxQuoted
		for cut > 0 && s[cut]&0xc0 == 0x80 { // not inside a UTF-8 sequence
			cut--
		}
		return fmt.Sprintf("%q...", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}

// maxSeries is the tenant's MaxSeriesPerSelect now (0: no limit).
func (h *ReadHandler) maxSeries() int {
	if h.opts.Limits == nil {
		return 0
	}
	if cfg := h.opts.Limits(); cfg != nil {
		return cfg.For(h.opts.Tenant).MaxSeriesPerSelect
	}
	return 0
}

// tooManySeries is the error of a query selecting more than max series: 400, as a read
// over SampleLimit, since the same query always selects them (Prometheus answers a remote
// read over its own sample limit 400 too; its client fails the query and shows the message).
func (h *ReadHandler) tooManySeries(q query) *httpError {
	if h.opts.LimitHit != nil {
		h.opts.LimitHit(LimitMaxSeriesPerSelect)
	}
	return errorf(http.StatusBadRequest, "query %d: selects more than the tenant's %s of %d series (narrow its matchers or its range)",
		q.index, LimitMaxSeriesPerSelect, q.maxSeries)
}

// countSeries refuses a query selecting more than its maxSeries, reading labels only (the
// storage reads no point for hints.Func "series"). A streamed answer checks every query so
// before its first frame: over the limit later, it could only abort the stream, and the
// client would see a broken connection instead of the reason.
func (h *ReadHandler) countSeries(ctx context.Context, q query) error {
	if q.maxSeries <= 0 {
		return nil
	}
	querier, err := h.q.Querier(q.pb.StartTimestampMs, q.pb.EndTimestampMs)
	if err != nil {
		return err
	}
	defer querier.Close()
	hints := &storage.SelectHints{Start: q.pb.StartTimestampMs, End: q.pb.EndTimestampMs, Func: "series"}
	set := querier.Select(ctx, false, hints, q.matchers...)
	for n := 1; set.Next(); n++ {
		if n > q.maxSeries {
			return h.tooManySeries(q)
		}
	}
	return set.Err()
}
