package server_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and a client certificate, all signed
// by the CA, written as PEM files in a temporary directory.
type testPKI struct {
	dir                           string
	caFile, serverCert, serverKey string
	clientCert, clientKey         string
	pool                          *x509.CertPool
	client                        tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tablets test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", caDER)

	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (certFile, keyFile string, pair tls.Certificate) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certFile = p.write(t, name+".pem", "CERTIFICATE", der)
		keyFile = p.write(t, name+"-key.pem", "EC PRIVATE KEY", keyDER)
		pair, err = tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return certFile, keyFile, pair
	}
	p.serverCert, p.serverKey, _ = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey, p.client = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// webConfig is a Prometheus web config: TLS with p's server certificate (requiring a client
// certificate if mTLS), and users, name to password, stored as bcrypt hashes.
func (p *testPKI) webConfig(t *testing.T, mTLS bool, users map[string]string) string {
	t.Helper()
	var b strings.Builder
	if p != nil {
		fmt.Fprintf(&b, "tls_server_config:\n  cert_file: %q\n  key_file: %q\n", p.serverCert, p.serverKey)
		if mTLS {
			fmt.Fprintf(&b, "  client_ca_file: %q\n  client_auth_type: RequireAndVerifyClientCert\n", p.caFile)
		}
	}
	if len(users) > 0 {
		b.WriteString("basic_auth_users:\n")
		for u, pw := range users {
			h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "  %s: %q\n", u, h)
		}
	}
	return b.String()
}

// writeAtomic replaces path's content as an editor or a config manager would.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// served is a [server.Serve] running in the test, on 127.0.0.1.
type served struct {
	public, internal string // host:port
	stop             func() error
}

// serve runs server.Serve with h and opts on fresh listeners (and an internal one if
// withInternal) until the test ends.
func serve(t *testing.T, h http.Handler, withInternal bool, opts *server.ServeOptions) *served {
	t.Helper()
	pub, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &served{public: pub.Addr().String()}
	if opts == nil {
		opts = &server.ServeOptions{}
	}
	if withInternal {
		in, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		opts.Internal = in
		s.internal = in.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, pub, h, opts) }()
	var stopped bool
	var stopErr error
	s.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			stopErr = <-done
		}
		return stopErr
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

// hello answers every path with its name: what the tests' listeners serve.
var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.WriteString(w, "hello from "+r.URL.Path)
})

