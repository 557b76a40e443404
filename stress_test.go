//go:build linux

package ringpoll

// Stress tests (bulk transfers, many connections, peers that reset) and the
// helpers that stress_test.go, backpressure_test.go, close_test.go and
// server_test.go share. Helper names start with ts so that they do not
// collide with the other test files of the package.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tsTimeout bounds every wait in these tests, so that a bug shows up as a
// failure instead of a hung test binary.
const tsTimeout = 20 * time.Second

// tsStyle is one of the ways to program ringpoll that a test server runs
// in.
type tsStyle string

const (
	// tsNetConn: Accept, and a goroutine per *Conn using Read and Write.
	tsNetConn tsStyle = "netconn"
	// tsHandler: a Server running a Handler on the nocopy Reader/Writer.
	tsHandler tsStyle = "handler"
	// tsInline: the same Server, its handler run on the event loop
	// (WithInlineHandler).
	tsInline tsStyle = "inline"
)

var tsStyles = []tsStyle{tsNetConn, tsHandler, tsInline}

// tsBlockingStyles are the styles whose reads and writes wait: tests of
// waiting (backpressure by blocking) run in these; an inline handler must
// never wait, and inline_test.go covers what it does instead.
var tsBlockingStyles = []tsStyle{tsNetConn, tsHandler}

// tsServer is a test server on a ringpoll Listener in one of the styles.
type tsServer struct {
	t        testing.TB
	ln       *Listener
	srv      *Server    // tsHandler, tsInline
	serveErr chan error // tsHandler, tsInline: Serve's result
	acceptWG sync.WaitGroup
	connWG   sync.WaitGroup
	mu       sync.Mutex
	conns    map[*Conn]struct{} // tsNetConn: live connections
	stopOnce sync.Once
}

