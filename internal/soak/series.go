package soak

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/prompb"
)

// A target is one scraped endpoint of a tenant: it exposes seriesPerTarget series, which a
// scrape samples at one timestamp. Series i of a tenant is series i%seriesPerTarget of
// target i/seriesPerTarget.
const seriesPerTarget = 14

// The metric names of a target's series.
const (
	counterName   = "soak_http_requests_total"
	gaugeName     = "soak_memory_bytes"
	histogramName = "soak_request_duration_seconds"
)

// bucketBounds are the classic histogram's upper bounds, +Inf last.
var bucketBounds = []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "+Inf"}

// bucketShare is the share of observations at or below each bound.
var bucketShare = []float64{0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.97, 1}

// metricNames are the names of a target's series, each once.
var metricNames = []string{counterName, gaugeName, histogramName + "_bucket", histogramName + "_sum", histogramName + "_count"}

// jobs is how many jobs a tenant's targets are spread over (the label `job`).
const jobs = 4

// Series describes the series of one tenant: targets, their labels, and the value of each
// at each time, a deterministic function of the tenant, the series and the time.
type Series struct {
	Tenant   string
	Targets  int
	Interval time.Duration // the scrape interval
}

// Len is the number of series.
func (s Series) Len() int { return s.Targets * seriesPerTarget }

// Labels are series i's labels, sorted by name, __name__ first (as remote write wants).
func (s Series) Labels(i int) []prompb.Label {
	target, k := i/seriesPerTarget, i%seriesPerTarget
	var ls []prompb.Label
	switch {
	case k < 2:
		ls = []prompb.Label{{Name: "__name__", Value: counterName}, {Name: "code", Value: [2]string{"200", "500"}[k]}}
	case k == 2:
		ls = []prompb.Label{{Name: "__name__", Value: gaugeName}}
	case k < 3+len(bucketBounds):
		ls = []prompb.Label{{Name: "__name__", Value: histogramName + "_bucket"}, {Name: "le", Value: bucketBounds[k-3]}}
	case k == 3+len(bucketBounds):
		ls = []prompb.Label{{Name: "__name__", Value: histogramName + "_sum"}}
	default:
		ls = []prompb.Label{{Name: "__name__", Value: histogramName + "_count"}}
	}
	ls = append(ls,
		prompb.Label{Name: "instance", Value: instance(target)},
		prompb.Label{Name: "job", Value: "job" + strconv.Itoa(target%jobs)},
		prompb.Label{Name: "soak_tenant", Value: s.Tenant})
	slices.SortFunc(ls, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
	return ls
}

func instance(target int) string { return "host-" + strconv.Itoa(target) + ":9100" }

// Index is the series whose labels (__name__ included or not: name is given apart) are
// labels, if it is one of s's targets' (ok false otherwise; the tenant label is not
// checked).
func (s Series) Index(name string, labels map[string]string) (int, bool) {
	num, ok := strings.CutPrefix(labels["instance"], "host-")
	if !ok {
		return 0, false
	}
	num, ok = strings.CutSuffix(num, ":9100")
	if !ok {
		return 0, false
	}
	target, err := strconv.Atoi(num)
	if err != nil || target < 0 || target >= s.Targets || instance(target) != labels["instance"] {
		return 0, false
	}
	base := target * seriesPerTarget
	switch name {
	case counterName:
		switch labels["code"] {
		case "200":
			return base, true
		case "500":
			return base + 1, true
		}
	case gaugeName:
		return base + 2, true
	case histogramName + "_bucket":
		for j, b := range bucketBounds {
			if labels["le"] == b {
				return base + 3 + j, true
			}
		}
	case histogramName + "_sum":
		return base + 3 + len(bucketBounds), true
	case histogramName + "_count":
		return base + 4 + len(bucketBounds), true
	}
	return 0, false
}

// Offset is target's scrape offset: it is scraped at the times t with
// t mod Interval = Offset (in Unix time), as Prometheus spreads its targets.
func (s Series) Offset(target int) time.Duration {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", s.Tenant, target)
	return time.Duration(h.Sum64() % uint64(s.Interval))
}

// FirstScrape is target's first scrape at or after t, in Unix milliseconds.
func (s Series) FirstScrape(target int, t time.Time) int64 {
	iv := s.Interval.Milliseconds()
	off := s.Offset(target).Milliseconds()
	ms := t.UnixMilli()
	k := (ms - off + iv - 1) / iv // ms is far past the epoch: ms-off > 0
	return k*iv + off
}

// Value is series i's value at ts (Unix milliseconds): counters and histogram counts rise
// with time, the gauge wanders, each at its own pace.
func (s Series) Value(i int, ts int64) float64 {
	target, k := i/seriesPerTarget, i%seriesPerTarget
	sec := float64(ts / 1000)
	pace := float64(1 + target%5)
	switch {
	case k == 0:
		return sec * pace
	case k == 1:
		return math.Floor(sec * pace / 50)
	case k == 2:
		return 1e8 + float64((uint64(ts/1000)*2654435761+uint64(target))%1_000_000)
	case k < 3+len(bucketBounds):
		return math.Floor(sec * pace * bucketShare[k-3])
	case k == 3+len(bucketBounds):
		return sec * pace * 0.12
	default:
		return sec * pace
	}
}
