package remote

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang/snappy"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/tsdb"
)

// Content negotiation of remote write (spec 2.0, "Content-Type"): the media type is always
// application/x-protobuf; its proto parameter names the message, absent meaning 1.0's.
const (
	protobufMediaType = "application/x-protobuf"
	protoV1           = "prometheus.WriteRequest"
	protoV2           = "io.prometheus.write.v2.Request"
)

type writeVersion int

const (
	writeV1 writeVersion = 1
	writeV2 writeVersion = 2
)

// writeMessage picks the message of a remote-write request from its headers; an error means
// 415. An empty Content-Type is 1.0 and an empty Content-Encoding snappy, as Prometheus'
// own receiver assumes: old 1.0 senders omit them.
func writeMessage(h http.Header) (writeVersion, error) {
	if err := checkEncoding(h); err != nil {
		return 0, err
	}
	ct := h.Get("Content-Type")
	if ct == "" {
		return writeV1, nil
	}
	media, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return 0, fmt.Errorf("unparsable Content-Type %q: %v", ct, err)
	}
	if media != protobufMediaType {
		return 0, fmt.Errorf("unsupported Content-Type %q: only %s is accepted", ct, protobufMediaType)
	}
	switch proto, ok := params["proto"]; {
	case !ok || proto == protoV1:
		return writeV1, nil
	case proto == protoV2:
		return writeV2, nil
	default:
		return 0, fmt.Errorf("unsupported protobuf message %q: accepted are %s and %s", proto, protoV1, protoV2)
	}
}

// checkEncoding accepts snappy (the only encoding of remote write and read) or none given.
func checkEncoding(h http.Header) error {
	switch enc := strings.TrimSpace(h.Get("Content-Encoding")); {
	case enc == "", strings.EqualFold(enc, "snappy"):
		return nil
	default:
		return fmt.Errorf("unsupported Content-Encoding %q: only snappy is accepted", enc)
	}
}

// httpError is an error with the HTTP status it is answered with.
type httpError struct {
	status     int
	msg        string
	retryAfter int // seconds, for the Retry-After header (0: none)
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) *httpError {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// readSnappy reads a snappy block-format body of at most limit bytes, compressed and
// decompressed (the decoded length is in the block's header: nothing is allocated for a
// body that claims more).
func readSnappy(r *http.Request, w http.ResponseWriter, limit int64) ([]byte, *httpError) {
	compressed, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errorf(http.StatusRequestEntityTooLarge, "request body over %d bytes", limit)
		}
		return nil, errorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	n, err := snappy.DecodedLen(compressed)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "snappy: %v (the body must be snappy's block format)", err)
	}
	if int64(n) > limit {
		return nil, errorf(http.StatusRequestEntityTooLarge, "request body decompresses to %d bytes, over %d", n, limit)
	}
	body, err := snappy.Decode(nil, compressed)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "snappy: %v (the body must be snappy's block format)", err)
	}
	return body, nil
}

// canonical makes a label set as tsdb stores it (labels with an empty value dropped, sorted
// by name) and checks it: tsdb's rules (Labels.Validate) and, as Prometheus' own receiver
// does, a metric name. The error wraps tablets.ErrInvalidLabels.
func canonical(ls tsdb.Labels) (tsdb.Labels, error) {
	out, err := tsdb.Canonical(ls)
	if err != nil {
		return nil, err
	}
	if out.Get(tsdb.MetricName) == "" {
		return nil, fmt.Errorf("%w: no metric name (%s)", tablets.ErrInvalidLabels, tsdb.MetricName)
	}
	return out, nil
}

// labelsKey identifies a valid label set: valid UTF-8 never holds 0xff.
func labelsKey(ls tsdb.Labels) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Name)
		b.WriteByte(0xff)
		b.WriteString(l.Value)
		b.WriteByte(0xff)
	}
	return b.String()
}

// series is one label set of a request and its samples, in request order.
type series struct {
	labels     tsdb.Labels
	points     []tablets.Point
	hists      []tablets.HistogramPoint
	accepted   int // float samples accepted, duplicates included
	histsTaken int // histogram samples accepted, duplicates included
}

// maxReasons bounds the reasons an error response lists.
const maxReasons = 5

// assembler groups the valid samples of a request by label set (a set may come in several
// TimeSeries) and counts what it does not store.
type assembler struct {
	index map[string]*series
	out   []*series

	accepted, rejected, exemplars int
	// Histogram samples accepted and rejected.
	histAccepted, histRejected int
	reasons                    []string

	limits  limits.Limits      // the label limits of the request's tenant
	onLimit func(limit string) // called for each series a label limit refuses
}

