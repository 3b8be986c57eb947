package remote

import (
	"net/http"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
)

// FuzzReadBody: whatever a client posts to remote read (the protobuf inside the snappy block,
// or with raw set the block itself), the handler answers without panicking: 200 exactly
// when the body is a ReadRequest of non-empty queries, valid matchers and a response type it
// has, with as many results as queries (SAMPLES) or well-framed messages (streamed); else
// 400, or 413 for a block claiming more than the body limit.
func FuzzReadBody(f *testing.F) {
	for _, req := range []*prompb.ReadRequest{
		{Queries: []*prompb.Query{{StartTimestampMs: 0, EndTimestampMs: 3_000_000, Matchers: []*prompb.LabelMatcher{eq("__name__", "cpu")}}}},
		{Queries: []*prompb.Query{
			{StartTimestampMs: 1000, EndTimestampMs: 2_000_000, Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "__name__", Value: "cpu|mem"}},
				Hints: &prompb.ReadHints{StartMs: 1000, EndMs: 2_000_000, StepMs: 15_000, Func: "rate", RangeMs: 60_000}},
			{StartTimestampMs: 0, EndTimestampMs: 10_000, Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_NRE, Name: "host", Value: "("}}},
		}},
		{Queries: []*prompb.Query{{EndTimestampMs: 1 << 62, Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_NEQ, Name: "host", Value: "a"}, {Type: 9, Name: "x"}}}},
			AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}},
		{Queries: []*prompb.Query{{Matchers: []*prompb.LabelMatcher{eq("host", "b")}, EndTimestampMs: 50_000}},
			AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}},
		{AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{7}},
	} {
		b, err := req.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(snappy.Encode(nil, b), true)
	}
	f.Add([]byte{0x0a, 0x00}, false) // a nil query
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, true)
	f.Fuzz(func(t *testing.T, body []byte, raw bool) {
		h, err := NewReadHandler(testStore(), &ReadOptions{MaxBodyBytes: fuzzReadLimit})
		if err != nil {
			t.Fatal(err)
		}
		sent := body
		if !raw {
			sent = snappy.Encode(nil, body)
		}
		rec := postRead(t, h, sent)
		valid, streamed, queries := validRead(body, raw)
		switch rec.Code {
		case http.StatusOK:
			if !valid {
				t.Fatalf("200 for an invalid request")
			}
			if streamed {
				readFrames(t, rec.Body.Bytes())
				return
			}
			data, err := snappy.Decode(nil, rec.Body.Bytes())
			if err != nil {
				t.Fatalf("SAMPLES answer not snappy: %v", err)
			}
			var resp prompb.ReadResponse
			if err := resp.Unmarshal(data); err != nil {
				t.Fatalf("SAMPLES answer not a ReadResponse: %v", err)
			}
			if len(resp.Results) != queries {
				t.Fatalf("%d results for %d queries", len(resp.Results), queries)
			}
		case http.StatusBadRequest:
			if valid {
				t.Fatalf("400 for a valid request: %s", rec.Body)
			}
		case http.StatusRequestEntityTooLarge:
			if !raw {
				t.Fatalf("413 for a body under the limit: %s", rec.Body)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

const fuzzReadLimit = 1 << 20

// validRead decodes a fuzzed body independently of the handler and says whether it must be
// served, streamed or not, and its number of queries.
func validRead(body []byte, raw bool) (valid, streamed bool, queries int) {
	if raw {
		// Decode allocates the length the block claims (up to 4 GiB): check it first.
		if n, err := snappy.DecodedLen(body); err != nil || n > fuzzReadLimit {
			return false, false, 0
		}
		var err error
		if body, err = snappy.Decode(nil, body); err != nil {
			return false, false, 0
		}
	}
	var req prompb.ReadRequest
	if req.Unmarshal(body) != nil {
		return false, false, 0
	}
	for _, q := range req.Queries {
		if q == nil {
			return false, false, 0
		}
		for _, m := range q.Matchers {
			if m == nil || m.Type < prompb.LabelMatcher_EQ || m.Type > prompb.LabelMatcher_NRE { // an enum on the wire: negative too
				return false, false, 0
			}
			// The four types in prompb's order are labels' MatchEqual ... MatchNotRegexp.
			if _, err := labels.NewMatcher(labels.MatchType(m.Type), m.Name, m.Value); err != nil {
				return false, false, 0
			}
		}
	}
	if len(req.AcceptedResponseTypes) == 0 {
		return true, false, len(req.Queries)
	}
	for _, rt := range req.AcceptedResponseTypes { // the first the server has wins
		switch rt {
		case prompb.ReadRequest_SAMPLES:
			return true, false, len(req.Queries)
		case prompb.ReadRequest_STREAMED_XOR_CHUNKS:
			return true, true, len(req.Queries)
		}
	}
	return false, false, 0
}
