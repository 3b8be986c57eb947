// Package connmeter counts a process's network connections: those its HTTP client dialed
// to the storage account and those its listeners accepted, open now and opened in all.
//
// Each connection holds goroutines for as long as it stays open: two for a connection of
// Go's HTTP client (its read and write loops), one for a connection a Go HTTP server
// accepted. Their number follows the requests in flight over the last idle timeout, not
// the process's age: the soak's goroutine target (docs/soak.md) looks for goroutines that
// stay, so it sets these aside, and an operator reads from the gauges whether the account's
// connections are reused (opened grows slowly) or churned.
package connmeter

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
)

// Conns counts connections: those open now and those opened since it was made. The zero
// value is ready; safe for concurrent use.
type Conns struct {
	open, opened atomic.Int64
}

// Open is how many of the counted connections are open.
func (c *Conns) Open() int64 { return c.open.Load() }

// Opened is how many connections were counted in all.
func (c *Conns) Opened() int64 { return c.opened.Load() }

// DialFunc dials a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dial returns dial, counting the connections it makes until they are closed.
func (c *Conns) Dial(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return c.track(conn), nil
	}
}

// Listener returns l, counting the connections it accepts until they are closed.
func (c *Conns) Listener(l net.Listener) net.Listener { return &listener{Listener: l, c: c} }

func (c *Conns) track(conn net.Conn) net.Conn {
	c.open.Add(1)
	c.opened.Add(1)
	return &counted{Conn: conn, c: c}
}

type listener struct {
	net.Listener
	c *Conns
}

func (l *listener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.c.track(conn), nil
}

// counted is a connection that leaves the count when first closed (a connection may be
// closed more than once: by its reader's error, then by its owner).
type counted struct {
	net.Conn
	c    *Conns
	once sync.Once
}

func (x *counted) Close() error {
	x.once.Do(func() { x.c.open.Add(-1) })
	return x.Conn.Close()
}

// CloseWrite shuts the writing side down where the connection can (a TCP connection): Go's
// HTTP server does so before closing a connection it ends, so that the client reads the
// whole answer.
func (x *counted) CloseWrite() error {
	if cw, ok := x.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
