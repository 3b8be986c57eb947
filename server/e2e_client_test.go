package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/seed71701133/tablets/internal/testkit/promrun"
)

// apiClient calls the Prometheus query API of a tablets server (promrun's helpers are bound
// to the Prometheus they started). Any warning in an answer is an error: tablets has no
// reason to warn about these queries.
type apiClient struct {
	base string
	hc   *http.Client
}

func newAPIClient(base string) apiClient {
	return apiClient{base: base, hc: &http.Client{Timeout: time.Minute}}
}

func apiTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

func (c apiClient) get(ctx context.Context, path string, params url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var ans struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Warnings  []string        `json:"warnings"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return fmt.Errorf("%s%s: %s: %.300s", c.base, path, resp.Status, body)
	}
	if ans.Status != "success" {
		return fmt.Errorf("%s%s?%s: %s %s: %s", c.base, path, params.Encode(), resp.Status, ans.ErrorType, ans.Error)
	}
	if len(ans.Warnings) > 0 {
		return fmt.Errorf("%s%s?%s: warnings: %s", c.base, path, params.Encode(), strings.Join(ans.Warnings, "; "))
	}
	return json.Unmarshal(ans.Data, out)
}

func (c apiClient) queryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) (promrun.Matrix, error) {
	var r struct {
		ResultType string         `json:"resultType"`
		Result     promrun.Matrix `json:"result"`
	}
	err := c.get(ctx, "/api/v1/query_range", url.Values{"query": {q}, "start": {apiTime(start)}, "end": {apiTime(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}, &r)
	if err == nil && r.ResultType != "matrix" {
		err = fmt.Errorf("query_range %s: result type %q", q, r.ResultType)
	}
	return r.Result, err
}

func (c apiClient) series(ctx context.Context, match string, start, end time.Time) ([]promrun.Labels, error) {
	var ls []promrun.Labels
	err := c.get(ctx, "/api/v1/series", url.Values{"match[]": {match}, "start": {apiTime(start)}, "end": {apiTime(end)}}, &ls)
	return ls, err
}

func (c apiClient) labelValues(ctx context.Context, name string, start, end time.Time) ([]string, error) {
	var vs []string
	err := c.get(ctx, "/api/v1/label/"+url.PathEscape(name)+"/values", url.Values{"start": {apiTime(start)}, "end": {apiTime(end)}}, &vs)
	return vs, err
}

func (c apiClient) labelNames(ctx context.Context, start, end time.Time) ([]string, error) {
	var ns []string
	err := c.get(ctx, "/api/v1/labels", url.Values{"start": {apiTime(start)}, "end": {apiTime(end)}}, &ns)
	return ns, err
}

// rawSeries are the raw samples of a remote read, by label set (PromQL notation), and the
// label sets.
type rawSeries struct {
	samples map[string][]prompb.Sample
	labels  map[string]labels.Labels
}

// remoteRead sends one remote-read query (SAMPLES, which Prometheus 2.42 serves and tablets
// too) for [start, end] to endpoint and returns the samples, values bit for bit. Series
// without a sample in the range are left out (tablets' documented behaviour; Prometheus may
// send them empty).
func remoteRead(ctx context.Context, endpoint string, start, end time.Time, matchers ...*prompb.LabelMatcher) (*rawSeries, error) {
	res, err := remoteReadResult(ctx, endpoint, start, end, matchers...)
	if err != nil {
		return nil, err
	}
	out := &rawSeries{samples: map[string][]prompb.Sample{}, labels: map[string]labels.Labels{}}
	for _, ts := range res.Timeseries {
		if len(ts.Samples) == 0 {
			continue
		}
		k := promrunLabels(ts.Labels).String()
		if _, dup := out.samples[k]; dup {
			return nil, fmt.Errorf("remote read %s: series %s twice", endpoint, k)
		}
		out.samples[k] = ts.Samples
		out.labels[k] = promLabels(ts.Labels)
	}
	return out, nil
}

// promrunLabels converts remote-read labels.
func promrunLabels(ls []prompb.Label) promrun.Labels {
	l := promrun.Labels{}
	for _, p := range ls {
		l[p.Name] = p.Value
	}
	return l
}

// remoteReadResult sends one remote-read query (SAMPLES) and returns its result.
func remoteReadResult(ctx context.Context, endpoint string, start, end time.Time, matchers ...*prompb.LabelMatcher) (*prompb.QueryResult, error) {
	rr := &prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: start.UnixMilli(), EndTimestampMs: end.UnixMilli(), Matchers: matchers}}}
	data, err := rr.Marshal()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(snappy.Encode(nil, data)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Read-Version", "0.1.0")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("remote read %s: %s: %.300s", endpoint, resp.Status, body)
	}
	dec, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, fmt.Errorf("remote read %s: %w", endpoint, err)
	}
	var ans prompb.ReadResponse
	if err := ans.Unmarshal(dec); err != nil {
		return nil, fmt.Errorf("remote read %s: %w", endpoint, err)
	}
	if len(ans.Results) != 1 {
		return nil, fmt.Errorf("remote read %s: %d results for 1 query", endpoint, len(ans.Results))
	}
	return ans.Results[0], nil
}

// diffRaw lists the differences between two remote reads: series, timestamps and the bits
// of every value (at most limit lines).
func diffRaw(wantRaw, gotRaw *rawSeries, limit int) []string {
	want, got := wantRaw.samples, gotRaw.samples
	var d []string
	add := func(format string, args ...any) {
		if len(d) < limit {
			d = append(d, fmt.Sprintf(format, args...))
		} else if len(d) == limit {
			d = append(d, "...")
		}
	}
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		if !ok {
			add("missing series %s (%d samples)", k, len(want[k]))
			continue
		}
		w := want[k]
		for i := 0; i < max(len(w), len(g)); i++ {
			switch {
			case i >= len(g):
				add("%s: missing %d samples from %s", k, len(w)-i, fmtSample(w[i]))
			case i >= len(w):
				add("%s: %d extra samples from %s", k, len(g)-i, fmtSample(g[i]))
			case w[i].Timestamp != g[i].Timestamp || math.Float64bits(w[i].Value) != math.Float64bits(g[i].Value):
				add("%s: sample %d is %s, want %s", k, i, fmtSample(g[i]), fmtSample(w[i]))
			default:
				continue
			}
			break
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			add("extra series %s (%d samples)", k, len(got[k]))
		}
	}
	return d
}

func fmtSample(s prompb.Sample) string {
	return fmt.Sprintf("%d:%v(%#016x)", s.Timestamp, s.Value, math.Float64bits(s.Value))
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// diffMatrix lists the differences between two range-query answers: the same series, the
// same timestamps, and values equal bit for bit (rel 0) or within rel relative error; NaN
// equals NaN.
func diffMatrix(want, got promrun.Matrix, rel float64, limit int) []string {
	var d []string
	add := func(format string, args ...any) {
		if len(d) < limit {
			d = append(d, fmt.Sprintf(format, args...))
		} else if len(d) == limit {
			d = append(d, "...")
		}
	}
	index := func(m promrun.Matrix, what string) map[string][]promrun.Point {
		out := map[string][]promrun.Point{}
		for _, s := range m {
			k := s.Metric.String()
			if _, dup := out[k]; dup {
				add("%s: series %s twice", what, k)
			}
			out[k] = s.Values
		}
		return out
	}
	w, g := index(want, "want"), index(got, "got")
	for _, k := range sortedKeys(w) {
		gv, ok := g[k]
		if !ok {
			add("missing series %s (%d points)", k, len(w[k]))
			continue
		}
		wv := w[k]
		for i := 0; i < max(len(wv), len(gv)); i++ {
			switch {
			case i >= len(gv):
				add("%s: missing %d points from %v", k, len(wv)-i, wv[i])
			case i >= len(wv):
				add("%s: %d extra points from %v", k, len(gv)-i, gv[i])
			case wv[i].T != gv[i].T || !sameValue(wv[i].V, gv[i].V, rel):
				add("%s: point %d is %d:%v, want %d:%v", k, i, gv[i].T, gv[i].V, wv[i].T, wv[i].V)
			default:
				continue
			}
			break
		}
	}
	for _, k := range sortedKeys(g) {
		if _, ok := w[k]; !ok {
			add("extra series %s (%d points)", k, len(g[k]))
		}
	}
	return d
}

func sameValue(a, b, rel float64) bool {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		return math.IsNaN(a) && math.IsNaN(b)
	case rel == 0:
		return math.Float64bits(a) == math.Float64bits(b)
	case a == b:
		return true
	case math.IsInf(a, 0) || math.IsInf(b, 0):
		return false
	default:
		return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))
	}
}

// diffSets lists the elements of want missing from got and those of got not in want.
func diffSets(want, got []string, limit int) []string {
	in := func(ss []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range ss {
			m[s] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var d []string
	for _, s := range sortedKeys(w) {
		if !g[s] && len(d) < limit {
			d = append(d, "missing "+s)
		}
	}
	for _, s := range sortedKeys(g) {
		if !w[s] && len(d) < limit {
			d = append(d, "extra "+s)
		}
	}
	if len(want) != len(w) || len(got) != len(g) {
		d = append(d, fmt.Sprintf("duplicates: want %d for %d distinct, got %d for %d distinct", len(want), len(w), len(got), len(g)))
	}
	return d
}

func labelStrings(ls []promrun.Labels) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.String()
	}
	return out
}
