package api

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// This file writes JSON byte-for-byte as Prometheus' web/api/v1 codec (jsoniter with
// custom encoders for PromQL values) does, by appending to a byte slice: results can
// hold millions of points, so going through reflection and json.Marshaler (which
// re-validates every byte it is handed) would be the slowest part of a query.

// appendEnvelopeSuccess writes {"status":"success","data":<data>,"warnings":[..],"infos":[..]};
// data must already be valid JSON. Empty warnings and infos are omitted, as in Prometheus.
func appendEnvelopeSuccess(b, data []byte, warnings, infos []string) []byte {
	b = append(b, `{"status":"success","data":`...)
	b = append(b, data...)
	b = appendStringListField(b, "warnings", warnings)
	b = appendStringListField(b, "infos", infos)
	return append(b, '}')
}

// appendEnvelopeError writes {"status":"error","errorType":"<typ>","error":"<msg>"}.
func appendEnvelopeError(b []byte, typ ErrorType, msg string) []byte {
	b = append(b, `{"status":"error","errorType":`...)
	b = appendString(b, string(typ))
	b = append(b, `,"error":`...)
	b = appendString(b, msg)
	return append(b, '}')
}

func appendStringListField(b []byte, name string, list []string) []byte {
	if len(list) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendStringList(b, list)
}

func appendStringList(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString writes a JSON string escaped as encoding/json does (including its HTML
// escaping of <, > and &, which Prometheus' jsoniter configuration also applies).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			// Rare: let encoding/json deal with escapes, invalid UTF-8 and U+2028/9.
			q, _ := json.Marshal(s) // cannot fail for a string
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat writes a sample value as a JSON string, like Prometheus' jsonutil.MarshalFloat:
// the shortest representation that round-trips, in 'f' format except for very small or
// very large magnitudes, and "NaN", "+Inf", "-Inf" for the special values.
func appendFloat(b []byte, f float64) []byte {
	b = append(b, '"')
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	return append(b, '"')
}

// appendTimestamp writes a millisecond timestamp as seconds with up to three decimals,
// like Prometheus' jsonutil.MarshalTimestamp (no float rounding involved).
func appendTimestamp(b []byte, t int64) []byte {
	if t < 0 {
		b = append(b, '-')
		t = -t
	}
	b = strconv.AppendInt(b, t/1000, 10)
	if frac := t % 1000; frac != 0 {
		b = append(b, '.')
		if frac < 100 {
			b = append(b, '0')
		}
		if frac < 10 {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, frac, 10)
	}
	return b
}

// appendLabels writes a label set as an object, in label (i.e. sorted) order.
func appendLabels(b []byte, ls labels.Labels) []byte {
	b = append(b, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendLabelString(b, l.Name)
		b = append(b, ':')
		b = appendLabelString(b, l.Value)
	})
	return append(b, '}')
}

// appendLabelString writes a label name or value as Prometheus' codec does (jsoniter's
// Stream.WriteString): unlike other strings, with no HTML escaping, and bytes from 0x80 on
// as they are; only '"', '\' and control characters are escaped.
func appendLabelString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendLabelsList writes the data of /api/v1/series: an array of label objects.
func appendLabelsList(b []byte, list []labels.Labels) []byte {
	b = append(b, '[')
	for i, ls := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabels(b, ls)
	}
	return append(b, ']')
}

// appendHistogram writes a native histogram like jsonutil.MarshalHistogram:
// {"count":"42","sum":"3.5","buckets":[[boundaries,"lower","upper","count"],...]},
// where boundaries is 0 (upper inclusive), 1 (lower inclusive), 2 (neither) or 3 (both).
// Empty buckets are left out.
func appendHistogram(b []byte, h *histogram.FloatHistogram) []byte {
	b = append(b, `{"count":`...)
	b = appendFloat(b, h.Count)
	b = append(b, `,"sum":`...)
	b = appendFloat(b, h.Sum)
	found := false
	memo := boundaryMemos.Get().(*floatMemo)
	defer boundaryMemos.Put(memo)
	it := h.AllBucketIterator()
	for it.Next() {
		bucket := it.At()
		if bucket.Count == 0 {
			continue
		}
		if !found {
			b = append(b, `,"buckets":[`...)
			found = true
		} else {
			b = append(b, ',')
		}
		boundaries := 2
		switch {
		case bucket.LowerInclusive && bucket.UpperInclusive:
			boundaries = 3
		case bucket.LowerInclusive:
			boundaries = 1
		case bucket.UpperInclusive:
			boundaries = 0
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(boundaries), 10)
		b = append(b, ',')
		b = memo.appendFloat(b, bucket.Lower)
		b = append(b, ',')
		b = memo.appendFloat(b, bucket.Upper)
		b = append(b, ',')
		b = appendFloat(b, bucket.Count)
		b = append(b, ']')
	}
	if found {
		b = append(b, ']')
	}
	return append(b, '}')
}

