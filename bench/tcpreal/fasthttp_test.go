package tcpreal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/bench/internal/engines"
)

// timeout bounds every wait of these tests: only a hang meets it.
const timeout = 20 * time.Second

// maxBig is the largest body /big answers with.
const maxBig = 1 << 20

// big holds the bodies /big answers with and the bodies clients post: a
// pattern a reader checks against big itself.
var big = func() []byte {
	b := make([]byte, maxBig)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	return b
}()

// server is a fasthttp server on a ringpoll listener. /echo answers a
// posted body's length and sha256, /big?n=N the first N bytes of big,
// /slow waits for the test's go-ahead, anything else "hello".
type server struct {
	srv    *fasthttp.Server
	addr   string
	served chan error    // what Serve returned
	slowIn chan struct{} // a /slow request is in its handler
	slowGo chan struct{} // closed: /slow answers
	logged atomic.Int64  // lines fasthttp logged (hostile peers make some)
}

// Printf counts what fasthttp logs; a test's t.Logf cannot outlive it.
func (s *server) Printf(string, ...any) { s.logged.Add(1) }

func (s *server) handle(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/echo":
		body := ctx.PostBody()
		fmt.Fprintf(ctx, "%d %x", len(body), sha256.Sum256(body))
	case "/big":
		ctx.SetBody(big[:min(ctx.QueryArgs().GetUintOrZero("n"), maxBig)])
	case "/slow":
		s.slowIn <- struct{}{}
		<-s.slowGo
		ctx.WriteString("slow")
	default:
		ctx.WriteString("hello")
	}
}

// serve starts a fasthttp server on a ringpoll listener of engine e, with
// readTimeout (fasthttp's ReadTimeout, also its idle timeout).
func serve(t *testing.T, e ringpoll.Engine, readTimeout time.Duration) *server {
	t.Helper()
	ln, err := ringpoll.Listen("tcp4", "127.0.0.1:0", ringpoll.WithEngine(e))
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: ln.Addr().String(), served: make(chan error, 1), slowIn: make(chan struct{}), slowGo: make(chan struct{})}
	s.srv = &fasthttp.Server{
		Handler:      s.handle,
		ReadTimeout:  readTimeout,
		WriteTimeout: timeout,
		Logger:       s,
		TCPKeepalive: true, // through Conn.SetKeepAlive, as for a *net.TCPConn
	}
	go func() { s.served <- s.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		s.srv.ShutdownWithContext(ctx)
		ln.Close()
	})
	return s
}

// doer is what fasthttp's Client and PipelineClient have in common.
type doer interface {
	Do(req *fasthttp.Request, resp *fasthttp.Response) error
}

// exchange makes one request of a kind drawn from rng and checks its
// answer: an echo of a posted body, a /big body, or hello.
func exchange(c doer, addr string, rng *rand.Rand) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	var want []byte
	switch rng.IntN(3) {
	case 0:
		n := rng.IntN(256 << 10)
		off := rng.IntN(maxBig - n)
		body := big[off : off+n]
		req.SetRequestURI("http://" + addr + "/echo")
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetBody(body)
		want = fmt.Appendf(nil, "%d %x", n, sha256.Sum256(body))
	case 1:
		n := rng.IntN(maxBig + 1)
		req.SetRequestURI(fmt.Sprintf("http://%s/big?n=%d", addr, n))
		want = big[:n]
	default:
		req.SetRequestURI("http://" + addr + "/hello")
		want = []byte("hello")
	}
	if err := c.Do(req, resp); err != nil {
		return fmt.Errorf("%s: %w", req.URI(), err)
	}
	if resp.StatusCode() != fasthttp.StatusOK || !bytes.Equal(resp.Body(), want) {
		return fmt.Errorf("%s: status %d, %d bytes of body, want 200 and the %d expected", req.URI(), resp.StatusCode(), len(resp.Body()), len(want))
	}
	return nil
}

