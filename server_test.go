//go:build linux

package ringpoll

// Server and option tests. Helpers (ts*) are in stress_test.go.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tsShutdown runs srv.Shutdown with a context of timeout, returning its
// error and how long it took.
func tsShutdown(srv *Server, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	err := srv.Shutdown(ctx)
	return time.Since(start), err
}

// tsStartServer runs a Server with h on a new listener; the test stops it
// itself (Shutdown) and gets Serve's result from the channel.
func tsStartServer(t *testing.T, e Engine, h Handler, opts ...Option) (*Server, *Listener, <-chan error) {
	t.Helper()
	srv, err := NewServer(h, opts...)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	ln := listen(t, e, "tcp")
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	t.Cleanup(func() {
		// Backstop for a failed test; a passing test shut down already.
		tsShutdown(srv, tsTimeout)
	})
	return srv, ln, serveErr
}

// tsReadEOF reads c to its end and returns what it read; the end must be
// io.EOF (or, with reset set, a reset) within tsTimeout.
func tsReadEOF(t *testing.T, c net.Conn, reset bool) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(tsTimeout))
	b, err := io.ReadAll(c)
	if err != nil && !(reset && tsReadReset(err)) {
		t.Fatalf("reading to EOF: got %d bytes, then %v", len(b), err)
	}
	return b
}

