//go:build linux

package ringpoll

// Conformance: ringpoll's Conn, Listener and Dialer driven by the users the
// package documentation promises to serve unmodified: nettest.TestConn (the
// net.Conn contract), crypto/tls, net/http, and net's dial errors.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/nettest"
	"golang.org/x/sys/unix"
)

// conformanceTimeout bounds every blocking step of these tests (through
// deadlines and contexts), so a hang fails the test with a message instead
// of running into go test's global timeout.
const conformanceTimeout = 20 * time.Second

// ipv6Loopback reports whether [::1] can be bound here, and why not.
var ipv6Loopback = sync.OnceValue(func() error {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return err
	}
	return ln.Close()
})

// addrSource returns a function that yields a fresh loopback address to
// listen on for network: port 0 for TCP, a new socket path for Unix. Unix
// paths live in one short temporary directory per test (sun_path holds 108
// bytes; t.TempDir's names grow with the test name). It skips the test for
// tcp6 if ::1 is unavailable. The returned function is safe to call from any
// goroutine and never fails.
func addrSource(t *testing.T, network string) func() string {
	t.Helper()
	switch network {
	case "tcp4":
		return func() string { return "127.0.0.1:0" }
	case "tcp6":
		if err := ipv6Loopback(); err != nil {
			t.Skipf("IPv6 loopback [::1] unavailable: %v", err)
		}
		return func() string { return "[::1]:0" }
	case "unix":
		dir, err := os.MkdirTemp("", "rpc")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		var n atomic.Int64
		return func() string { return filepath.Join(dir, fmt.Sprintf("s%d", n.Add(1))) }
	}
	t.Fatalf("addrSource: unsupported network %q", network)
	return nil
}

// conformanceNetworks are the networks the conformance tests run over.
var conformanceNetworks = []string{"tcp4", "tcp6", "unix"}

// ringDial dials with ringpoll and returns a net.Conn that is nil on error
// (never a typed nil *Conn).
func ringDial(ctx context.Context, e Engine, network, addr string) (net.Conn, error) {
	d := Dialer{Options: []Option{WithEngine(e)}}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// --- 1. nettest.TestConn ---------------------------------------------------

// pipeVariant is one way of making a connected pair for nettest.TestConn,
// which tests c1 against its peer c2 (deadlines, Close and concurrency are
// exercised on c1), so c1 is always a ringpoll *Conn.
type pipeVariant struct {
	name       string
	ringListen bool // the server side is a ringpoll Listener (else net.Listen)
	ringDial   bool // the client side is ringpoll.Dial (else net.Dial)
	c1Accepted bool // c1 is the accepted end (else the dialed end)
}

var pipeVariants = []pipeVariant{
	{name: "rp-listen+rp-dial/c1=dialed", ringListen: true, ringDial: true},
	{name: "rp-listen+rp-dial/c1=accepted", ringListen: true, ringDial: true, c1Accepted: true},
	{name: "rp-listen+net-dial", ringListen: true, c1Accepted: true},
	{name: "net-listen+rp-dial", ringDial: true},
}

// makePipe returns a nettest.MakePipe for v: it listens on a fresh address,
// accepts in a goroutine while dialing, and returns a stop func that closes
// both ends and the listener.
func makePipe(e Engine, network string, addr func() string, v pipeVariant) nettest.MakePipe {
	return func() (c1, c2 net.Conn, stop func(), err error) {
		var ln net.Listener
		if v.ringListen {
			var rl *Listener
			if rl, err = Listen(network, addr(), WithEngine(e)); err == nil {
				ln = rl
			}
		} else {
			ln, err = net.Listen(network, addr())
		}
		if err != nil {
			return nil, nil, nil, err
		}
		type accepted struct {
			c   net.Conn
			err error
		}
		ach := make(chan accepted, 1)
		go func() {
			c, err := ln.Accept()
			ach <- accepted{c, err}
		}()

		var dc net.Conn
		ctx, cancel := context.WithTimeout(context.Background(), conformanceTimeout)
		defer cancel()
		if v.ringDial {
			dc, err = ringDial(ctx, e, network, ln.Addr().String())
		} else {
			var d net.Dialer
			dc, err = d.DialContext(ctx, network, ln.Addr().String())
		}
		if err != nil {
			ln.Close() // wakes Accept
			if a := <-ach; a.c != nil {
				a.c.Close()
			}
			return nil, nil, nil, fmt.Errorf("dial: %w", err)
		}
		a := <-ach
		if a.err != nil {
			dc.Close()
			ln.Close()
			return nil, nil, nil, fmt.Errorf("accept: %w", a.err)
		}
		ac := a.c
		stop = func() {
			dc.Close()
			ac.Close()
			ln.Close()
		}
		// The ends that should be ringpoll's must be.
		if _, ok := ac.(*Conn); ok != v.ringListen {
			stop()
			return nil, nil, nil, fmt.Errorf("accepted %T, want ringpoll=%v", ac, v.ringListen)
		}
		if _, ok := dc.(*Conn); ok != v.ringDial {
			stop()
			return nil, nil, nil, fmt.Errorf("dialed %T, want ringpoll=%v", dc, v.ringDial)
		}
		if v.c1Accepted {
			return ac, dc, stop, nil
		}
		return dc, ac, stop, nil
	}
}

// TestNettestConn runs x/net/nettest.TestConn (basic I/O, ping-pong, racy
// reads and writes, past/present/future deadlines, close, concurrent
// methods) on ringpoll connections paired with ringpoll and with net peers,
// over tcp4, tcp6 and unix.
func TestNettestConn(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, network := range conformanceNetworks {
			t.Run(network, func(t *testing.T) {
				addr := addrSource(t, network)
				for _, v := range pipeVariants {
					t.Run(v.name, func(t *testing.T) {
						t.Parallel()
						nettest.TestConn(t, makePipe(e, network, addr, v))
					})
				}
			})
		}
	})
}