// floatMemo keeps the text appendFloat wrote for some values: the boundaries of native
// histograms' buckets, which are their schema's (and the zero bucket's), the same in
// every sample of every series, where formatting a float (its shortest digits) was most of
// the time a refreshed heatmap took to write. Any value is written as appendFloat would:
// the memo is a pure function's, shared by responses through boundaryMemos.
type floatMemo struct {
	text map[uint64]string // by the float's bits, its text with its quotes
}

// maxFloatMemo bounds a memo's values (about 100 KB of them): schemas of a few thousand
// boundaries in all. A full memo starts again.
const maxFloatMemo = 4096

var boundaryMemos = sync.Pool{New: func() any { return &floatMemo{text: make(map[uint64]string)} }}

// appendFloat is appendFloat, from the memo when it wrote f before.
func (m *floatMemo) appendFloat(b []byte, f float64) []byte {
	bits := math.Float64bits(f)
	if t, ok := m.text[bits]; ok {
		return append(b, t...)
	}
	n := len(b)
	b = appendFloat(b, f)
	if len(m.text) >= maxFloatMemo {
		clear(m.text)
	}
	m.text[bits] = string(b[n:])
	return b
}

// appendSample writes one element of a vector:
// {"metric":{...},"value":[ts,"v"]} or {"metric":{...},"histogram":[ts,{...}]}.
func appendSample(b []byte, s promql.Sample) []byte {
	b = append(b, `{"metric":`...)
	b = appendLabels(b, s.Metric)
	if s.H == nil {
		b = append(b, `,"value":[`...)
	} else {
		b = append(b, `,"histogram":[`...)
	}
	b = appendTimestamp(b, s.T)
	b = append(b, ',')
	if s.H == nil {
		b = appendFloat(b, s.F)
	} else {
		b = appendHistogram(b, s.H)
	}
	return append(b, ']', '}')
}

// appendSeries writes one element of a matrix:
// {"metric":{...},"values":[[ts,"v"],...],"histograms":[[ts,{...}],...]},
// leaving out "values" or "histograms" when the series has none.
func appendSeries(b []byte, s promql.Series) []byte {
	b = append(b, `{"metric":`...)
	b = appendLabels(b, s.Metric)
	if len(s.Floats) > 0 {
		b = append(b, `,"values":[`...)
		for i, p := range s.Floats {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = appendTimestamp(b, p.T)
			b = append(b, ',')
			b = appendFloat(b, p.F)
			b = append(b, ']')
		}
		b = append(b, ']')
	}
	if len(s.Histograms) > 0 {
		b = append(b, `,"histograms":[`...)
		for i, p := range s.Histograms {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = appendTimestamp(b, p.T)
			b = append(b, ',')
			b = appendHistogram(b, p.H)
			b = append(b, ']')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendResult writes a query result. Vectors and matrices are arrays (empty ones are
// [], never null); scalars and strings use promql's own MarshalJSON, as Prometheus does,
// so a scalar is [ts,"v"] with the value in plain 'f' format.
func appendResult(b []byte, v parser.Value) ([]byte, error) {
	switch v := v.(type) {
	case promql.Vector:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSample(b, s)
		}
		return append(b, ']'), nil
	case promql.Matrix:
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendSeries(b, s)
		}
		return append(b, ']'), nil
	case promql.Scalar:
		j, err := v.MarshalJSON()
		return append(b, j...), err
	case promql.String:
		j, err := v.MarshalJSON()
		return append(b, j...), err
	default:
		return b, fmt.Errorf("unexpected result type %T", v)
	}
}

// appendQueryData writes the data of /query and /query_range:
// {"resultType":"...","result":...[,"stats":{...}]}.
func appendQueryData(b []byte, v parser.Value, stats any) ([]byte, error) {
	b = append(b, `{"resultType":`...)
	b = appendString(b, string(v.Type()))
	b = append(b, `,"result":`...)
	b, err := appendResult(b, v)
	if err != nil {
		return b, err
	}
	if stats != nil {
		j, err := json.Marshal(stats)
		if err != nil {
			return b, err
		}
		b = append(b, `,"stats":`...)
		b = append(b, j...)
	}
	return append(b, '}'), nil
}