func get(t *testing.T, c *http.Client, url, user, password string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func tlsClient(p *testPKI, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: p.pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
}

// TLS with basic auth: the right password passes, a wrong one or none is 401, plain HTTP
// on the TLS port is not served, and a changed password takes effect without a restart.
func TestServeTLSBasicAuth(t *testing.T) {
	p := newTestPKI(t)
	cfgFile := filepath.Join(p.dir, "web.yml")
	writeAtomic(t, cfgFile, p.webConfig(t, false, map[string]string{"alice": "first"}))
	s := serve(t, hello, false, &server.ServeOptions{WebConfigFile: cfgFile})
	c := tlsClient(p, nil)
	url := "https://" + s.public + "/api/v1/query"

	code, body, err := get(t, c, url, "alice", "first")
	if err != nil || code != http.StatusOK || body != "hello from /api/v1/query" {
		t.Fatalf("right password: %d %q %v", code, body, err)
	}
	for _, cred := range [][2]string{{"alice", "wrong"}, {"bob", "first"}, {"", ""}} {
		if code, _, err := get(t, c, url, cred[0], cred[1]); err != nil || code != http.StatusUnauthorized {
			t.Errorf("user %q password %q: %d %v, want 401", cred[0], cred[1], code, err)
		}
	}
	// Plain HTTP to the TLS port: Go's TLS server answers 400 to an HTTP request, never
	// the handler's answer.
	if code, body, err := get(t, &http.Client{Timeout: 30 * time.Second}, "http://"+s.public+"/api/v1/query", "alice", "first"); err == nil && (code == http.StatusOK || strings.Contains(body, "hello")) {
		t.Errorf("plain HTTP on the TLS listener served: %d %q", code, body)
	}
	// A client that does not trust the CA is refused.
	if _, _, err := get(t, &http.Client{Timeout: 30 * time.Second}, url, "alice", "first"); err == nil {
		t.Error("a client without the CA connected")
	}

	// Reload: the file is read again on each request.
	writeAtomic(t, cfgFile, p.webConfig(t, false, map[string]string{"alice": "second"}))
	if code, _, err := get(t, c, url, "alice", "first"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("old password after the change: %d %v, want 401", code, err)
	}
	if code, _, err := get(t, c, url, "alice", "second"); err != nil || code != http.StatusOK {
		t.Errorf("new password after the change: %d %v, want 200", code, err)
	}
}

// Mutual TLS: without a client certificate the connection is refused; with one the CA
// signed, the request is served.
func TestServeMutualTLS(t *testing.T) {
	p := newTestPKI(t)
	cfgFile := filepath.Join(p.dir, "web.yml")
	writeAtomic(t, cfgFile, p.webConfig(t, true, nil))
	s := serve(t, hello, false, &server.ServeOptions{WebConfigFile: cfgFile})
	url := "https://" + s.public + "/api/v1/write"
	if code, body, err := get(t, tlsClient(p, nil), url, "", ""); err == nil {
		t.Errorf("no client certificate: served %d %q", code, body)
	}
	// A client certificate another CA signed is refused.
	stranger := newTestPKI(t)
	if code, body, err := get(t, tlsClient(p, &stranger.client), url, "", ""); err == nil {
		t.Errorf("a client certificate of another CA: served %d %q", code, body)
	}
	code, body, err := get(t, tlsClient(p, &p.client), url, "", "")
	if err != nil || code != http.StatusOK || body != "hello from /api/v1/write" {
		t.Fatalf("client certificate: %d %q %v", code, body, err)
	}
}

// The internal listener serves /metrics and the probes without authentication; the public
// listener (behind basic auth) no longer serves them, even with the right password, and the
// internal one serves nothing else.
func TestServeInternalListener(t *testing.T) {
	p := newTestPKI(t)
	cfgFile := filepath.Join(p.dir, "web.yml")
	writeAtomic(t, cfgFile, p.webConfig(t, false, map[string]string{"alice": "pw"}))
	s := serve(t, hello, true, &server.ServeOptions{WebConfigFile: cfgFile})
	plain := &http.Client{Timeout: 30 * time.Second}
	c := tlsClient(p, nil)
	for _, path := range server.InternalPaths {
		code, body, err := get(t, plain, "http://"+s.internal+path, "", "")
		if err != nil || code != http.StatusOK || body != "hello from "+path {
			t.Errorf("internal %s: %d %q %v", path, code, body, err)
		}
		if code, _, err := get(t, c, "https://"+s.public+path, "", ""); err != nil || code != http.StatusUnauthorized {
			t.Errorf("public %s without credentials: %d %v, want 401", path, code, err)
		}
		if code, body, err := get(t, c, "https://"+s.public+path, "alice", "pw"); err != nil || code != http.StatusNotFound {
			t.Errorf("public %s: %d %q %v, want 404", path, code, body, err)
		}
	}
	if code, _, err := get(t, plain, "http://"+s.internal+"/api/v1/query", "", ""); err != nil || code != http.StatusNotFound {
		t.Errorf("internal /api/v1/query: %d %v, want 404", code, err)
	}
	if code, _, err := get(t, c, "https://"+s.public+"/api/v1/query", "alice", "pw"); err != nil || code != http.StatusOK {
		t.Errorf("public /api/v1/query: %d %v, want 200", code, err)
	}
	// Go's profiles: on the internal listener only (the public one passes the path to the
	// handler, which knows nothing of it).
	if code, body, err := get(t, plain, "http://"+s.internal+"/debug/pprof/heap?debug=1", "", ""); err != nil || code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Errorf("internal /debug/pprof/heap: %d %v (%d bytes)", code, err, len(body))
	}
	if code, body, err := get(t, c, "https://"+s.public+"/debug/pprof/heap?debug=1", "alice", "pw"); err != nil || strings.Contains(body, "heap profile") {
		t.Errorf("public /debug/pprof/heap: %d %v: a profile", code, err)
	}
}

// Without a web config the server is plain HTTP, as before, and serves every path.
func TestServePlain(t *testing.T) {
	s := serve(t, hello, false, nil)
	for _, path := range []string{"/metrics", "/api/v1/write"} {
		code, body, err := get(t, &http.Client{Timeout: 30 * time.Second}, "http://"+s.public+path, "", "")
		if err != nil || code != http.StatusOK || body != "hello from "+path {
			t.Errorf("%s: %d %q %v", path, code, body, err)
		}
	}
	if err := s.stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", s.public, 5*time.Second); err == nil {
		t.Error("the listener still accepts after the shutdown")
	}
}

