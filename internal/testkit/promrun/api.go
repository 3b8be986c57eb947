package promrun

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
)

// Labels is a label set.
type Labels map[string]string

// String formats l like PromQL: {a="1", b="2"} (sorted), with __name__ in front.
func (l Labels) String() string {
	keys := make([]string, 0, len(l))
	for k := range l {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(l[k])
	}
	return l["__name__"] + "{" + strings.Join(parts, ", ") + "}"
}

// Point is a sample: T in milliseconds since the Unix epoch.
type Point struct {
	T int64
	V float64
}

// Time returns T as a time.Time.
func (p Point) Time() time.Time { return time.UnixMilli(p.T) }

// UnmarshalJSON decodes the API's [<unix seconds>, "<value>"].
func (p *Point) UnmarshalJSON(b []byte) error {
	var raw [2]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("sample %s: %w", b, err)
	}
	var ts json.Number
	var v string
	if err := json.Unmarshal(raw[0], &ts); err != nil {
		return fmt.Errorf("sample %s: timestamp: %w", b, err)
	}
	if err := json.Unmarshal(raw[1], &v); err != nil {
		return fmt.Errorf("sample %s: value: %w", b, err)
	}
	sec, err := ts.Float64()
	if err != nil {
		return fmt.Errorf("sample %s: timestamp: %w", b, err)
	}
	p.T = int64(math.Round(sec * 1000))
	if p.V, err = strconv.ParseFloat(v, 64); err != nil {
		return fmt.Errorf("sample %s: value: %w", b, err)
	}
	return nil
}

// MarshalJSON encodes p as the API does.
func (p Point) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{json.Number(strconv.FormatFloat(float64(p.T)/1000, 'f', -1, 64)),
		strconv.FormatFloat(p.V, 'f', -1, 64)})
}

// Stream is one series of a range query's answer (a matrix).
type Stream struct {
	Metric Labels  `json:"metric"`
	Values []Point `json:"values"`
}

// Matrix is a range query's answer.
type Matrix []Stream

