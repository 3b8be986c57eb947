package soak

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
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
	// Unverified counts the acknowledged samples of series whose read-back failed; Error
	// is the first failure.
	Unverified int64  `json:"samples_unverified"`
	Error      string `json:"error,omitempty"`
	// SeriesChecked is how many series were read back (Config.Verify), NotChecked the
	// acknowledged samples of the others.
	SeriesChecked int   `json:"series_checked"`
	NotChecked    int64 `json:"samples_not_checked"`
}

// checkedTargets are the targets whose series are read back: all of them, or, when more
// than most series, targets spread evenly over all (most/seriesPerTarget of them, at
// least one).
func checkedTargets(targets, most int) []int {
	n := targets
	if most > 0 && targets*seriesPerTarget > most {
		n = max(1, most/seriesPerTarget)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = i * targets / n
	}
	return out
}

// readBackTargets is how many targets one read-back query covers: each query reads a few
// hundred series, so that it ends well within the server's query timeout even on
// Azurite (where each of the server's requests scans a whole table).
const readBackTargets = 50

// readBackConcurrency is how many read-back queries are in flight at once.
const readBackConcurrency = 4

// readBackAttempts is how many times a read-back query is sent before its series count as
// unverified.
const readBackAttempts = 3

// readBack counts each series' samples over [from, to] through the query API
// (count_over_time of each metric name and a slice of the targets, without a tenant
// matcher: the tenant is the header's) and compares them with acked. A query that still
// fails after its attempts leaves its series unverified: the error is the first such
// failure.
func readBack(ctx context.Context, client *http.Client, base, header string, series Series, targets []int, acked []acked, from, to time.Time) (Readback, error) {
	var rb Readback
	checked := make([]bool, series.Len())
	for _, t := range targets {
		for k := range seriesPerTarget {
			checked[t*seriesPerTarget+k] = true
		}
	}
	rb.SeriesChecked = len(targets) * seriesPerTarget
	read := make([]int64, series.Len())
	verified := make([]bool, series.Len())
	window := to.Sub(from).Truncate(time.Second) + time.Minute
	type query struct {
		name    string
		targets []int
	}
	var queries []query
	for _, name := range metricNames {
		for j := 0; j < len(targets); j += readBackTargets {
			queries = append(queries, query{name, targets[j:min(j+readBackTargets, len(targets))]})
		}
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan query)
	)
	for range readBackConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range next {
				var err error
				for attempt := 0; attempt < readBackAttempts; attempt++ {
					if err = readBackQuery(ctx, client, base, header, series, q.name, q.targets, window, to, &mu, read, verified, &rb); err == nil || ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, q := range queries {
		next <- q
	}
	close(next)
	wg.Wait()
	for i, a := range acked {
		if !checked[i] {
			rb.NotChecked += int64(a.n)
			continue
		}
		if !verified[i] {
			rb.Unverified += int64(a.n)
			continue
		}
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
	if firstErr != nil {
		rb.Error = shorten(firstErr.Error(), 400)
	}
	return rb, ctx.Err()
}

// readBackQuery reads back one metric of targets, adding each series' count to read and
// marking it verified.
func readBackQuery(ctx context.Context, client *http.Client, base, header string, series Series, name string, targets []int,
	window time.Duration, to time.Time, mu *sync.Mutex, read []int64, verified []bool, rb *Readback) error {
	nums := make([]string, len(targets))
	for j, t := range targets {
		nums[j] = strconv.Itoa(t)
	}
	form := url.Values{
		"query": {fmt.Sprintf(`count_over_time(%s{instance=~"host-(?:%s):9100"}[%ds])`, name, strings.Join(nums, "|"), int64(window.Seconds()))},
		"time":  {strconv.FormatFloat(float64(to.UnixMilli())/1000, 'f', 3, 64)},
	}
	res, err := postQuery(ctx, client, base+"/api/v1/query", header, form)
	if err != nil {
		return fmt.Errorf("read back %s of tenant %s, targets %d to %d: %w", name, series.Tenant, targets[0], targets[len(targets)-1], err)
	}
	counts := map[int]int64{}
	var cross int64
	for _, r := range res {
		i, ok := series.Index(name, r.Metric)
		if !ok || r.Metric["soak_tenant"] != series.Tenant {
			cross++
			continue
		}
		if len(r.Value) != 2 {
			return fmt.Errorf("read back %s of tenant %s: a value of %d fields", name, series.Tenant, len(r.Value))
		}
		s, _ := r.Value[1].(string)
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("read back %s of tenant %s: value %q: %w", name, series.Tenant, s, err)
		}
		counts[i] += int64(n)
	}
	mu.Lock()
	defer mu.Unlock()
	rb.CrossTenant += cross
	for i, n := range counts {
		read[i] += n
	}
	for _, t := range targets {
		for k := range seriesPerTarget {
			if i := t*seriesPerTarget + k; metricOf(i) == name {
				verified[i] = true
			}
		}
	}
	return nil
}

// metricOf is the metric name of series i.
func metricOf(i int) string {
	k := i % seriesPerTarget
	switch {
	case k < 2:
		return counterName
	case k == 2:
		return gaugeName
	case k < 3+len(bucketBounds):
		return histogramName + "_bucket"
	case k == 3+len(bucketBounds):
		return histogramName + "_sum"
	}
	return histogramName + "_count"
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
