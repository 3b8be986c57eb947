package meter

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// echo answers each request with its body, doubled.
func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Write(append(b, b...))
}

func TestMeterCountsAtTheTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(echo))
	t.Cleanup(srv.Close)
	var m Meter

	// A body of known length, read in full.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("hello"))
	resp, err := m.Send(srv.Client(), req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "hellohello" {
		t.Fatalf("answer %q", got)
	}
	if c := m.Counts(); c != (Counts{Requests: 1, BytesSent: 5, BytesReceived: 10}) {
		t.Errorf("after one request: %+v", c)
	}

	// A body of unknown length is read to count it, and still sent whole.
	before := m.Counts()
	req, _ = http.NewRequest(http.MethodPut, srv.URL, io.NopCloser(strings.NewReader("abc")))
	req.ContentLength = -1
	resp, err = m.Send(srv.Client(), req)
	if err != nil {
		t.Fatal(err)
	}
	// Only what the caller reads counts.
	part := make([]byte, 4)
	n, _ := io.ReadFull(resp.Body, part)
	resp.Body.Close()
	if n != 4 || string(part) != "abca" {
		t.Fatalf("read %q", part[:n])
	}
	if c := m.Counts().Sub(before); c != (Counts{Requests: 1, BytesSent: 3, BytesReceived: 4}) {
		t.Errorf("unknown length, partial read: %+v", c)
	}

	// No body: a request, no bytes sent.
	req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err = m.Send(srv.Client(), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := m.Counts(); c.Requests != 3 || c.BytesSent != 8 {
		t.Errorf("after a GET: %+v", c)
	}

	m.Reset()
	if c := m.Counts(); c != (Counts{}) {
		t.Errorf("after Reset: %+v", c)
	}
}

func TestReadBodyReplays(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://example.invalid", bytes.NewReader([]byte("payload")))
	b, err := ReadBody(req)
	if err != nil || string(b) != "payload" {
		t.Fatalf("%q, %v", b, err)
	}
	for range 2 {
		again, _ := io.ReadAll(req.Body)
		if string(again) != "payload" {
			t.Errorf("body after ReadBody: %q", again)
		}
		req.Body, _ = req.GetBody()
	}
	none, _ := http.NewRequest(http.MethodGet, "http://example.invalid", nil)
	if b, err := ReadBody(none); b != nil || err != nil {
		t.Errorf("no body: %q, %v", b, err)
	}
}