// TestServer covers the Server's lifecycle: handler errors, Serve's
// listener check, Shutdown with idle, busy and stuck connections, and
// Serve's result.
func TestServer(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, e Engine)
	}{
		{"handler-error-closes", func(t *testing.T, e Engine) {
			// The handler writes a farewell and fails: the peer reads the
			// farewell, then EOF.
			srv, ln, serveErr := tsStartServer(t, e, func(ctx context.Context, c *Conn) error {
				r, w := c.Reader(), c.Writer()
				r.Skip(r.Len())
				w.WriteString("bye")
				if err := w.Flush(); err != nil {
					return err
				}
				return errors.New("handler failed")
			})
			c := tsDialStd(t, "tcp", ln.Addr().String())
			c.Write([]byte("hi"))
			if got := tsReadEOF(t, c, false); string(got) != "bye" {
				t.Errorf("peer read %q before EOF, want %q", got, "bye")
			}
			// The Server goes on serving.
			c2 := tsDialStd(t, "tcp", ln.Addr().String())
			c2.Write([]byte("hi"))
			if got := tsReadEOF(t, c2, false); string(got) != "bye" {
				t.Errorf("second peer read %q before EOF, want %q", got, "bye")
			}
			if _, err := tsShutdown(srv, tsTimeout); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if err := tsRecv(t, serveErr, "Serve to return"); !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
		}},
		{"serve-needs-ringpoll-listener", func(t *testing.T, e Engine) {
			srv, err := NewServer(tsEchoHandler)
			if err != nil {
				t.Fatal(err)
			}
			defer tsShutdown(srv, tsTimeout)
			nl, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer nl.Close()
			done := make(chan error, 1)
			go func() { done <- srv.Serve(nl) }()
			err = tsRecv(t, done, "Serve(net listener) to return")
			if err == nil || !strings.Contains(err.Error(), "ringpoll.Listen") || !strings.Contains(err.Error(), "*net.TCPListener") {
				t.Errorf("Serve(%T) returned %v, want an error naming ringpoll.Listen and the listener type", nl, err)
			}
		}},
		{"shutdown-idle", func(t *testing.T, e Engine) {
			// Idle connections are shut down at once; their peers read EOF.
			srv, ln, serveErr := tsStartServer(t, e, tsEchoHandler)
			var clients []net.Conn
			for range 5 {
				c := tsDialStd(t, "tcp", ln.Addr().String())
				if err := tsEchoOnce(c, "ping"); err != nil {
					t.Fatal(err)
				}
				clients = append(clients, c)
			}
			// Shutdown closes them itself, a linger after their peers
			// acknowledged the last reply, without waiting for the peers
			// (which read only afterwards) or its context: it returns nil,
			// not the context's error, well before the context ends.
			took, err := tsShutdown(srv, 2*tsTimeout)
			if err != nil {
				t.Errorf("Shutdown with idle connections: %v (after %v)", err, took)
			}
			if took > tsTimeout {
				t.Errorf("Shutdown with idle connections took %v", took)
			}
			for i, c := range clients {
				if got := tsReadEOF(t, c, false); len(got) != 0 {
					t.Errorf("client %d read %q after Shutdown, want EOF", i, got)
				}
			}
			if err := tsRecv(t, serveErr, "Serve to return"); !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
			if err := srv.Serve(ln); !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve after Shutdown returned %v, want ErrServerClosed", err)
			}
			if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
				t.Errorf("the listener still accepts after Shutdown")
			}
		}},
		{"shutdown-waits-for-handler-and-output", func(t *testing.T, e Engine) {
			// Shutdown lets a running handler finish and its 8 MiB of
			// queued output reach the peer before it closes the connection.
			const size = 8 << 20
			data := tsRandom(3, size)
			sum := sha256.Sum256(data)
			started, release := make(chan struct{}), make(chan struct{})
			srv, ln, serveErr := tsStartServer(t, e, func(ctx context.Context, c *Conn) error {
				c.Reader().Skip(c.Reader().Len())
				close(started)
				<-release
				w := c.Writer()
				w.WriteBinary(data)
				return w.Flush()
			}, WithOutputHighWater(64<<10))
			c := tsDialStd(t, "tcp", ln.Addr().String())
			c.Write([]byte("go"))
			tsRecv(t, started, "the handler to start")
			shut := make(chan error, 1)
			go func() {
				_, err := tsShutdown(srv, tsTimeout)
				shut <- err
			}()
			tsRecv(t, serveErr, "Serve to return once Shutdown began")
			select {
			case err := <-shut:
				t.Fatalf("Shutdown returned %v while a handler was running", err)
			default:
			}
			close(release)
			got := tsReadEOF(t, c, false)
			if h := sha256.Sum256(got); len(got) != size || !bytes.Equal(h[:], sum[:]) {
				t.Errorf("peer got %d bytes (sha256 %x), want %d (%x)", len(got), h, size, sum)
			}
			if err := tsRecv(t, shut, "Shutdown to return"); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		}},
		{"shutdown-deadline-stuck-handler", func(t *testing.T, e Engine) {
			// A handler that never returns: Shutdown gives up when its
			// context ends, closes the connection, and cancels the
			// handlers' context.
			started, release := make(chan struct{}), make(chan struct{})
			handlerCtx := make(chan context.Context, 1)
			srv, ln, serveErr := tsStartServer(t, e, func(ctx context.Context, c *Conn) error {
				c.Reader().Skip(c.Reader().Len())
				handlerCtx <- ctx
				close(started)
				<-release
				return nil
			})
			defer close(release)
			c := tsDialStd(t, "tcp", ln.Addr().String())
			idle := tsDialStd(t, "tcp", ln.Addr().String())
			if _, err := c.Write([]byte("go")); err != nil {
				t.Fatal(err)
			}
			tsRecv(t, started, "the handler to start")
			took, err := tsShutdown(srv, 200*time.Millisecond)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Shutdown with a stuck handler returned %v, want context.DeadlineExceeded", err)
			}
			if took > 5*time.Second {
				t.Errorf("Shutdown with a 200ms context took %v", took)
			}
			tsReadEOF(t, c, true)
			tsReadEOF(t, idle, true)
			if ctx := <-handlerCtx; ctx.Err() == nil {
				t.Errorf("the handlers' context is not cancelled after Shutdown gave up")
			}
			if err := tsRecv(t, serveErr, "Serve to return"); !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
		}},
		{"shutdown-before-serve-and-twice", func(t *testing.T, e Engine) {
			srv, err := NewServer(tsEchoHandler)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tsShutdown(srv, tsTimeout); err != nil {
				t.Errorf("Shutdown of an unused Server: %v", err)
			}
			if _, err := tsShutdown(srv, tsTimeout); err != nil {
				t.Errorf("second Shutdown: %v", err)
			}
			ln := listen(t, e, "tcp")
			if err := srv.Serve(ln); !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve after Shutdown returned %v, want ErrServerClosed", err)
			}
		}},
		{"nil-handler", func(t *testing.T, e Engine) {
			if srv, err := NewServer(nil); err == nil || srv != nil {
				t.Errorf("NewServer(nil) = %v, %v; want an error", srv, err)
			}
		}},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) { tc.run(t, e) })
		}
	})
}