// tsServeConns runs fn on a goroutine per connection accepted on ln and
// closes the connection when fn returns. It is stopped at the end of the
// test (listener closed, remaining connections closed, goroutines waited).
func tsServeConns(t testing.TB, ln *Listener, fn func(c *Conn)) *tsServer {
	t.Helper()
	s := &tsServer{t: t, ln: ln, conns: map[*Conn]struct{}{}}
	s.acceptWG.Add(1)
	go func() {
		defer s.acceptWG.Done()
		for {
			c, err := ln.AcceptConn()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("Accept: %v", err)
				}
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.connWG.Add(1)
			s.mu.Unlock()
			go func() {
				defer s.connWG.Done()
				fn(c)
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(s.stop)
	return s
}

// tsServeHandler runs a Server with h on ln, shut down at the end of the
// test.
func tsServeHandler(t testing.TB, ln *Listener, h Handler, opts ...Option) *tsServer {
	t.Helper()
	srv, err := NewServer(h, opts...)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	s := &tsServer{t: t, ln: ln, srv: srv, serveErr: make(chan error, 1)}
	go func() { s.serveErr <- srv.Serve(ln) }()
	t.Cleanup(s.stop)
	return s
}

// tsServe starts a server in style: fn for tsNetConn, h for the others.
func tsServe(t testing.TB, ln *Listener, style tsStyle, fn func(c *Conn), h Handler) *tsServer {
	t.Helper()
	switch style {
	case tsHandler:
		return tsServeHandler(t, ln, h)
	case tsInline:
		return tsServeHandler(t, ln, h, WithInlineHandler())
	}
	return tsServeConns(t, ln, fn)
}

// tsServeEcho starts an echo server in style on ln.
func tsServeEcho(t testing.TB, ln *Listener, style tsStyle) *tsServer {
	t.Helper()
	return tsServe(t, ln, style, tsEchoConn, tsEchoHandler)
}

// tsEchoConn echoes c until Read or Write fails (io.EOF included).
func tsEchoConn(c *Conn) {
	b := make([]byte, 64<<10)
	for {
		n, err := c.Read(b)
		if n > 0 {
			if _, werr := c.Write(b[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// tsEchoHandler is the canonical nocopy echo.
func tsEchoHandler(ctx context.Context, c *Conn) error {
	r, w := c.Reader(), c.Writer()
	b, _ := r.Next(r.Len())
	w.WriteBinary(b)
	err := w.Flush()
	r.Release()
	return err
}

// live returns the number of open server connections.
func (s *tsServer) live() int {
	if s.srv != nil {
		s.srv.mu.Lock()
		defer s.srv.mu.Unlock()
		return s.srv.conns.len()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// stop shuts the server down and waits for its goroutines. Idempotent.
func (s *tsServer) stop() {
	s.stopOnce.Do(func() {
		if s.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), tsTimeout)
			defer cancel()
			var early atomic.Value
			dt := time.AfterFunc(tsTimeout/2, func() { early.Store(tsServerConns(s.srv)) })
			if err := s.srv.Shutdown(ctx); err != nil {
				dt.Stop()
				e, _ := early.Load().(string)
				s.t.Errorf("Shutdown: %v; connections left at half time:\n%s", err, e)
			}
			dt.Stop()
			select {
			case err := <-s.serveErr:
				if !errors.Is(err, ErrServerClosed) {
					s.t.Errorf("Serve returned %v, want ErrServerClosed", err)
				}
			case <-time.After(tsTimeout):
				s.t.Errorf("Serve did not return after Shutdown")
			}
			return
		}
		s.ln.Close()
		s.acceptWG.Wait()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		tsWait(s.t, "server connection goroutines", s.connWG.Wait)
	})
}

// tsServerConns describes the connections srv still tracks, for a failure
// message.
func tsServerConns(srv *Server) string {
	srv.mu.Lock()
	cs := srv.conns.appendTo(nil)
	srv.mu.Unlock()
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %v: readable %d, held %d, input ended %v, queued out %d, quiet %v, closing %v, detached %v, descriptor closed %v, handler running %v, draining %v\n",
			c.RemoteAddr(), c.fd.Len(), c.fd.InputHeld(), c.fd.InputEnded(), c.fd.OutputQueued(), c.fd.Quiet(),
			c.fd.Closing(), c.fd.Detached(), c.fd.DescriptorClosed(), c.flagSet(connProcessing), c.flagSet(connDraining))
		if ti, err := unix.GetsockoptTCPInfo(c.fd.Sysfd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			inq, _ := unix.IoctlGetInt(c.fd.Sysfd, unix.SIOCINQ)
			outq, _ := unix.IoctlGetInt(c.fd.Sysfd, unix.SIOCOUTQ)
			fmt.Fprintf(&b, "    TCP state %d, unread %d, unacknowledged %d (as Shutdown counts them: %d)\n", ti.State, inq, outq, c.unacked())
		}
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "ringpoll") && !strings.Contains(g, "tsServerConns") {
			b.WriteString(g + "\n\n")
		}
	}
	return b.String()
}

// tsWait runs f, failing the test if it takes longer than tsTimeout.
func tsWait(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(tsTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// tsRecv receives from c, failing the test after tsTimeout.
func tsRecv[T any](t testing.TB, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(tsTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// tsRecvProgress is tsRecv for a result that comes at the end of many
// steps, each of which adds one to done: it waits for as long as steps
// keep finishing and fails once none has for tsTimeout, so that a slow
// machine takes longer instead of failing.
func tsRecvProgress[T any](t testing.TB, c <-chan T, done *atomic.Int64, what string) T {
	t.Helper()
	tick := time.NewTicker(tsTimeout)
	defer tick.Stop()
	last := done.Load()
	for {
		select {
		case v := <-c:
			return v
		case <-tick.C:
			now := done.Load()
			if now == last {
				t.Fatalf("timed out waiting for %s: no step finished in %v (%d finished)", what, tsTimeout, now)
			}
			last = now
		}
	}
}

// tsEventually polls cond until it holds, failing the test after tsTimeout.
func tsEventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(tsTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// tsDialStd dials ln's address with package net, closed at the end of the
// test.
func tsDialStd(t testing.TB, network, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout(network, addr, tsTimeout)
	if err != nil {
		t.Fatalf("net.Dial(%s, %s): %v", network, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tsDialRing dials addr with ringpoll on engine e, closed at the end of the
// test.
func tsDialRing(t testing.TB, e Engine, network, addr string, opts ...Option) *Conn {
	t.Helper()
	d := Dialer{Timeout: tsTimeout, Options: append([]Option{WithEngine(e)}, opts...)}
	c, err := d.Dial(network, addr)
	if err != nil {
		t.Fatalf("ringpoll.Dial(%s, %s): %v", network, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// tsSide says which end of a connection ringpoll runs in tsPair.
type tsSide string

const (
	tsAccepted tsSide = "accepted" // ringpoll Listener, net.Dial peer
	tsDialed   tsSide = "dialed"   // ringpoll Dial, net.Listen peer
)

var tsSides = []tsSide{tsAccepted, tsDialed}

// tsPair returns a connected ringpoll Conn on engine e (built with opts) and
// its peer from package net, both closed at the end of the test.
func tsPair(t testing.TB, e Engine, network string, side tsSide, opts ...Option) (*Conn, net.Conn) {
	t.Helper()
	if side == tsAccepted {
		ln := listen(t, e, network, opts...)
		peer := tsDialStd(t, network, ln.Addr().String())
		c, err := ln.AcceptConn()
		if err != nil {
			t.Fatalf("Accept: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c, peer
	}
	addr := "127.0.0.1:0"
	switch network {
	case "tcp6":
		addr = "[::1]:0"
	case "unix":
		addr = t.TempDir() + "/peer.sock"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("net.Listen: %v", err)
	}
	defer ln.Close()
	c := tsDialRing(t, e, network, ln.Addr().String(), opts...)
	peer, err := ln.Accept()
	if err != nil {
		t.Fatalf("net Accept: %v", err)
	}
	t.Cleanup(func() { peer.Close() })
	return c, peer
}

// tsNeedIPv6 skips the test unless ::1 can be listened on.
func tsNeedIPv6(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	ln.Close()
}

// tsWaitBlocked waits until some goroutine is parked (select, channel
// receive or network wait) with every one of frames in its stack, so that a
// test can act on a call known to block. Pass tsTestFrame(t) among frames to
// match only goroutines the running test started. Stacks are polled, bounded
// by tsTimeout.
func tsWaitBlocked(t testing.TB, frames ...string) {
	t.Helper()
	buf := make([]byte, 4<<20)
	deadline := time.Now().Add(tsTimeout)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			if !strings.Contains(header, "[select") && !strings.Contains(header, "[IO wait") &&
				!strings.Contains(header, "[chan receive") {
				continue
			}
			all := true
			for _, f := range frames {
				all = all && strings.Contains(g, f)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine blocked with frames %q; goroutines:\n%s", frames, buf[:min(n, 64<<10)])
		}
		time.Sleep(time.Millisecond)
	}
}

// tsTestFrame returns the frame prefix of the functions and closures of the
// running top-level test, for tsWaitBlocked.
func tsTestFrame(t testing.TB) string {
	top, _, _ := strings.Cut(t.Name(), "/")
	return "ringpoll." + top + "."
}

// Frames of the blocking calls, for tsWaitBlocked.
const (
	tsFrameRead   = "poll.(*FD).lockInput("
	tsFrameWrite  = "poll.(*FD).write("
	tsFrameAccept = "ringpoll.(*Listener).accept("
)

// tsRandom returns n pseudo-random bytes from seed.
func tsRandom(seed uint64, n int) []byte {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	b := make([]byte, n)
	rand.NewChaCha8(s).Read(b)
	return b
}

// tsBig is a read-only buffer for writes that are meant to block.
var tsBig = make([]byte, 64<<20)

// tsWriteAsync writes data to c on a goroutine of its own and sends the
// write's error on the channel it returns.
func tsWriteAsync(c net.Conn, data []byte) <-chan error {
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		werr <- err
	}()
	return werr
}

// tsCloseWrite shuts down the writing side of c.
func tsCloseWrite(c net.Conn) error {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return fmt.Errorf("%T has no CloseWrite", c)
	}
	return cw.CloseWrite()
}

// tsBulkRoundTrip writes data to an echoing c in pseudo-random chunks while
// reading the echo concurrently, half-closes, and checks that exactly data
// came back (sha256).
func tsBulkRoundTrip(c net.Conn, data []byte, seed uint64) error {
	c.SetDeadline(time.Now().Add(2 * tsTimeout))
	werr := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(seed, 1))
		for off := 0; off < len(data); {
			n := min(len(data)-off, 1+rng.IntN(256<<10))
			if _, err := c.Write(data[off : off+n]); err != nil {
				werr <- fmt.Errorf("write at %d: %w", off, err)
				return
			}
			off += n
		}
		werr <- tsCloseWrite(c)
	}()
	h := sha256.New()
	n, rerr := io.Copy(h, c)
	if err := <-werr; err != nil {
		return err
	}
	if rerr != nil {
		return fmt.Errorf("read after %d bytes: %w", n, rerr)
	}
	if want := sha256.Sum256(data); n != int64(len(data)) || !bytes.Equal(h.Sum(nil), want[:]) {
		return fmt.Errorf("echo differs: got %d bytes, sha256 %x; sent %d bytes, sha256 %x", n, h.Sum(nil), len(data), want)
	}
	return nil
}

// TestStressBulkEcho pushes 4 × 16 MiB of pseudo-random bytes at once
// through an echo server in each style, over tcp, tcp6 and unix, clients
// alternating between package net and ringpoll Dial, and compares digests.
func TestStressBulkEcho(t *testing.T) {
	const conns, size = 4, 16 << 20
	data := make([][]byte, conns)
	for i := range data {
		data[i] = tsRandom(uint64(i+1), size)
	}
	type row struct {
		network string
		style   tsStyle
	}
	var rows []row
	for _, network := range []string{"tcp", "tcp6", "unix"} {
		for _, style := range tsStyles {
			rows = append(rows, row{network, style})
		}
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, r := range rows {
			t.Run(r.network+"/"+string(r.style), func(t *testing.T) {
				if r.network == "tcp6" {
					tsNeedIPv6(t)
				}
				// The server closes once it has queued the last echo: its
				// drain timeout must not bound how slowly a client,
				// hashing 16 MiB under the race detector on a loaded
				// machine, reads the rest. An expired drain would reset
				// the connection; none may expire.
				ln := listen(t, e, r.network, WithDrainTimeout(2*tsTimeout))
				defer tsNoDrainExpired(t, ln)()
				tsServeEcho(t, ln, r.style)
				errs := make(chan error, conns)
				for i := range conns {
					var c net.Conn
					if i%2 == 0 {
						c = tsDialStd(t, r.network, ln.Addr().String())
					} else {
						c = tsDialRing(t, e, r.network, ln.Addr().String())
					}
					go func() {
						if err := tsBulkRoundTrip(c, data[i], uint64(i)); err != nil {
							errs <- fmt.Errorf("conn %d (%T): %w", i, c, err)
							return
						}
						errs <- nil
					}()
				}
				for range conns {
					if err := tsRecv(t, errs, "bulk round trips"); err != nil {
						t.Errorf("%v (server loops: %v)", err, ln.Stats())
					}
				}
			})
		}
	})
}

// tsNoDrainExpired returns a check, to run once ln's connections are done,
// that none of them was closed with its output cut short by the drain
// timeout since the call (the engine's loops may have served other tests
// before).
func tsNoDrainExpired(t testing.TB, ln *Listener) func() {
	t.Helper()
	expired := func() (n uint64) {
		for _, s := range loopStatsOf(ln) {
			n += s.DrainsExpired
		}
		return n
	}
	before := expired()
	return func() {
		t.Helper()
		if n := expired() - before; n != 0 {
			t.Errorf("%d drains expired: output queued at Close was cut short (server loops: %v)", n, ln.Stats())
		}
	}
}

// tsNeedNoFile makes sure the soft RLIMIT_NOFILE is at least need, raising
// it to the hard limit for the test, or skips the test.
func tsNeedNoFile(t testing.TB, need uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	if rl.Max < need {
		t.Skipf("RLIMIT_NOFILE hard limit %d is under the %d descriptors this test needs", rl.Max, need)
	}
	if rl.Cur >= need {
		return
	}
	old := rl
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("raising RLIMIT_NOFILE to %d: %v", rl.Max, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// TestStressManyConns holds 2000 connections open at once against an echo
// server in each style, on one loop and on three: each connects, sends a
// message, reads the echo and stays open until all are open (the server
// must count all 2000), then sends again and closes. The clients close with
// a reset: 40,000 orderly closes would leave as many TIME_WAIT sockets,
// more than the ephemeral port range, each holding its port for a minute,
// and listens of tests running beside this one would fail.
func TestStressManyConns(t *testing.T) {
	const n = 2000
	tsNeedNoFile(t, 4200)
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, r := range []struct {
			style tsStyle
			loops int
		}{{tsNetConn, 1}, {tsHandler, 1}, {tsNetConn, 3}, {tsHandler, 3}} {
			t.Run(fmt.Sprintf("%s/loops=%d", r.style, r.loops), func(t *testing.T) {
				ln := listen(t, e, "tcp", WithLoops(r.loops))
				srv := tsServeEcho(t, ln, r.style)
				addr := ln.Addr().String()
				allOpen := make(chan struct{})
				var opened, done sync.WaitGroup
				opened.Add(n)
				errs := make(chan error, n)
				sem := make(chan struct{}, 64) // bounds the connect burst under the backlog
				for i := range n {
					done.Go(func() {
						c, err := tsManyOpen(e, addr, i, sem)
						opened.Done()
						if err != nil {
							errs <- fmt.Errorf("conn %d: %w", i, err)
							return
						}
						defer c.Close()
						if err := tsResetOnClose(c); err != nil {
							errs <- fmt.Errorf("conn %d: %w", i, err)
							return
						}
						select {
						case <-allOpen:
						case <-time.After(2 * tsTimeout):
							errs <- fmt.Errorf("conn %d: not all connections opened", i)
							return
						}
						if err := tsEchoOnce(c, fmt.Sprintf("bye %d", i)); err != nil {
							errs <- fmt.Errorf("conn %d after all opened: %w", i, err)
						}
					})
				}
				tsWait(t, "2000 connections to open", opened.Wait)
				// A Server's handler may answer before the accepting
				// goroutine adopts its connection (Server.adopt), so the
				// count may trail the last echoes for a moment; the
				// clients stay open meanwhile, so it must reach n.
				if len(errs) == 0 {
					tsEventually(t, fmt.Sprintf("the server to hold all %d connections while they are open", n), func() bool { return srv.live() == n })
				}
				close(allOpen)
				tsWait(t, "2000 connections to finish", done.Wait)
				close(errs)
				tsReportErrors(t, errs)
				tsEventually(t, "the server to close every connection", func() bool { return srv.live() == 0 })
			})
		}
	})
}

// tsManyOpen connects (package net for even i, ringpoll for odd) and
// round-trips one message, holding a slot of sem while it does.
func tsManyOpen(e Engine, addr string, i int, sem chan struct{}) (net.Conn, error) {
	sem <- struct{}{}
	defer func() { <-sem }()
	var c net.Conn
	var err error
	if i%2 == 0 {
		c, err = net.DialTimeout("tcp", addr, tsTimeout)
	} else {
		d := Dialer{Timeout: tsTimeout, Options: []Option{WithEngine(e)}}
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	if err := tsEchoOnce(c, fmt.Sprintf("hello %d", i)); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// tsResetOnClose sets SO_LINGER 0 on c, so that closing it sends a reset
// and leaves no TIME_WAIT socket behind.
func tsResetOnClose(c net.Conn) error {
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
	}); err != nil {
		return err
	}
	return serr
}

// tsReportErrors reports the errors of a closed channel, the first ten in
// full.
func tsReportErrors(t *testing.T, errs <-chan error) {
	t.Helper()
	k := 0
	for err := range errs {
		if k++; k <= 10 {
			t.Error(err)
		}
	}
	if k > 10 {
		t.Errorf("... and %d more errors", k-10)
	}
}

// tsEchoOnce sends msg on c and reads it back.
func tsEchoOnce(c net.Conn, msg string) error { return tsEchoWithin(c, msg, 2*tsTimeout) }

// tsEchoWithin sends msg on c and reads it back within d; the deadline
// stays set.
func tsEchoWithin(c net.Conn, msg string, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(c, msg); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if string(got) != msg {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}

// tsReadReset reports whether a read error says the peer reset or closed
// the connection: ECONNRESET or io.EOF in its chain.
func tsReadReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)
}

// tsWriteReset reports whether a write error says the peer reset the
// connection: EPIPE or ECONNRESET in its chain.
func tsWriteReset(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// tsResetResult is what a reset-test server connection observed.
type tsResetResult struct {
	mode       byte  // 'W': was writing, 'R': was reading
	first      error // the error of the operation the reset interrupted
	second     error // the error of the other direction afterwards
	firstWrite bool  // first came from a write
}

// tsResetConn serves the reset test in the net.Conn style. The first byte
// picks the mode: 'W' writes until a write fails, then reads; 'R' reads until
// a read fails, then writes until a write fails; 'E' echoes.
func tsResetConn(results chan<- tsResetResult) func(c *Conn) {
	return func(c *Conn) {
		c.SetDeadline(time.Now().Add(tsTimeout))
		mode := make([]byte, 1)
		if _, err := io.ReadFull(c, mode); err != nil {
			return
		}
		switch mode[0] {
		case 'W':
			res := tsResetResult{mode: 'W', firstWrite: true}
			res.first = tsWriteUntilError(c.Write)
			_, res.second = c.Read(make([]byte, 1<<20))
			results <- res
		case 'R':
			res := tsResetResult{mode: 'R'}
			b := make([]byte, 64<<10)
			for res.first == nil {
				_, res.first = c.Read(b)
			}
			res.second = tsWriteUntilError(c.Write)
			results <- res
		case 'E':
			c.Write(mode)
			tsEchoConn(c)
		}
	}
}

// tsResetHandler is tsResetConn as a Handler on the nocopy Reader/Writer.
func tsResetHandler(results chan<- tsResetResult) Handler {
	return func(ctx context.Context, c *Conn) error {
		r, w := c.Reader(), c.Writer()
		mode, _ := r.Peek(1)
		switch mode[0] {
		case 'W':
			r.Skip(1)
			c.SetDeadline(time.Now().Add(tsTimeout))
			res := tsResetResult{mode: 'W', firstWrite: true}
			res.first = tsWriteUntilError(func(p []byte) (int, error) {
				w.WriteBinary(p)
				return len(p), w.Flush()
			})
			_, res.second = r.Next(1)
			results <- res
			return res.first
		case 'R':
			r.Skip(1)
			c.SetDeadline(time.Now().Add(tsTimeout))
			res := tsResetResult{mode: 'R'}
			// More than the client sends: blocks until the reset.
			_, res.first = r.Next(1 << 20)
			res.second = tsWriteUntilError(func(p []byte) (int, error) {
				w.WriteBinary(p)
				return len(p), w.Flush()
			})
			results <- res
			return res.first
		}
		return tsEchoHandler(ctx, c)
	}
}

// tsWriteUntilError writes 256 KiB chunks until write fails (bounded by the
// connection's deadline, and a byte count as a backstop).
func tsWriteUntilError(write func([]byte) (int, error)) error {
	chunk := tsBig[:256<<10]
	for range 4096 {
		if _, err := write(chunk); err != nil {
			return err
		}
	}
	return errors.New("1 GiB written to a reset peer without an error")
}

// TestStressPeerReset has clients close with SO_LINGER 0 (sending RST) while
// the server writes a large response and while it reads. The server's
// interrupted operation and the other direction must fail with ECONNRESET,
// EPIPE or (reads) io.EOF, not hang or panic, and the server must go on
// serving new connections.
func TestStressPeerReset(t *testing.T) {
	type row struct {
		style tsStyle
		mode  byte
	}
	var rows []row
	for _, style := range tsBlockingStyles {
		for _, mode := range []byte{'W', 'R'} {
			rows = append(rows, row{style, mode})
		}
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, r := range rows {
			name := string(r.style) + "/" + map[byte]string{'W': "while-writing", 'R': "while-reading"}[r.mode]
			t.Run(name, func(t *testing.T) {
				ln := listen(t, e, "tcp")
				results := make(chan tsResetResult, 4)
				tsServe(t, ln, r.style, tsResetConn(results), tsResetHandler(results))
				for round := range 3 {
					c := tsDialStd(t, "tcp", ln.Addr().String()).(*net.TCPConn)
					c.SetDeadline(time.Now().Add(tsTimeout))
					if r.mode == 'W' {
						c.Write([]byte{'W'})
						// The server is writing once bytes arrive.
						if _, err := io.ReadFull(c, make([]byte, 64<<10)); err != nil {
							t.Fatalf("round %d: reading the response: %v", round, err)
						}
					} else {
						c.Write([]byte("Rsome bytes"))
						tsWaitBlocked(t, tsFrameRead, "tsReset") // the server goroutine or handler
					}
					if err := c.SetLinger(0); err != nil {
						t.Fatal(err)
					}
					c.Close()
					res := tsRecv(t, results, "the server to see the reset")
					readErr, writeErr := res.first, res.second
					if res.firstWrite {
						readErr, writeErr = res.second, res.first
					}
					if !tsReadReset(readErr) {
						t.Errorf("round %d (mode %c): read failed with %v, want ECONNRESET or io.EOF", round, res.mode, readErr)
					}
					if !tsWriteReset(writeErr) {
						t.Errorf("round %d (mode %c): write failed with %v, want EPIPE or ECONNRESET", round, res.mode, writeErr)
					}
					// The server still serves.
					nc := tsDialStd(t, "tcp", ln.Addr().String())
					if err := tsEchoOnce(nc, "Ehello"); err != nil {
						// 'E' comes back first, then the echo.
						t.Errorf("round %d: a new connection after the reset: %v", round, err)
					}
					nc.Close()
				}
			})
		}
	})
}

// TestStressConcurrentWriters: 8 goroutines write records of 1 B to 256 KiB
// to one connection at once, through Write and through the Writer (each
// record [id, len32, body of id bytes]), with a 64 KiB output high-water
// mark so writers block and queue. Writes must not interleave (the peer
// parses every record whole, in the order each writer sent them), and the
// queue must stay under the mark.
func TestStressConcurrentWriters(t *testing.T) {
	const writers, records = 8, 48
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			t.Run(string(side), func(t *testing.T) {
				c, peer := tsPair(t, e, "tcp", side, WithOutputHighWater(64<<10))
				c.SetWriteDeadline(time.Now().Add(2 * tsTimeout))
				peer.SetReadDeadline(time.Now().Add(2 * tsTimeout))
				var wmu sync.Mutex // the Writer is for one goroutine at a time
				errs := make(chan error, writers)
				for id := range writers {
					go func() {
						rng := rand.New(rand.NewPCG(uint64(id), 2))
						for k := range records {
							n := 1 + rng.IntN(256<<10)
							rec := make([]byte, 5+n)
							rec[0] = byte(id)
							rec[1], rec[2], rec[3], rec[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
							for i := range n {
								rec[5+i] = byte(id*records + k)
							}
							var err error
							if k%2 == 0 {
								_, err = c.Write(rec)
							} else {
								wmu.Lock()
								w := c.Writer()
								w.WriteBinary(rec[:5])
								w.WriteBinary(rec[5:]) // linked when >= 4 KiB
								err = w.Flush()
								wmu.Unlock()
							}
							if err != nil {
								errs <- fmt.Errorf("writer %d record %d: %w", id, k, err)
								return
							}
						}
						errs <- nil
					}()
				}
				s := tsSample(c.fd.OutputQueued)
				readErr := make(chan error, 1)
				go func() { readErr <- tsReadRecords(peer, writers, records) }()
				for range writers {
					if err := tsRecv(t, errs, "the writers"); err != nil {
						t.Error(err)
					}
				}
				if err := tsRecv(t, readErr, "the peer to read every record"); err != nil {
					t.Error(err)
				}
				if max, samples := s.stop(); max > 64<<10 {
					t.Errorf("output queue reached %d bytes (%d samples), above the 64 KiB high-water mark", max, samples)
				}
			})
		}
	})
}

// tsReadRecords parses the records of TestStressConcurrentWriters.
func tsReadRecords(r io.Reader, writers, records int) error {
	next := make([]int, writers)
	hdr := make([]byte, 5)
	body := make([]byte, 256<<10)
	for total := 0; total < writers*records; total++ {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return fmt.Errorf("record header %d: %w", total, err)
		}
		id, n := int(hdr[0]), int(hdr[1])<<24|int(hdr[2])<<16|int(hdr[3])<<8|int(hdr[4])
		if id >= writers || n < 1 || n > len(body) {
			return fmt.Errorf("record %d: garbled header %x (interleaved writes?)", total, hdr)
		}
		if _, err := io.ReadFull(r, body[:n]); err != nil {
			return fmt.Errorf("record %d body: %w", total, err)
		}
		want := byte(id*records + next[id])
		for i, b := range body[:n] {
			if b != want {
				return fmt.Errorf("record %d (writer %d, #%d, %d bytes): byte %d is %#x, want %#x (interleaved writes?)", total, id, next[id], n, i, b, want)
			}
		}
		next[id]++
	}
	return nil
}

// TestStressCloseMidStream closes connections in the middle of bulk
// traffic in both directions, from the client (ringpoll Dial) and, for the
// Server style, by Shutdown with an expired context. Every blocked call must
// return (net.ErrClosed on the closed side; EOF, ECONNRESET or EPIPE on the
// other), with no panic, race or leak.
//
// The client closes once its writer sent 1 MiB and its reader got echo
// back (counts that only grow, so no moment is missed), while both pumps
// still run: a Write that Close catches inside its send must fail with
// net.ErrClosed too.
func TestStressCloseMidStream(t *testing.T) {
	const rounds, conns = 5, 4
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range tsStyles {
			t.Run("client-close/"+string(style), func(t *testing.T) {
				ln := listen(t, e, "tcp", WithOutputHighWater(256<<10))
				tsServeEcho(t, ln, style)
				for round := range rounds {
					errs := make(chan error, 2*conns)
					var cs []*Conn
					wrote := make([]atomic.Int64, conns) // bytes each connection's pumps moved
					read := make([]atomic.Int64, conns)
					for i := range conns {
						c := tsDialRing(t, e, "tcp", ln.Addr().String(), WithOutputHighWater(256<<10))
						c.SetDeadline(time.Now().Add(tsTimeout))
						cs = append(cs, c)
						go func() { errs <- tsPump(c, true, &wrote[i]) }()
						go func() { errs <- tsPump(c, false, &read[i]) }()
					}
					for i, c := range cs {
						tsEventually(t, "echo traffic", func() bool { return wrote[i].Load() >= 1<<20 && read[i].Load() > 0 })
						c.Close()
					}
					for range 2 * conns {
						if err := tsRecv(t, errs, "the pumps to stop"); !errors.Is(err, net.ErrClosed) {
							t.Errorf("round %d: a pump on a closed connection ended with %v, want net.ErrClosed", round, err)
						}
					}
				}
			})
		}
		t.Run("shutdown/handler", func(t *testing.T) {
			ln := listen(t, e, "tcp")
			srv, err := NewServer(tsEchoHandler, WithOutputHighWater(256<<10))
			if err != nil {
				t.Fatal(err)
			}
			serveErr := make(chan error, 1)
			go func() { serveErr <- srv.Serve(ln) }()
			errs := make(chan error, 2*conns)
			for range conns {
				c := tsDialStd(t, "tcp", ln.Addr().String())
				c.SetDeadline(time.Now().Add(tsTimeout))
				go func() { errs <- tsPump(c, true, nil) }()
				go func() { errs <- tsPump(c, false, nil) }()
			}
			tsEventually(t, "handlers to run", func() bool { return srv.pool.Workers() >= 1 })
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Shutdown with a cancelled context: %v", err)
			}
			for range 2 * conns {
				err := tsRecv(t, errs, "the clients to see the connection end")
				if !tsReadReset(err) && !tsWriteReset(err) {
					t.Errorf("a client of a shut-down Server ended with %v, want EOF, ECONNRESET or EPIPE", err)
				}
			}
			if err := tsRecv(t, serveErr, "Serve to return"); !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
		})
	})
}

// tsPump writes (write set) or reads c until an error, and returns it. It
// adds the bytes it moves to moved, if not nil.
func tsPump(c net.Conn, write bool, moved *atomic.Int64) error {
	b := make([]byte, 32<<10)
	for range 1 << 20 {
		var n int
		var err error
		if write {
			n, err = c.Write(tsBig[:len(b)])
		} else {
			n, err = c.Read(b)
		}
		if moved != nil {
			moved.Add(int64(n))
		}
		if err != nil {
			return err
		}
	}
	return errors.New("32 GiB moved without the connection ending")
}