// Find returns the streams whose labels include all of match.
func (m Matrix) Find(match Labels) Matrix {
	var out Matrix
next:
	for _, s := range m {
		for k, v := range match {
			if s.Metric[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// Sample is one series of an instant query's answer (a vector).
type Sample struct {
	Metric Labels `json:"metric"`
	Value  Point  `json:"value"`
}

// Vector is an instant query's answer.
type Vector []Sample

// APIError is an error answer of the HTTP API.
type APIError struct {
	StatusCode int    // HTTP status
	Type       string // errorType, e.g. "bad_data"
	Msg        string // error
}

func (e *APIError) Error() string {
	return fmt.Sprintf("prometheus API: %d %s: %s", e.StatusCode, e.Type, e.Msg)
}

// WarningsError is returned, together with the data, when a successful answer carries
// warnings. Prometheus reports a failed remote read as a warning (the answer then holds
// the local TSDB's data only), so a test that ignores warnings misses remote-read failures.
type WarningsError struct{ Warnings []string }

func (e *WarningsError) Error() string {
	return "prometheus API answered with warnings: " + strings.Join(e.Warnings, "; ")
}

// API sends GET path?params to the server's HTTP API (path like "/api/v1/query") and returns
// the answer's data. If the answer carries warnings it returns the data and a
// *[WarningsError].
func (p *Prometheus) API(ctx context.Context, path string, params url.Values) (json.RawMessage, error) {
	u := p.URL() + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("prometheus API: read answer to %s: %w", path, err)
	}
	var ans struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Warnings  []string        `json:"warnings"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("prometheus API: %s answered %s: %s", path, resp.Status, truncate(body, 500))
	}
	if ans.Status != "success" {
		return nil, &APIError{StatusCode: resp.StatusCode, Type: ans.ErrorType, Msg: ans.Error}
	}
	if len(ans.Warnings) > 0 {
		return ans.Data, &WarningsError{Warnings: ans.Warnings}
	}
	return ans.Data, nil
}

func truncate(b []byte, n int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return append(b[:n:n], "..."...)
	}
	return b
}

// apiTime formats t for the API: Unix seconds with millisecond precision.
func apiTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// result decodes data {"resultType": want, "result": ...} into out.
func result(data json.RawMessage, want string, out any) error {
	var r struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("prometheus API: decode result: %w", err)
	}
	if r.ResultType != want {
		return fmt.Errorf("prometheus API: result type %q, want %q", r.ResultType, want)
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return fmt.Errorf("prometheus API: decode %s: %w", want, err)
	}
	return nil
}

// decodeWith decodes data unless apiErr is an error other than a *WarningsError, and
// returns apiErr (so that data comes with its warnings) or the decoding error.
func decodeWith(data json.RawMessage, apiErr error, decode func(json.RawMessage) error) error {
	if apiErr != nil {
		if _, ok := apiErr.(*WarningsError); !ok {
			return apiErr
		}
	}
	if err := decode(data); err != nil {
		return err
	}
	return apiErr
}

// QueryRange runs a range query (/api/v1/query_range). If the answer carries warnings (a
// failed remote read, for one) it returns the matrix and a *[WarningsError].
func (p *Prometheus) QueryRange(ctx context.Context, query string, start, end time.Time, step time.Duration) (Matrix, error) {
	data, err := p.API(ctx, "/api/v1/query_range", url.Values{
		"query": {query},
		"start": {apiTime(start)},
		"end":   {apiTime(end)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	})
	var m Matrix
	err = decodeWith(data, err, func(d json.RawMessage) error { return result(d, "matrix", &m) })
	return m, err
}

// Query runs an instant query (/api/v1/query) at time at (the server's now if zero), whose
// answer must be a vector. Warnings: see [Prometheus.QueryRange].
func (p *Prometheus) Query(ctx context.Context, query string, at time.Time) (Vector, error) {
	params := url.Values{"query": {query}}
	if !at.IsZero() {
		params.Set("time", apiTime(at))
	}
	data, err := p.API(ctx, "/api/v1/query", params)
	var v Vector
	err = decodeWith(data, err, func(d json.RawMessage) error { return result(d, "vector", &v) })
	return v, err
}

// rangeParams returns match[] (if any), start and end (if not zero).
func rangeParams(matches []string, start, end time.Time) url.Values {
	params := url.Values{}
	for _, m := range matches {
		params.Add("match[]", m)
	}
	if !start.IsZero() {
		params.Set("start", apiTime(start))
	}
	if !end.IsZero() {
		params.Set("end", apiTime(end))
	}
	return params
}

// Series returns the label sets of the series that match the selector match between start
// and end (/api/v1/series; zero times are left out: Prometheus then uses all time).
// Warnings: see [Prometheus.QueryRange].
func (p *Prometheus) Series(ctx context.Context, match string, start, end time.Time) ([]Labels, error) {
	data, err := p.API(ctx, "/api/v1/series", rangeParams([]string{match}, start, end))
	var ls []Labels
	err = decodeWith(data, err, func(d json.RawMessage) error { return json.Unmarshal(d, &ls) })
	return ls, err
}

// LabelValues returns the values of label name between start and end (zero: all time), in
// the series that match any of matches (all series if none) (/api/v1/label/<name>/values).
//
// Remote read has no label queries: Prometheus 2.42 answers them from its local TSDB only,
// with a warning "not implemented" for each remote_read endpoint. LabelValues drops those
// warnings; others: see [Prometheus.QueryRange].
func (p *Prometheus) LabelValues(ctx context.Context, name string, start, end time.Time, matches ...string) ([]string, error) {
	data, err := p.API(ctx, "/api/v1/label/"+url.PathEscape(name)+"/values", rangeParams(matches, start, end))
	err = dropNotImplemented(err)
	var vs []string
	err = decodeWith(data, err, func(d json.RawMessage) error { return json.Unmarshal(d, &vs) })
	return vs, err
}

// LabelNames returns the label names between start and end (zero: all time), in the series
// that match any of matches (all series if none) (/api/v1/labels). Like [Prometheus.LabelValues]
// it answers from the local TSDB only and drops the "not implemented" warnings of remote read.
func (p *Prometheus) LabelNames(ctx context.Context, start, end time.Time, matches ...string) ([]string, error) {
	data, err := p.API(ctx, "/api/v1/labels", rangeParams(matches, start, end))
	err = dropNotImplemented(err)
	var ns []string
	err = decodeWith(data, err, func(d json.RawMessage) error { return json.Unmarshal(d, &ns) })
	return ns, err
}

// dropNotImplemented removes the "not implemented" warnings (remote read's answer to label
// queries) from a *WarningsError, returning nil if none are left.
func dropNotImplemented(err error) error {
	w, ok := err.(*WarningsError)
	if !ok {
		return err
	}
	var keep []string
	for _, m := range w.Warnings {
		if m != "not implemented" {
			keep = append(keep, m)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	return &WarningsError{Warnings: keep}
}

// WaitFor polls the instant query every 200 ms until it returns at least one sample, and
// returns that answer; ctx bounds the wait. Use it to wait for the first scrape (about 5 s
// after start) or for remote-written data to show up. Answers with warnings do not count.
func (p *Prometheus) WaitFor(ctx context.Context, query string) (Vector, error) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		v, err := p.Query(ctx, query, time.Time{})
		if err == nil && len(v) > 0 {
			return v, nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return nil, fmt.Errorf("promrun: waiting for %s: %w (last error: %v)", query, ctx.Err(), last)
			}
			return nil, fmt.Errorf("promrun: waiting for %s: %w (empty answers)", query, ctx.Err())
		case <-p.proc.Done():
			return nil, fmt.Errorf("promrun: waiting for %s: prometheus exited (%v)", query, p.proc.ExitErr())
		case <-tick.C:
		}
	}
}
