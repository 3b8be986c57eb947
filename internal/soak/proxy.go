package soak

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy in front of a storage account that can cut it off as a real outage
// does: while cut, it refuses new connections (its port is closed) and has closed the open
// ones; restored, it accepts again on the same port.
type Proxy struct {
	target string

	mu       sync.Mutex
	addr     string
	listener net.Listener // nil while cut
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// NewProxy listens on a free port of 127.0.0.1 and forwards every connection to target
// (host:port).
func NewProxy(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &Proxy{target: target, addr: l.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(l)
	return p, nil
}

// Addr is the proxy's address, host:port; it stays the same across outages.
func (p *Proxy) Addr() string { return p.addr }

// Cut starts an outage: the port stops accepting, and the connections open through the
// proxy are closed. It is a no-op while already cut.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener == nil {
		return
	}
	p.listener.Close()
	p.listener = nil
	for c := range p.conns {
		c.Close()
	}
}

// Restore ends an outage: the proxy listens again on its port. A restore can fail only if
// another process took the port meanwhile; it tries for a few seconds.
func (p *Proxy) Restore() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener != nil || p.closed {
		return nil
	}
	var err error
	for range 50 {
		var l net.Listener
		if l, err = net.Listen("tcp", p.addr); err == nil {
			p.serve(l)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("proxy: listen again on %s: %w", p.addr, err)
}

// Close ends the proxy and its connections, and waits for its goroutines.
func (p *Proxy) Close() {
	p.Cut()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
}

// serve accepts on l until l is closed; p.mu is held.
func (p *Proxy) serve(l net.Listener) {
	p.listener = l
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // a transient accept error (too many files): try again
			}
			if !p.track(l, c) {
				c.Close()
				continue
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(c)
			}()
		}
	}()
}

// track records c as open, unless the proxy was cut since l accepted it.
func (p *Proxy) track(l net.Listener, c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener != l {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// forward copies both ways between c and a new connection to the target; either side
// ending (or Cut closing c) ends both.
func (p *Proxy) forward(c net.Conn) {
	defer p.untrack(c)
	up, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}
