package connmeter

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// An HTTP server on a counted listener and a client through a counted dialer: each side
// counts its connection while it is open, once however often it is closed.
func TestConnsCountHTTP(t *testing.T) {
	var accepted, dialed Conns
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(accepted.Listener(l))
	defer srv.Close()

	tr := &http.Transport{DialContext: dialed.Dial((&net.Dialer{}).DialContext)}
	client := &http.Client{Transport: tr}
	for range 3 { // one connection, kept alive and reused
		resp, err := client.Get("http://" + l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if dialed.Open() != 1 || dialed.Opened() != 1 || accepted.Opened() != 1 {
		t.Fatalf("after 3 requests: dialed %d open of %d, accepted %d", dialed.Open(), dialed.Opened(), accepted.Opened())
	}
	tr.CloseIdleConnections()
	if dialed.Open() != 0 || dialed.Opened() != 1 {
		t.Errorf("the idle connection closed: dialed %d open of %d", dialed.Open(), dialed.Opened())
	}
	srv.Close()
	if accepted.Open() != 0 {
		t.Errorf("the server closed: accepted %d open", accepted.Open())
	}
}

func TestConnsCloseTwice(t *testing.T) {
	var c Conns
	a, b := net.Pipe()
	defer b.Close()
	dial := c.Dial(func(context.Context, string, string) (net.Conn, error) { return a, nil })
	conn, err := dial(t.Context(), "tcp", "x")
	if err != nil {
		t.Fatal(err)
	}
	if c.Open() != 1 {
		t.Fatalf("open %d", c.Open())
	}
	conn.Close()
	conn.Close()
	if c.Open() != 0 || c.Opened() != 1 {
		t.Errorf("closed twice: open %d, opened %d", c.Open(), c.Opened())
	}
	// A failed dial counts nothing.
	failing := c.Dial(func(context.Context, string, string) (net.Conn, error) { return nil, io.ErrUnexpectedEOF })
	if _, err := failing(t.Context(), "tcp", "x"); err == nil || c.Opened() != 1 {
		t.Errorf("a failed dial: %v, opened %d", err, c.Opened())
	}
}