// --- 2. crypto/tls ---------------------------------------------------------

type testCert struct {
	cert tls.Certificate
	pool *x509.CertPool
}

// selfSignedCert is a self-signed ECDSA P-256 certificate for 127.0.0.1,
// made once per test binary.
var selfSignedCert = sync.OnceValues(func() (*testCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ringpoll conformance test"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &testCert{
		cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		pool: pool,
	}, nil
})

// randomBytes returns n bytes from crypto/rand.
func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	p := make([]byte, n)
	if _, err := crand.Read(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsPeer is one side of the TLS exchange.
type tlsPeer struct {
	name    string
	conn    *tls.Conn
	send    []byte // the bulk payload it sends
	receive []byte // the bulk payload it must receive
}

// tlsExchange drives both sides of a TLS connection: handshake, a few
// request/response lines, 1 MiB each way at once (sha256 checked), then the
// client half-closes (close_notify + FIN through CloseWrite), the server
// reads EOF, answers one last line and closes, and the client reads that
// line and EOF. Errors are reported on t from whichever goroutine sees them.
func tlsExchange(t *testing.T, client, server tlsPeer, version uint16) {
	ctx, cancel := context.WithTimeout(context.Background(), conformanceTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	for _, p := range []tlsPeer{client, server} {
		p.conn.SetDeadline(deadline)
	}

	var wg sync.WaitGroup
	run := func(p tlsPeer, f func(p tlsPeer, br *bufio.Reader) error) {
		wg.Go(func() {
			if err := p.conn.HandshakeContext(ctx); err != nil {
				t.Errorf("%s: handshake: %v", p.name, err)
				p.conn.Close() // unblocks the other side
				return
			}
			st := p.conn.ConnectionState()
			if !st.HandshakeComplete {
				t.Errorf("%s: ConnectionState().HandshakeComplete = false after Handshake", p.name)
			}
			if st.Version != version {
				t.Errorf("%s: negotiated version %#x, want %#x", p.name, st.Version, version)
			}
			if err := f(p, bufio.NewReader(p.conn)); err != nil {
				t.Errorf("%s: %v", p.name, err)
				p.conn.Close()
			}
		})
	}

	const rounds = 4
	// bulk writes p.send while reading len(p.receive) bytes and checks them.
	bulk := func(p tlsPeer, br *bufio.Reader) error {
		werr := make(chan error, 1)
		go func() {
			_, err := p.conn.Write(p.send)
			werr <- err
		}()
		h := sha256.New()
		n, rerr := io.CopyN(h, br, int64(len(p.receive)))
		if err := <-werr; err != nil {
			return fmt.Errorf("bulk write: %w", err)
		}
		if rerr != nil {
			return fmt.Errorf("bulk read after %d bytes: %w", n, rerr)
		}
		if got, want := h.Sum(nil), sha256.Sum256(p.receive); !bytes.Equal(got, want[:]) {
			return fmt.Errorf("bulk payload sha256 %x, want %x", got, want)
		}
		return nil
	}

	run(server, func(p tlsPeer, br *bufio.Reader) error {
		for i := range rounds {
			line, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("read ping %d: %w", i, err)
			}
			if want := fmt.Sprintf("ping %d\n", i); line != want {
				return fmt.Errorf("got %q, want %q", line, want)
			}
			if _, err := fmt.Fprintf(p.conn, "pong %d\n", i); err != nil {
				return fmt.Errorf("write pong %d: %w", i, err)
			}
		}
		if err := bulk(p, br); err != nil {
			return err
		}
		// The client half-closed: EOF, then the server can still write.
		if b, err := br.ReadByte(); err != io.EOF {
			return fmt.Errorf("after the client's CloseWrite: read %q, %v; want io.EOF", b, err)
		}
		if _, err := io.WriteString(p.conn, "bye\n"); err != nil {
			return fmt.Errorf("write after the peer's CloseWrite: %w", err)
		}
		return p.conn.Close()
	})
	run(client, func(p tlsPeer, br *bufio.Reader) error {
		for i := range rounds {
			if _, err := fmt.Fprintf(p.conn, "ping %d\n", i); err != nil {
				return fmt.Errorf("write ping %d: %w", i, err)
			}
			line, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("read pong %d: %w", i, err)
			}
			if want := fmt.Sprintf("pong %d\n", i); line != want {
				return fmt.Errorf("got %q, want %q", line, want)
			}
		}
		if err := bulk(p, br); err != nil {
			return err
		}
		if err := p.conn.CloseWrite(); err != nil {
			return fmt.Errorf("CloseWrite: %w", err)
		}
		rest, err := io.ReadAll(br)
		if err != nil {
			return fmt.Errorf("read to EOF: %w", err)
		}
		if string(rest) != "bye\n" {
			return fmt.Errorf("after CloseWrite read %q, want %q then EOF", rest, "bye\n")
		}
		return p.conn.Close()
	})
	wg.Wait()
}