// A slow-loris client, trickling its headers a byte at a time, is disconnected once the
// header timeout has passed since its request began, however steadily it trickles.
func TestServeSlowLoris(t *testing.T) {
	const headerTimeout = 300 * time.Millisecond
	s := serve(t, hello, false, &server.ServeOptions{ReadHeaderTimeout: headerTimeout})
	// Before the dial: the server's timeout may start as it accepts, before Dial returns
	// (fresh-clone CI saw a disconnection 297 ms after a clock started after the dial).
	began := time.Now()
	conn, err := net.Dial("tcp", s.public)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /api/v1/query HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	// The client trickles a header a byte every 10 ms for up to 30 s; the server must cut
	// it long before.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes the connection
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(30 * time.Second)
	for {
		select {
		case <-closed:
			if held := time.Since(began); held < headerTimeout {
				t.Errorf("disconnected after %v, before the header timeout %v", held, headerTimeout)
			}
			return
		case <-giveUp:
			t.Fatal("a client trickling its headers was still connected after 30 s")
		case <-tick.C:
			if _, err := io.WriteString(conn, "a"); err != nil {
				<-closed
				return
			}
		}
	}
}

// A client that sent its headers but stalls mid-body is disconnected after the read
// timeout; the handler sees the body's read fail.
func TestServeStalledBody(t *testing.T) {
	bodyErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		bodyErr <- err
	})
	s := serve(t, h, false, &server.ServeOptions{ReadTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", s.public)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /api/v1/write HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nsome"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-bodyErr:
		if err == nil {
			t.Error("the handler read a whole body the client never sent")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a stalled body was still being read after 30 s")
	}
}

// Headers past MaxHeaderBytes are refused with 431 before the handler runs.
func TestServeMaxHeaderBytes(t *testing.T) {
	s := serve(t, hello, false, &server.ServeOptions{MaxHeaderBytes: 1 << 10})
	conn, err := net.Dial("tcp", s.public)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// net/http allows 4096 bytes over the cap; send well past it.
	req := "GET /api/v1/query HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
}

// A web config that does not load, or a negative option, is an error wrapping
// tablets.ErrInvalidOptions, and nothing is served.
func TestServeBadOptions(t *testing.T) {
	dir := t.TempDir()
	badUsers := filepath.Join(dir, "users.yml")
	writeAtomic(t, badUsers, "basic_auth_users:\n  alice: not-a-bcrypt-hash\n")
	missingCert := filepath.Join(dir, "cert.yml")
	writeAtomic(t, missingCert, "tls_server_config:\n  cert_file: /nonexistent/cert.pem\n  key_file: /nonexistent/key.pem\n")
	unknownKey := filepath.Join(dir, "unknown.yml")
	writeAtomic(t, unknownKey, "tls_server_config:\n  certfile: x\n")
	for name, opts := range map[string]*server.ServeOptions{
		"no such file":          {WebConfigFile: filepath.Join(dir, "none.yml")},
		"a password not hashed": {WebConfigFile: badUsers},
		"a missing cert":        {WebConfigFile: missingCert},
		"an unknown key":        {WebConfigFile: unknownKey},
		"negative":              {ReadHeaderTimeout: -1},
	} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		err = server.Serve(context.Background(), l, hello, opts)
		if !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("%s: %v, want tablets.ErrInvalidOptions", name, err)
		}
		if _, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second); err == nil {
			t.Errorf("%s: the listener still accepts", name)
		}
	}
}

// A renewed certificate (here: one of another CA) is served to the next connection, without
// a restart.
func TestServeCertificateRenewal(t *testing.T) {
	old, renewed := newTestPKI(t), newTestPKI(t)
	cfgFile := filepath.Join(t.TempDir(), "web.yml")
	writeAtomic(t, cfgFile, old.webConfig(t, false, nil))
	s := serve(t, hello, false, &server.ServeOptions{WebConfigFile: cfgFile})
	url := "https://" + s.public + "/"
	if code, _, err := get(t, tlsClient(old, nil), url, "", ""); err != nil || code != http.StatusOK {
		t.Fatalf("old certificate: %d %v", code, err)
	}
	writeAtomic(t, cfgFile, renewed.webConfig(t, false, nil))
	if _, _, err := get(t, tlsClient(old, nil), url, "", ""); err == nil {
		t.Error("after the renewal, a client trusting only the old CA connected")
	}
	if code, _, err := get(t, tlsClient(renewed, nil), url, "", ""); err != nil || code != http.StatusOK {
		t.Errorf("renewed certificate: %d %v", code, err)
	}
}
