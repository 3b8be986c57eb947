package soak

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// echoServer echoes every line it reads, on a free port; it ends with the test.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line through c and reads it back.
func roundTrip(c net.Conn, r *bufio.Reader, line string) (string, error) {
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

func TestProxyCutAndRestore(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	addr := p.Addr()

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "before"); err != nil || got != "before" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.Cut()
	// The open connection is closed: a read ends (EOF or a reset), whatever was sent.
	if got, err := roundTrip(c, r, "during"); err == nil {
		t.Fatalf("an open connection still answered %q after Cut", got)
	}
	// New connections are refused.
	if c2, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c2.Close()
		t.Fatal("a new connection was accepted during the outage")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial during the outage: %v, want connection refused", err)
	}
	p.Cut() // a no-op

	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if p.Addr() != addr {
		t.Fatalf("the address moved from %s to %s", addr, p.Addr())
	}
	c3, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial after Restore: %v", err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, bufio.NewReader(c3), "after"); err != nil || got != "after" {
		t.Fatalf("after Restore: %q, %v", got, err)
	}
	if err := p.Restore(); err != nil { // a no-op
		t.Fatal(err)
	}
}

func TestProxyClose(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(c, bufio.NewReader(c), "x"); err != nil || got != "x" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	p.Close() // returns only once its goroutines have ended
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if c2, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second); err == nil {
		c2.Close()
		t.Fatal("a closed proxy was restored")
	}
}