// TestTLS runs crypto/tls, unmodified, over ringpoll connections in both
// directions: a tls.Server on a ringpoll-accepted conn with a std client,
// and a tls.Client on ringpoll.Dial with a std server; TLS 1.2 and 1.3, over
// tcp4 and unix.
func TestTLS(t *testing.T) {
	tc, err := selfSignedCert()
	if err != nil {
		t.Fatalf("self-signed certificate: %v", err)
	}
	directions := []struct {
		name       string
		ringServer bool // ringpoll Listen + tls.Server; else net.Listen + tls.Server and ringpoll.Dial + tls.Client
	}{
		{"rp-server+net-client", true},
		{"net-server+rp-client", false},
	}
	versions := []struct {
		name    string
		version uint16
	}{
		{"tls1.2", tls.VersionTLS12},
		{"tls1.3", tls.VersionTLS13},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, network := range []string{"tcp4", "unix"} {
			t.Run(network, func(t *testing.T) {
				addr := addrSource(t, network)
				for _, d := range directions {
					for _, v := range versions {
						t.Run(d.name+"/"+v.name, func(t *testing.T) {
							t.Parallel()
							sc, cc := tlsPair(t, e, network, addr(), d.ringServer)
							serverCfg := &tls.Config{
								Certificates: []tls.Certificate{tc.cert},
								MinVersion:   v.version,
								MaxVersion:   v.version,
							}
							clientCfg := &tls.Config{
								RootCAs:    tc.pool,
								ServerName: "127.0.0.1", // verified against the IP SAN
								MinVersion: v.version,
								MaxVersion: v.version,
							}
							up, down := randomBytes(t, 1<<20), randomBytes(t, 1<<20)
							tlsExchange(t,
								tlsPeer{name: "client", conn: tls.Client(cc, clientCfg), send: up, receive: down},
								tlsPeer{name: "server", conn: tls.Server(sc, serverCfg), send: down, receive: up},
								v.version)
						})
					}
				}
			})
		}
	})
}