// load runs workers goroutines of n exchanges each through c, and
// returns the first error.
func load(c doer, addr string, workers, n int, seed uint64) error {
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for range n {
				if err := exchange(c, addr, rng); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// rawPeer dials addr with package net, every call bounded by timeout.
func rawPeer(addr string) (*net.TCPConn, error) {
	c, err := net.DialTimeout("tcp4", addr, timeout)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	return c.(*net.TCPConn), nil
}

// readToEnd reads c until the server ends the connection, which it must
// do within timeout; a reset counts as an end (the server may close with
// bytes of ours unread).
func readToEnd(c net.Conn) ([]byte, error) {
	got, err := io.ReadAll(c)
	if errors.Is(err, syscall.ECONNRESET) {
		err = nil
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return got, errors.New("the server kept the connection open for 20 s")
	}
	return got, err
}

// hostile are peers no well-behaved client is: each, given a fresh
// connection to the server, returns what it saw wrong.
var hostile = []struct {
	name string
	run  func(c *net.TCPConn) error // on a fresh connection, closed after
}{
	{"garbage request", func(c *net.TCPConn) error {
		c.Write([]byte("\x16\x03\x01 this is not http\r\n\r\n"))
		got, err := readToEnd(c)
		if err == nil && !bytes.HasPrefix(got, []byte("HTTP/1.1 400")) {
			err = fmt.Errorf("answered %.40q, want a 400 and the end", got)
		}
		return err
	}},
	{"headers past the read buffer", func(c *net.TCPConn) error {
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n"))
		got, err := readToEnd(c)
		if err == nil && len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 431")) {
			err = fmt.Errorf("answered %.40q, want a 431 (or a reset) and the end", got)
		}
		return err
	}},
	{"reset in the middle of a body", func(c *net.TCPConn) error {
		c.Write([]byte("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n"))
		c.Write(big[:10<<10])
		c.SetLinger(0)
		return c.Close()
	}},
	{"request, then half-close", func(c *net.TCPConn) error {
		c.Write([]byte("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"))
		c.CloseWrite()
		got, err := readToEnd(c)
		if err == nil && (!bytes.HasPrefix(got, []byte("HTTP/1.1 200")) || !bytes.HasSuffix(got, []byte("\r\n\r\nhello"))) {
			err = fmt.Errorf("answered %q, want 200, hello and the end", got)
		}
		return err
	}},
	{"pipelined requests never read", func(c *net.TCPConn) error {
		for range 16 {
			if _, err := fmt.Fprintf(c, "GET /big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", maxBig); err != nil {
				break // the server may already be answering into a closed socket
			}
		}
		return c.Close()
	}},
}

// TestFastHTTP serves fasthttp on a ringpoll listener, every engine:
// fasthttp's Client (over std sockets and over ringpoll's Dial) and its
// PipelineClient make checked requests while the hostile peers come and
// go; a peer that stalls in its headers is cut off by fasthttp's
// ReadTimeout; then Shutdown with a request in its handler, which must be
// answered, and Serve must return nil, as it does on net's listener.
func TestFastHTTP(t *testing.T) {
	engines.ForEach(t, func(t *testing.T, e ringpoll.Engine) {
		s := serve(t, e, timeout)
		stdClient := &fasthttp.Client{MaxConnsPerHost: 8, ReadTimeout: timeout, WriteTimeout: timeout}
		ringClient := &fasthttp.Client{MaxConnsPerHost: 8, ReadTimeout: timeout, WriteTimeout: timeout,
			Dial: func(addr string) (net.Conn, error) { return ringpoll.Dial("tcp4", addr, ringpoll.WithEngine(e)) }}
		pipe := &fasthttp.PipelineClient{Addr: s.addr, MaxConns: 2, MaxPendingRequests: 64, ReadTimeout: timeout, WriteTimeout: timeout}

		var wg sync.WaitGroup
		var mu sync.Mutex
		fail := func(what string, err error) {
			if err != nil {
				mu.Lock()
				t.Errorf("%s: %v", what, err)
				mu.Unlock()
			}
		}
		run := func(what string, f func() error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fail(what, f())
			}()
		}
		run("fasthttp.Client", func() error { return load(stdClient, s.addr, 8, 25, 1) })
		run("fasthttp.Client over ringpoll.Dial", func() error { return load(ringClient, s.addr, 8, 25, 2) })
		run("fasthttp.PipelineClient", func() error { return load(pipe, s.addr, 16, 12, 3) })
		for _, h := range hostile {
			run(h.name, func() error {
				for range 4 {
					c, err := rawPeer(s.addr)
					if err != nil {
						return err
					}
					err = h.run(c)
					c.Close()
					if err != nil {
						return err
					}
				}
				return nil
			})
		}
		// A peer that stalls in its headers, on a server whose
		// ReadTimeout is short.
		slow := serve(t, e, 200*time.Millisecond)
		run("a peer stalled in its headers", func() error {
			c, err := rawPeer(slow.addr)
			if err != nil {
				return err
			}
			defer c.Close()
			c.Write([]byte("GET /hello HTTP/1.1\r\nHost: x\r\n"))
			_, err = readToEnd(c)
			return err
		})
		wg.Wait()
		if t.Failed() {
			return
		}
		// The server still serves.
		fail("after the hostile peers", load(stdClient, s.addr, 1, 3, 4))

		// Shutdown with a request in its handler.
		slowDone := make(chan error, 1)
		go func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.SetRequestURI("http://" + s.addr + "/slow")
			err := stdClient.Do(req, resp)
			if err == nil && string(resp.Body()) != "slow" {
				err = fmt.Errorf("answered %q, want slow", resp.Body())
			}
			slowDone <- err
		}()
		wait(t, s.slowIn, "the /slow request to reach its handler")
		shutdown := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			shutdown <- s.srv.ShutdownWithContext(ctx)
		}()
		if err := recv(t, s.served, "Serve to return after Shutdown"); err != nil {
			t.Errorf("Serve returned %v after Shutdown, want nil (fasthttp's answer to net's closed-listener error)", err)
		}
		close(s.slowGo)
		fail("the request in its handler at Shutdown", recv(t, slowDone, "the /slow answer"))
		fail("Shutdown", recv(t, shutdown, "Shutdown to return"))
		if c, err := net.DialTimeout("tcp4", s.addr, timeout); err == nil {
			c.Close()
			t.Errorf("a dial after Shutdown returned connected; want it refused")
		}
		t.Logf("fasthttp logged %d lines (the hostile peers)", s.logged.Load())
	})
}

// wait waits for a value from ch, for at most timeout.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(timeout):
		t.Fatalf("waited %v for %s", timeout, what)
	}
}

// recv returns the error ch delivers, waiting at most timeout.
func recv(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(timeout):
		t.Fatalf("waited %v for %s", timeout, what)
		return nil
	}
}