// TestOptionsInvalid: a malformed option makes Listen, Dial and NewServer
// fail with an error naming it.
func TestOptionsInvalid(t *testing.T) {
	cases := []struct {
		opt  Option
		name string
	}{
		{WithLoops(0), "WithLoops(0)"},
		{WithLoops(1025), "WithLoops(1025)"},
		{WithInputHighWater(1), "WithInputHighWater(1)"},
		{WithOutputHighWater(-1), "WithOutputHighWater(-1)"},
		{WithIdleTimeout(-1), "WithIdleTimeout(-1ns)"},
		{WithDrainTimeout(-time.Second), "WithDrainTimeout(-1s)"},
		{WithEngine(Engine(99)), "WithEngine(99)"},
		{WithLogger(nil), "WithLogger(nil)"},
		{WithBusyPoll(0), "WithBusyPoll(0s)"},
		{WithBusyPoll(time.Second), "WithBusyPoll(1s)"},
	}
	calls := []struct {
		name string
		call func(o Option) error
	}{
		{"Listen", func(o Option) error {
			ln, err := Listen("tcp", "127.0.0.1:0", o)
			if ln != nil {
				ln.Close()
			}
			return err
		}},
		{"Dial", func(o Option) error {
			c, err := Dial("tcp", "127.0.0.1:1", o)
			if c != nil {
				c.Close()
			}
			return err
		}},
		{"Dialer", func(o Option) error {
			d := Dialer{Options: []Option{o}}
			c, err := d.Dial("tcp", "127.0.0.1:1")
			if c != nil {
				c.Close()
			}
			return err
		}},
		{"NewServer", func(o Option) error {
			srv, err := NewServer(tsEchoHandler, o)
			if srv != nil {
				tsShutdown(srv, time.Second)
			}
			return err
		}},
	}
	for _, call := range calls {
		for _, tc := range cases {
			t.Run(call.name+"/"+tc.name, func(t *testing.T) {
				err := call.call(tc.opt)
				if err == nil {
					t.Fatalf("%s with %s succeeded", call.name, tc.name)
				}
				if !strings.Contains(err.Error(), tc.name) {
					t.Errorf("%s with %s: error %q does not name the option", call.name, tc.name, err)
				}
			})
		}
	}
}

// TestOptionsEngineUnavailable: engines that cannot run here (every engine
// not in testEngines) make Listen, Dial and NewServer fail with an error
// wrapping ErrEngineUnavailable that names the engine.
func TestOptionsEngineUnavailable(t *testing.T) {
	for _, name := range []string{"uring", "uring-hybrid", "uring-reactor", "uring-sqpoll"} {
		t.Run(name, func(t *testing.T) {
			e, err := ParseEngine(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, te := range testEngines {
				if te == e {
					t.Skipf("%s is available and tested", name)
				}
			}
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrEngineUnavailable) || !strings.Contains(err.Error(), name) {
					t.Errorf("%s with WithEngine(%s) returned %v, want an error wrapping ErrEngineUnavailable naming %s", what, name, err, name)
				}
			}
			ln, err := Listen("tcp", "127.0.0.1:0", WithEngine(e))
			if ln != nil {
				ln.Close()
			}
			check("Listen", err)
			c, err := Dial("tcp", "127.0.0.1:1", WithEngine(e))
			if c != nil {
				c.Close()
			}
			check("Dial", err)
			srv, err := NewServer(tsEchoHandler, WithEngine(e))
			if srv != nil {
				tsShutdown(srv, time.Second)
			}
			check("NewServer", err)
		})
	}
}