// tlsPair returns the raw server and client ends of a loopback connection,
// closed at the end of the test.
func tlsPair(t *testing.T, e Engine, network, addr string, ringServer bool) (server, client net.Conn) {
	t.Helper()
	v := pipeVariant{ringListen: ringServer, ringDial: !ringServer, c1Accepted: true}
	server, client, stop, err := makePipe(e, network, func() string { return addr }, v)()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return server, client
}

// --- 3. net/http -----------------------------------------------------------

// httpHarness is an http.Server serving a ringpoll Listener.
type httpHarness struct {
	e        Engine
	network  string
	addr     string // the listener's address, which clients dial
	srv      *http.Server
	newConns atomic.Int64 // connections the server saw (ConnState StateNew)
	foreign  atomic.Int64 // of which were not a ringpoll *Conn
	big      []byte       // the body of GET /big
	barrier  atomic.Pointer[countBarrier]
}

// countBarrier releases everyone once n have arrived.
type countBarrier struct {
	n     int64
	count atomic.Int64
	all   chan struct{}
}

func newCountBarrier(n int) *countBarrier {
	return &countBarrier{n: int64(n), all: make(chan struct{})}
}

func (b *countBarrier) arrive(ctx context.Context) error {
	if b.count.Add(1) == b.n {
		close(b.all)
	}
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("barrier: %d of %d arrived: %w", b.count.Load(), b.n, ctx.Err())
	}
}

func sha256Hex(p []byte) string {
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:])
}

// startHTTP serves an http.Server on a ringpoll Listener for the rest of
// the test; the test's end shuts it down and checks Serve's result.
func startHTTP(t *testing.T, e Engine, network, addr string) *httpHarness {
	t.Helper()
	ln, err := Listen(network, addr, WithEngine(e))
	if err != nil {
		t.Fatal(err)
	}
	h := &httpHarness{e: e, network: network, addr: ln.Addr().String(), big: randomBytes(t, 1<<20)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Query().Get("i"))
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		// Read it all first: an HTTP/1 handler that writes before reading
		// its body to the end loses the rest of it (no full duplex).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Sha256", sha256Hex(body))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(body)
	})
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Sha256", sha256Hex(h.big))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(h.big) // no Content-Length: chunked
	})
	mux.HandleFunc("GET /barrier", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), conformanceTimeout)
		defer cancel()
		if err := h.barrier.Load().arrive(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ok %s", r.URL.Query().Get("i"))
	})
	h.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: conformanceTimeout,
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateNew {
				h.newConns.Add(1)
				if _, ok := c.(*Conn); !ok {
					h.foreign.Add(1)
				}
			}
		},
	}
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), conformanceTimeout)
		defer cancel()
		if err := h.srv.Shutdown(ctx); err != nil {
			t.Errorf("http.Server.Shutdown: %v", err)
		}
		if err := <-served; err != http.ErrServerClosed {
			t.Errorf("http.Server.Serve returned %v, want http.ErrServerClosed", err)
		}
		ln.Close() // Shutdown closed it; this only makes sure
		if n := h.foreign.Load(); n != 0 {
			t.Errorf("the http.Server saw %d connections that were not a ringpoll *Conn", n)
		}
	})
	return h
}

