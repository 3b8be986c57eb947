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
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) *httpError {
	return &httpError{status, fmt.Sprintf(format, args...)}
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
	labels   tsdb.Labels
	points   []tablets.Point
	accepted int // samples accepted, duplicates included
}

// maxReasons bounds the reasons an error response lists.
const maxReasons = 5

// assembler groups the valid samples of a request by label set (a set may come in several
// TimeSeries) and counts what it does not store.
type assembler struct {
	index map[string]*series
	out   []*series

	accepted, rejected, histograms, exemplars int
	reasons                                   []string
}

func newAssembler() *assembler {
	return &assembler{index: map[string]*series{}}
}

func (a *assembler) reject(n int, format string, args ...any) {
	a.rejected += n
	if len(a.reasons) < maxReasons {
		a.reasons = append(a.reasons, fmt.Sprintf(format, args...))
	}
}

// add takes the n float samples of one TimeSeries; sample(i) is the i-th.
func (a *assembler) add(raw tsdb.Labels, n int, sample func(int) (int64, float64)) {
	if n == 0 {
		return
	}
	ls, err := canonical(raw)
	if err != nil {
		a.reject(n, "series %s: %v", raw, err)
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
		t := time.UnixMilli(ms).UTC()
		switch {
		case t.Before(tablets.MinTime) || t.After(tablets.MaxTime):
			a.reject(1, "series %s: %v: timestamp %d ms is outside 1970..9999", ls, tablets.ErrInvalidTime, ms)
			continue
		}
		s.points = append(s.points, tablets.Point{Time: t, Value: v})
		s.accepted++
		a.accepted++
	}
}

// finish orders each series' points by time, keeping the last in request order of each
// timestamp: Prometheus' last write wins, without relying on the layout to resolve
// duplicates within one call.
func (a *assembler) finish() []*series {
	out := a.out[:0]
	for _, s := range a.out {
		if len(s.points) == 0 {
			delete(a.index, labelsKey(s.labels))
			continue
		}
		slices.SortStableFunc(s.points, func(p, q tablets.Point) int { return p.Time.Compare(q.Time) })
		kept := s.points[:0]
		for i, p := range s.points {
			if i+1 < len(s.points) && s.points[i+1].Time.Equal(p.Time) {
				continue // a later sample of the same time follows
			}
			kept = append(kept, p)
		}
		s.points = kept
		out = append(out, s)
	}
	a.out = out
	return out
}