// TestOptionsEnvEngine: RINGPOLL_ENGINE=bogus makes the auto engine fail
// with an error naming the variable and its value; an explicit engine does
// not consult it.
func TestOptionsEnvEngine(t *testing.T) {
	t.Setenv("RINGPOLL_ENGINE", "bogus")
	calls := []struct {
		name string
		call func() error
	}{
		{"Listen", func() error {
			ln, err := Listen("tcp", "127.0.0.1:0")
			if ln != nil {
				ln.Close()
			}
			return err
		}},
		{"Dial", func() error {
			c, err := Dial("tcp", "127.0.0.1:1", WithEngine(EngineAuto))
			if c != nil {
				c.Close()
			}
			return err
		}},
		{"NewServer", func() error {
			srv, err := NewServer(tsEchoHandler, WithEngine(EngineAuto))
			if srv != nil {
				tsShutdown(srv, time.Second)
			}
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if err == nil || !strings.Contains(err.Error(), "RINGPOLL_ENGINE") || !strings.Contains(err.Error(), `"bogus"`) {
				t.Errorf("%s with RINGPOLL_ENGINE=bogus returned %v, want an error naming RINGPOLL_ENGINE and \"bogus\"", c.name, err)
			}
		})
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp")
		if got := ln.Stats().Engine; got != e {
			t.Errorf("Listener.Stats().Engine = %v, want %v", got, e)
		}
	})
}

// TestOptionsIdleTimeout: WithIdleTimeout(100ms) closes a connection with
// no traffic (the peer reads EOF) but not one with traffic every 20ms for
// 300ms (and until the idle one was closed), which is then closed once it
// falls idle, not before the idle timeout; in every style.
//
// The test judges from the time taken before each message it sends, which
// is no later than the server's last traffic on that connection: a
// connection that fails sooner than the idle timeout after that time was
// closed early, whatever the machine's pace, and fails the test. Only if
// this goroutine itself stalled for the idle timeout or longer between two
// messages may the timer have closed the connection rightly; such a run
// proves nothing and is repeated with twice the idle timeout (and tick),
// so a slow machine is judged too, never skipped.
func TestOptionsIdleTimeout(t *testing.T) {
	const first, last = 100 * time.Millisecond, 3200 * time.Millisecond
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range tsStyles {
			t.Run(string(style), func(t *testing.T) {
				for idle := first; !tsIdleTimeoutRun(t, e, style, idle); idle *= 2 {
					if idle >= last {
						t.Fatalf("this goroutine stalled for the whole idle timeout in every run, up to %v", idle)
					}
					t.Logf("this goroutine stalled for the %v idle timeout between two messages; again with %v", idle, 2*idle)
				}
			})
		}
	})
}

// tsIdleTimeoutRun runs TestOptionsIdleTimeout with the idle timeout idle.
// It fails the test on a close sooner than idle after a connection's last
// traffic, and returns false if the run proves nothing because this
// goroutine stalled for idle or longer between two messages.
func tsIdleTimeoutRun(t *testing.T, e Engine, style tsStyle, idle time.Duration) bool {
	ln := listen(t, e, "tcp", WithIdleTimeout(idle))
	tsServeEcho(t, ln, style)
	// echo round-trips msg on c; *last is a time no later than c's last
	// traffic as the server saw it (before the dial, at first), and moves
	// to when msg was sent once the echo came back.
	echo := func(c net.Conn, msg string, last *time.Time) bool {
		t.Helper()
		sent := time.Now()
		err := tsEchoOnce(c, msg)
		if err == nil {
			*last = sent
			return true
		}
		if gap := time.Since(*last); gap < idle {
			t.Fatalf("%q failed %v after the connection's last traffic, within the %v idle timeout: %v", msg, gap, idle, err)
		}
		return false // closed by the idle timer, perhaps rightly
	}
	quietLast := time.Now()
	quiet := tsDialStd(t, "tcp", ln.Addr().String())
	busyLast := time.Now()
	busy := tsDialStd(t, "tcp", ln.Addr().String())
	if !echo(quiet, "once", &quietLast) {
		return false
	}
	quietErr := make(chan error, 1)
	go func() {
		quiet.SetReadDeadline(time.Now().Add(tsTimeout))
		_, err := quiet.Read(make([]byte, 1))
		quietErr <- err
	}()
	tick := time.NewTicker(idle / 5)
	defer tick.Stop()
	start := time.Now()
	quietClosed := false
	for i := 0; ; i++ {
		// The busy connection must outlive the idle one, and three idle
		// timeouts, with traffic.
		done := quietClosed && time.Since(start) >= 3*idle
		if !echo(busy, fmt.Sprintf("tick %d", i), &busyLast) {
			return false
		}
		if done {
			break
		}
		if !quietClosed {
			select {
			case err := <-quietErr:
				quietClosed = true
				if err != io.EOF {
					t.Errorf("idle connection read %v, want io.EOF", err)
				}
			default:
			}
		}
		<-tick.C
	}
	// Once quiet, the busy connection is closed too, an idle timeout after
	// its last message at the soonest.
	fell := busyLast
	if got := tsReadEOF(t, busy, false); len(got) != 0 {
		t.Errorf("busy connection read %q, want EOF", got)
	}
	if el := time.Since(fell); el < idle/2 {
		t.Errorf("busy connection closed %v after its last traffic, before the %v idle timeout", el, idle)
	}
	return true
}