// client returns an http.Client whose Transport dials the harness with
// net.Dialer or, if ring, with ringpoll's Dialer. Its idle connections are
// closed at the end of the test.
func (h *httpHarness) client(t *testing.T, ring bool) *http.Client {
	tr := &http.Transport{ // no Proxy: never leave loopback
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if ring {
				return ringDial(ctx, h.e, h.network, h.addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, h.network, h.addr)
		},
		MaxIdleConnsPerHost: 32,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: conformanceTimeout}
}

// httpURL is the URL of path; the Transport's DialContext ignores the host.
func httpURL(path string) string { return "http://ringpoll.test" + path }

// httpDo sends req and returns the response's body, failing unless the
// status is 200.
func httpDo(c *http.Client, req *http.Request) (*http.Response, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, nil, fmt.Errorf("reading the body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp, body, fmt.Errorf("status %s: %s", resp.Status, body)
	}
	return resp, body, nil
}

// httpKeepAlive sends n requests one after the other over one connection,
// dialed as c's Transport dials, with req.Write and http.ReadResponse: the
// server must answer each on that connection and keep it open, so it sees
// one connection in all. net/http's Transport would not do: whether it
// reuses a connection depends on a timer of its own, so on a loaded machine
// it may dial again.
func httpKeepAlive(t *testing.T, h *httpHarness, c *http.Client) {
	const n = 5
	before := h.newConns.Load()
	conn, err := c.Transport.(*http.Transport).DialContext(t.Context(), h.network, h.addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(conformanceTimeout))
	br := bufio.NewReader(conn)
	for i := range n {
		req, err := http.NewRequestWithContext(t.Context(), "GET", httpURL(fmt.Sprintf("/hello?i=%d", i)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := req.Write(conn); err != nil {
			t.Fatalf("request %d: writing it on the kept-alive connection: %v", i, err)
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("request %d: reading the response on the kept-alive connection: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("request %d: reading the body: %v", i, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %s: %s", i, resp.Status, body)
		}
		if want := fmt.Sprintf("hello %d", i); string(body) != want {
			t.Errorf("request %d: body %q, want %q", i, body, want)
		}
		if resp.Close {
			t.Fatalf("request %d: the server closes the connection after the response (Connection: close), want it kept alive", i)
		}
	}
	if d := h.newConns.Load() - before; d != 1 {
		t.Errorf("%d sequential requests on one connection took %d server connections, want 1", n, d)
	}
}

func httpParallel(t *testing.T, h *httpHarness, c *http.Client) {
	const n = 16
	// Every handler waits until all n requests are in: the server must run
	// them at once, on n connections.
	h.barrier.Store(newCountBarrier(n))
	before := h.newConns.Load()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), "GET", httpURL(fmt.Sprintf("/barrier?i=%d", i)), nil)
			if err != nil {
				t.Error(err)
				return
			}
			_, body, err := httpDo(c, req)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			if want := fmt.Sprintf("ok %d", i); string(body) != want {
				t.Errorf("request %d: body %q, want %q", i, body, want)
			}
		})
	}
	wg.Wait()
	if d := h.newConns.Load() - before; d < n {
		t.Errorf("%d parallel requests took %d server connections, want at least %d", n, d, n)
	}
}

func httpEcho(chunked bool) func(t *testing.T, h *httpHarness, c *http.Client) {
	return func(t *testing.T, h *httpHarness, c *http.Client) {
		payload := randomBytes(t, 1<<20)
		var body io.Reader = bytes.NewReader(payload)
		if chunked {
			body = io.MultiReader(body) // hides the length: Transfer-Encoding chunked
		}
		req, err := http.NewRequestWithContext(t.Context(), "POST", httpURL("/echo"), body)
		if err != nil {
			t.Fatal(err)
		}
		if chunked != (req.ContentLength <= 0) {
			t.Fatalf("request ContentLength %d, chunked=%v", req.ContentLength, chunked)
		}
		resp, got, err := httpDo(c, req)
		if err != nil {
			t.Fatal(err)
		}
		want := sha256Hex(payload)
		if s := resp.Header.Get("X-Sha256"); s != want {
			t.Errorf("the server received a body with sha256 %s, want %s", s, want)
		}
		if len(got) != len(payload) || sha256Hex(got) != want {
			t.Errorf("echoed %d bytes with sha256 %s, want %d bytes with %s", len(got), sha256Hex(got), len(payload), want)
		}
	}
}