func newAssembler() *assembler {
	return &assembler{index: map[string]*series{}, onLimit: func(string) {}}
}

func (a *assembler) reason(format string, args ...any) {
	if len(a.reasons) < maxReasons {
		a.reasons = append(a.reasons, fmt.Sprintf(format, args...))
	}
}

// add takes the n float samples and the m histogram samples of one TimeSeries; sample(i)
// is the i-th float sample, hist(i) the i-th histogram sample.
func (a *assembler) add(raw tsdb.Labels, n int, sample func(int) (int64, float64), m int, hist func(int) (int64, tablets.HistogramPoint)) {
	if n+m == 0 {
		return
	}
	ls, err := canonical(raw)
	if err != nil {
		a.rejected += n
		a.histRejected += m
		a.reason("series %s: %v", raw, err)
		return
	}
	if limit, err := checkLabelLimits(ls, a.limits); err != nil {
		a.rejected += n
		a.histRejected += m
		a.reason("%v", err)
		a.onLimit(limit)
		return
	}
	key := labelsKey(ls)
	s := a.index[key]
	if s == nil {
		s = &series{labels: ls}
		a.index[key] = s
		a.out = append(a.out, s)
	}
	for i := range n {
		ms, v := sample(i)
		t, ok := a.time(ls, ms)
		if !ok {
			a.rejected++
			continue
		}
		s.points = append(s.points, tablets.Point{Time: t, Value: v})
		s.accepted++
		a.accepted++
	}
	for i := range m {
		ms, p := hist(i)
		t, ok := a.time(ls, ms)
		if !ok {
			a.histRejected++
			continue
		}
		if err := p.Validate(); err != nil {
			a.histRejected++
			a.reason("series %s: histogram at %d ms: %v", ls, ms, err)
			continue
		}
		p.Time = t
		s.hists = append(s.hists, p)
		s.histsTaken++
		a.histAccepted++
	}
}

// time converts a sample's timestamp, saying why it cannot be stored when it cannot.
func (a *assembler) time(ls tsdb.Labels, ms int64) (time.Time, bool) {
	t := time.UnixMilli(ms).UTC()
	if t.Before(tablets.MinTime) || t.After(tablets.MaxTime) {
		a.reason("series %s: %v: timestamp %d ms is outside 1970..9999", ls, tablets.ErrInvalidTime, ms)
		return time.Time{}, false
	}
	return t, true
}

// finish orders each series' samples by time, keeping the last in request order of each
// timestamp: Prometheus' last write wins, without relying on the layout to resolve
// duplicates within one call. A histogram at the time of a float sample of its series is
// rejected, as Prometheus' receiver rejects it (it appends the floats first, then the
// histogram is a duplicate sample for the timestamp).
func (a *assembler) finish() []*series {
	out := a.out[:0]
	for _, s := range a.out {
		s.points = lastOfEach(s.points, func(p tablets.Point) time.Time { return p.Time })
		if len(s.points) > 0 && len(s.hists) > 0 {
			s.hists = a.dropClashes(s)
		}
		s.hists = lastOfEach(s.hists, func(p tablets.HistogramPoint) time.Time { return p.Time })
		if len(s.points)+len(s.hists) == 0 {
			delete(a.index, labelsKey(s.labels))
			continue
		}
		out = append(out, s)
	}
	a.out = out
	return out
}

// lastOfEach sorts samples by time, stably, and keeps the last of each time.
func lastOfEach[P any](samples []P, timeOf func(P) time.Time) []P {
	slices.SortStableFunc(samples, func(p, q P) int { return timeOf(p).Compare(timeOf(q)) })
	kept := samples[:0]
	for i, p := range samples {
		if i+1 < len(samples) && timeOf(samples[i+1]).Equal(timeOf(p)) {
			continue // a later sample of the same time follows
		}
		kept = append(kept, p)
	}
	return kept
}

// dropClashes returns the histograms of s whose time holds no float sample of s (sorted by
// time, one per time), rejecting the others.
func (a *assembler) dropClashes(s *series) []tablets.HistogramPoint {
	slices.SortStableFunc(s.hists, func(p, q tablets.HistogramPoint) int { return p.Time.Compare(q.Time) })
	kept := s.hists[:0]
	i := 0
	for _, h := range s.hists {
		for i < len(s.points) && s.points[i].Time.Before(h.Time) {
			i++
		}
		if i < len(s.points) && s.points[i].Time.Equal(h.Time) {
			a.histRejected++
			s.histsTaken--
			a.histAccepted--
			a.reason("series %s: a histogram and a float sample at %d ms (duplicate sample for the timestamp): the float sample is kept", s.labels, h.Time.UnixMilli())
			continue
		}
		kept = append(kept, h)
	}
	return kept
}