// TestOptionsIdleTimeoutTiny: an idle timeout that expires at once (1ns)
// closes accepted and dialed connections right away. An idle timer armed
// before the connection is registered with a loop would fire with no loop
// to close through and crash the process (a nil pointer in the timer
// goroutine): the timer starts only after Register.
func TestOptionsIdleTimeoutTiny(t *testing.T) {
	const rounds = 100
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp", WithIdleTimeout(time.Nanosecond))
		plain := listen(t, e, "tcp")
		b := make([]byte, 1)
		for i := range rounds {
			peer := tsDialStd(t, "tcp", ln.Addr().String())
			c, err := ln.AcceptConn()
			if err != nil {
				t.Fatalf("round %d: Accept: %v", i, err)
			}
			c.SetReadDeadline(time.Now().Add(tsTimeout))
			if _, err := c.Read(b); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("round %d: Read on an accepted connection with a 1ns idle timeout returned %v, want net.ErrClosed", i, err)
			}
			tsReadEOF(t, peer, false)
			peer.Close()

			d := tsDialRing(t, e, "tcp", plain.Addr().String(), WithIdleTimeout(time.Nanosecond))
			d.SetReadDeadline(time.Now().Add(tsTimeout))
			if _, err := d.Read(b); !errors.Is(err, net.ErrClosed) {
				t.Fatalf("round %d: Read on a dialed connection with a 1ns idle timeout returned %v, want net.ErrClosed", i, err)
			}
			if pc, err := plain.AcceptConn(); err == nil {
				pc.Close()
			}
		}
	})
}

// TestShutdownDuringAccept: Shutdown while Serve is still accepting a burst
// of connections. A connection accepted as Shutdown runs is either closed
// by Shutdown or refused by Serve, never touched half set up (the race
// detector checks), and every client sees its connection end.
func TestShutdownDuringAccept(t *testing.T) {
	const rounds, clients = 10, 32
	forEachEngine(t, func(t *testing.T, e Engine) {
		for round := range rounds {
			srv, ln, serveErr := tsStartServer(t, e, tsEchoHandler, WithEngine(e))
			ends := make(chan error, clients)
			for range clients {
				go func() {
					c, err := net.DialTimeout("tcp", ln.Addr().String(), tsTimeout)
					if err != nil {
						ends <- err // the listener closed first
						return
					}
					defer c.Close()
					c.SetReadDeadline(time.Now().Add(tsTimeout))
					b, err := io.ReadAll(c)
					if err == nil && len(b) > 0 {
						err = fmt.Errorf("read %q from a server that got no request", b)
					}
					ends <- err
				}()
			}
			tsEventually(t, "the first connection", func() bool {
				srv.mu.Lock()
				defer srv.mu.Unlock()
				return srv.conns.len() > 0
			})
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("round %d: Shutdown: %v", round, err)
			}
			if err := tsRecv(t, serveErr, "Serve to return"); !errors.Is(err, ErrServerClosed) {
				t.Fatalf("round %d: Serve returned %v, want ErrServerClosed", round, err)
			}
			for range clients {
				err := tsRecv(t, ends, "a client to see its connection end")
				if err != nil && !tsReadReset(err) && !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("round %d: a client ended with %v, want EOF, a reset or a refusal", round, err)
				}
			}
		}
	})
}