func httpBigResponse(t *testing.T, h *httpHarness, c *http.Client) {
	req, err := http.NewRequestWithContext(t.Context(), "GET", httpURL("/big"), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, got, err := httpDo(c, req)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256Hex(h.big)
	if s := resp.Header.Get("X-Sha256"); s != want {
		t.Errorf("X-Sha256 %s, want %s", s, want)
	}
	if len(got) != len(h.big) || sha256Hex(got) != want {
		t.Errorf("received %d bytes with sha256 %s, want %d bytes with %s", len(got), sha256Hex(got), len(h.big), want)
	}
}

// TestHTTPServer runs net/http's Server on a ringpoll Listener, driven by
// the std client dialing with net.Dialer and with ringpoll's Dialer:
// keep-alive, 16 requests served at once, a 1 MiB request body echoed back
// (with Content-Length and chunked), and a 1 MiB response; then Shutdown.
func TestHTTPServer(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, h *httpHarness, c *http.Client)
	}{
		{"keep-alive", httpKeepAlive},
		{"parallel-16", httpParallel},
		{"echo-1MiB", httpEcho(false)},
		{"echo-1MiB-chunked", httpEcho(true)},
		{"response-1MiB", httpBigResponse},
	}
	clients := []struct {
		name string
		ring bool
	}{
		{"net-client", false},
		{"rp-client", true},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, network := range conformanceNetworks {
			t.Run(network, func(t *testing.T) {
				t.Parallel()
				h := startHTTP(t, e, network, addrSource(t, network)())
				for _, cl := range clients {
					for _, tc := range cases {
						t.Run(cl.name+"/"+tc.name, func(t *testing.T) {
							tc.run(t, h, h.client(t, cl.ring))
						})
					}
				}
			})
		}
	})
}

// --- 4. Dialer errors ------------------------------------------------------

// dialFuncs are the ways to dial with ringpoll.
var dialFuncs = []struct {
	name string
	dial func(ctx context.Context, e Engine, network, addr string) (*Conn, error)
}{
	{"Dial", func(_ context.Context, e Engine, network, addr string) (*Conn, error) {
		return Dial(network, addr, WithEngine(e))
	}},
	{"Dialer.Dial", func(_ context.Context, e Engine, network, addr string) (*Conn, error) {
		d := &Dialer{Options: []Option{WithEngine(e)}}
		return d.Dial(network, addr)
	}},
	{"Dialer.DialContext", func(ctx context.Context, e Engine, network, addr string) (*Conn, error) {
		d := &Dialer{Options: []Option{WithEngine(e)}}
		return d.DialContext(ctx, network, addr)
	}},
}

// checkDialError checks that a failed dial returned no connection and a
// *net.OpError for "dial" whose chain holds want.
func checkDialError(t *testing.T, c *Conn, err, want error) {
	t.Helper()
	if err == nil {
		c.Close()
		t.Fatalf("dial succeeded, want an error wrapping %v", want)
	}
	if c != nil {
		t.Errorf("dial returned a non-nil *Conn with error %v", err)
	}
	if !errors.Is(err, want) {
		t.Errorf("dial error %q (%T) does not wrap %v", err, err, want)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Errorf("dial error %q (%T) is not a *net.OpError for dial", err, err)
	}
}

// TestDialContextDone checks that DialContext with a context that is already
// cancelled, or whose deadline passed, fails with an error wrapping
// context.Canceled or context.DeadlineExceeded, though a listener is there.
func TestDialContextDone(t *testing.T) {
	cases := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"deadline-passed", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		}, context.DeadlineExceeded},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, network := range conformanceNetworks {
			t.Run(network, func(t *testing.T) {
				ln, err := Listen(network, addrSource(t, network)(), WithEngine(e))
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				for _, tc := range cases {
					t.Run(tc.name, func(t *testing.T) {
						ctx, cancel := tc.ctx()
						defer cancel()
						d := &Dialer{Options: []Option{WithEngine(e)}}
						c, err := d.DialContext(ctx, network, ln.Addr().String())
						checkDialError(t, c, err, tc.want)
					})
				}
			})
		}
	})
}

// refusingAddr returns the address of a socket that is bound but does not
// listen, so connecting to it is refused (TCP answers RST; Unix fails
// ECONNREFUSED). Unlike a closed listener's port, nobody can take the
// address before the dial. The socket is closed at the end of the test.
func refusingAddr(t *testing.T, network, addr string) string {
	t.Helper()
	var domain int
	var sa unix.Sockaddr
	switch network {
	case "tcp4":
		domain, sa = unix.AF_INET, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	case "tcp6":
		domain, sa = unix.AF_INET6, &unix.SockaddrInet6{Addr: [16]byte{15: 1}}
	case "unix":
		domain, sa = unix.AF_UNIX, &unix.SockaddrUnix{Name: addr}
	default:
		t.Fatalf("refusingAddr: network %q", network)
	}
	s, err := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(os.NewSyscallError("socket", err))
	}
	t.Cleanup(func() { unix.Close(s) })
	if err := unix.Bind(s, sa); err != nil {
		t.Fatal(os.NewSyscallError("bind", err))
	}
	bound, err := unix.Getsockname(s)
	if err != nil {
		t.Fatal(os.NewSyscallError("getsockname", err))
	}
	return sockaddrToAddr(bound, network).String()
}

// TestDialRefused checks that dialing a loopback address where nothing
// listens fails with an error whose chain holds syscall.ECONNREFUSED.
func TestDialRefused(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, network := range conformanceNetworks {
			t.Run(network, func(t *testing.T) {
				addr := refusingAddr(t, network, addrSource(t, network)())
				for _, df := range dialFuncs {
					t.Run(df.name, func(t *testing.T) {
						c, err := df.dial(t.Context(), e, network, addr)
						checkDialError(t, c, err, syscall.ECONNREFUSED)
					})
				}
			})
		}
	})
}

// TestDialUnknownNetwork checks that Dial and Listen reject networks
// ringpoll does not serve with a net.UnknownNetworkError that names the
// network and the supported ones, before touching the network.
func TestDialUnknownNetwork(t *testing.T) {
	networks := []string{"udp", "udp4", "udp6", "ip4:icmp", "unixgram", "unixpacket", "TCP", ""}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, network := range networks {
			t.Run(fmt.Sprintf("%q", network), func(t *testing.T) {
				check := func(what string, err error) {
					t.Helper()
					var une net.UnknownNetworkError
					if !errors.As(err, &une) {
						t.Errorf("%s(%q): error %v (%T), want a net.UnknownNetworkError", what, network, err, err)
						return
					}
					if msg := err.Error(); !strings.Contains(msg, "unknown network "+network) || !strings.Contains(msg, "tcp") ||
						strings.HasPrefix(network, "udp") && !strings.Contains(msg, "ListenPacket") {
						t.Errorf("%s(%q): error %q does not name the network and the supported ones", what, network, msg)
					}
				}
				for _, df := range dialFuncs {
					c, err := df.dial(t.Context(), e, network, "127.0.0.1:9")
					if err == nil {
						c.Close()
						t.Fatalf("%s(%q) succeeded", df.name, network)
					}
					if c != nil {
						t.Errorf("%s(%q) returned a non-nil *Conn with its error", df.name, network)
					}
					var op *net.OpError
					if !errors.As(err, &op) || op.Op != "dial" {
						t.Errorf("%s(%q): error %v (%T) is not a *net.OpError for dial", df.name, network, err, err)
					}
					check(df.name, err)
				}
				ln, err := Listen(network, "127.0.0.1:0", WithEngine(e))
				if err == nil {
					ln.Close()
					t.Fatalf("Listen(%q) succeeded", network)
				}
				check("Listen", err)
			})
		}
	})
}
