//go:build linux

package ringpoll

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// TestShutdownHalfLine: a peer sends a request and half of the next line
// ("hal"), then stalls. Shutdown(context.Background()) cancels the
// handlers' context with the cause ErrServerClosed as it starts, returns
// although the line will never complete, and the reply already owed
// reaches the peer, then EOF. A pooled handler blocked in Until for the
// rest of the line is woken with an error matching ErrServerClosed, its
// context already cancelled, and returns it (handler) or nil
// (handler-returns-nil: the Server then owes it nothing more, and drops
// "hal"); an inline one, which never blocks, was called on "hal" and left
// it.
func TestShutdownHalfLine(t *testing.T) {
	const swallow tsStyle = "handler-returns-nil"
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range []tsStyle{tsHandler, swallow, tsInline} {
			t.Run(string(style), func(t *testing.T) {
				var opts []Option
				if style == tsInline {
					opts = append(opts, WithInlineHandler())
				}
				var (
					conn    atomic.Pointer[Conn]
					lastCtx atomic.Pointer[context.Context]
				)
				halfSeen := make(chan struct{}, 1) // inline: Until found "hal" alone
				woken := make(chan error, 1)       // pooled: what woke Until, with the context's cause
				srv, ln, _ := tsStartServer(t, e, func(ctx context.Context, c *Conn) error {
					conn.Store(c)
					lastCtx.Store(&ctx)
					r, w := c.Reader(), c.Writer()
					for {
						line, err := r.Until('\n')
						if errors.Is(err, ErrWouldBlock) {
							select {
							case halfSeen <- struct{}{}:
							default:
							}
							return err
						}
						if err != nil {
							if cause := context.Cause(ctx); cause != ErrServerClosed {
								err = errors.Join(err, errors.New("the context's cause is not ErrServerClosed"), cause)
							}
							woken <- err
							if style == swallow {
								return nil
							}
							return err
						}
						w.WriteBinary(line)
						if err := w.Flush(); err != nil {
							return err
						}
					}
				}, opts...)
				c := tsDialStd(t, "tcp", ln.Addr().String())
				if _, err := c.Write([]byte("ping\nhal")); err != nil {
					t.Fatal(err)
				}
				reply := make([]byte, 5)
				if _, err := io.ReadFull(c, reply); err != nil || string(reply) != "ping\n" {
					t.Fatalf("read %q, %v; want the reply \"ping\\n\"", reply, err)
				}
				if style == tsInline {
					tsRecv(t, halfSeen, "the inline handler to see \"hal\"")
				} else {
					// The handler waits in Until for the rest of the line.
					tsEventually(t, "the handler to wait for the rest of the line", func() bool {
						c := conn.Load()
						return c != nil && c.fd.Len() == 3 && c.fd.ReaderWaited()
					})
				}
				shut := make(chan error, 1)
				go func() { shut <- srv.Shutdown(context.Background()) }()
				if style != tsInline {
					err := tsRecv(t, woken, "Shutdown to wake the handler blocked in Until")
					if !errors.Is(err, ErrServerClosed) {
						t.Errorf("Until woken by Shutdown returned %v, want an error matching ErrServerClosed", err)
					}
				}
				if err := tsRecv(t, shut, "Shutdown(context.Background()) to return"); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
				if ctx := *lastCtx.Load(); context.Cause(ctx) != ErrServerClosed {
					t.Errorf("after Shutdown the handlers' context has cause %v, want ErrServerClosed", context.Cause(ctx))
				}
				if got := tsReadEOF(t, c, true); len(got) != 0 {
					t.Errorf("after Shutdown the peer read %q, want EOF", got)
				}
			})
		}
	})
}

// tsOneLine is a handler that echoes the first whole line of its input
// and returns, leaving the rest (more lines, or part of one) for the next
// call: the Server calls it again while it consumes input. It never
// waits, so it runs pooled and inline alike; calls counts its calls.
func tsOneLine(calls *atomic.Int32) Handler {
	return func(ctx context.Context, c *Conn) error {
		calls.Add(1)
		r := c.Reader()
		n := r.Len()
		if n == 0 {
			return nil
		}
		b, err := r.Peek(n)
		if err != nil {
			return err
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil // the rest of the line is still to come
		}
		line, err := r.Next(i + 1)
		if err != nil {
			return err
		}
		return tsEchoLine(c, line)
	}
}

// tsHold stops, once, the goroutine that reaches a hook point for one
// connection, until let; and reports each time Server.Shutdown has looked
// at that connection.
type tsHold struct {
	fd       *poll.FD
	point    poll.HookPoint
	held     atomic.Bool
	reached  chan struct{} // the goroutine stopped at point
	release  chan struct{}
	looked   chan struct{} // Shutdown looked at fd (HookShutdownLooked)
	letOnce  sync.Once
	restored func()
}

// tsHoldAt sets the test hook to stop at point for fd, until the end of
// the test at the latest.
func tsHoldAt(t *testing.T, fd *poll.FD, point poll.HookPoint) *tsHold {
	h := &tsHold{fd: fd, point: point, reached: make(chan struct{}, 1),
		release: make(chan struct{}), looked: make(chan struct{}, 1)}
	h.restored = poll.SetTestHook(func(p poll.HookPoint, fd *poll.FD) {
		if fd != h.fd {
			return
		}
		switch {
		case p == poll.HookShutdownLooked:
			select {
			case h.looked <- struct{}{}:
			default:
			}
		case p == h.point && h.held.CompareAndSwap(false, true):
			h.reached <- struct{}{}
			<-h.release
		}
	})
	t.Cleanup(func() {
		h.let()
		h.restored()
	})
	return h
}

// let lets the held goroutine go on.
func (h *tsHold) let() { h.letOnce.Do(func() { close(h.release) }) }

// TestShutdownServesArrivedInput: a request that arrived before Shutdown
// is served, however far on its way to the handler it was when Shutdown
// looked at its connection; then the peer reads EOF. Each case holds one
// goroutine at a hook point, lets Shutdown look at the connection, then
// lets it go:
//
//   - linked: the loop linked the request into the input and has not
//     yet scheduled the handler (HookInputLinked);
//   - after-partial: the same, for the end of a line whose start ("hal")
//     the handler saw before and left for more;
//   - pipelined: two requests arrived together, and the handler, which
//     serves one line a call, returned from the first (HookHandlerReturned).
func TestShutdownServesArrivedInput(t *testing.T) {
	cases := []struct {
		name  string
		point poll.HookPoint
		// send sends the request(s) while the hook is set, before the
		// hold; want is the reply.
		before, send, want string
	}{
		{"linked", poll.HookInputLinked, "", "ping\n", "ping\n"},
		{"after-partial", poll.HookInputLinked, "hal", "f\n", "half\n"},
		{"pipelined", poll.HookHandlerReturned, "", "a\nb\n", "a\nb\n"},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range []tsStyle{tsHandler, tsInline} {
			for _, tc := range cases {
				t.Run(string(style)+"/"+tc.name, func(t *testing.T) {
					var opts []Option
					if style == tsInline {
						opts = append(opts, WithInlineHandler())
					}
					var calls atomic.Int32
					var conn atomic.Pointer[Conn]
					one := tsOneLine(&calls)
					srv, ln, _ := tsStartServer(t, e, func(ctx context.Context, c *Conn) error {
						conn.Store(c)
						return one(ctx, c)
					}, opts...)
					client := tsDialStd(t, "tcp", ln.Addr().String())
					if err := tsEchoOnce(client, "hello\n"); err != nil {
						t.Fatal(err)
					}
					c := conn.Load()
					idle := func() bool { return !c.flagSet(connProcessing) }
					tsEventually(t, "the handler to be done with hello", idle)
					if tc.before != "" {
						n := calls.Load()
						if _, err := client.Write([]byte(tc.before)); err != nil {
							t.Fatal(err)
						}
						tsEventually(t, "the handler to see the start of the line and leave it", func() bool {
							return calls.Load() > n && idle()
						})
					}
					h := tsHoldAt(t, c.fd, tc.point)
					if _, err := client.Write([]byte(tc.send)); err != nil {
						t.Fatal(err)
					}
					tsRecv(t, h.reached, "the hold")
					if tc.point == poll.HookHandlerReturned {
						// Both requests are in before Shutdown.
						total := uint64(len("hello\n") + len(tc.send))
						tsEventually(t, "the second request to arrive", func() bool {
							n, done, _ := c.fd.InputState()
							return done+uint64(n) == total
						})
					}
					shut := make(chan error, 1)
					go func() { shut <- srv.Shutdown(context.Background()) }()
					tsRecv(t, h.looked, "Shutdown to look at the connection")
					h.let()
					if got := tsReadEOF(t, client, false); string(got) != tc.want {
						t.Errorf("after Shutdown the peer read %q, then EOF; want %q", got, tc.want)
					}
					if err := tsRecv(t, shut, "Shutdown to return"); err != nil {
						t.Errorf("Shutdown: %v", err)
					}
				})
			}
		}
	})
}

// TestShutdownHeldBackReset: an inline handler's connection is held back
// (its output above the high-water mark, the peer not reading) with input
// waiting, when the peer resets it. The failed send drops the output, and
// no drain of it will ever run the handler again (on epoll and
// uring-reactor, whose loops see the reset on the send); Shutdown must
// not wait for the handler to be handed that input, since no reply to it
// could go out: Shutdown(context.Background()) returns.
func TestShutdownHeldBackReset(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		var conn atomic.Pointer[Conn]
		srv, ln, _ := tsStartServer(t, e, func(ctx context.Context, c *Conn) error {
			conn.Store(c)
			return tsEchoHandler(ctx, c)
		}, WithInlineHandler(), WithOutputHighWater(64<<10))
		client := tsDialStd(t, "tcp", ln.Addr().String()).(*net.TCPConn)
		go func() {
			for {
				if _, err := client.Write(tsBig[:1<<20]); err != nil {
					return
				}
			}
		}()
		tsEventually(t, "the handler to be held back with input waiting", func() bool {
			c := conn.Load()
			return c != nil && c.flagSet(connHeldBack) && c.fd.Len() > 0
		})
		c := conn.Load()
		client.SetLinger(0)
		client.Close()
		// The loop's send fails on the reset (or the handler, run again,
		// failed and closed the connection).
		tsEventually(t, "the server to see the reset", func() bool { return c.fd.WriteErr() != nil })
		shut := make(chan error, 1)
		go func() { shut <- srv.Shutdown(context.Background()) }()
		if err := tsRecv(t, shut, "Shutdown to return"); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
}

// TestShutdownPeerNeverReads: a peer asks for a reply far larger than the
// output high-water mark and never reads it, so a pooled handler blocks
// writing it and an inline one leaves it queued. Shutdown(
// context.Background()) must still return: a drain timeout after it
// began, the connection is closed, and the peer, which was owed more than
// it got, reads a reset, not a clean end.
func TestShutdownPeerNeverReads(t *testing.T) {
	reply := make([]byte, 8<<20)
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range []tsStyle{tsHandler, tsInline} {
			t.Run(string(style), func(t *testing.T) {
				opts := []Option{WithOutputHighWater(64 << 10), WithDrainTimeout(50 * time.Millisecond)}
				if style == tsInline {
					opts = append(opts, WithInlineHandler())
				}
				writing := make(chan struct{}, 1)
				srv, ln, _ := tsStartServer(t, e, func(ctx context.Context, c *Conn) error {
					if _, err := c.Reader().Next(c.Reader().Len()); err != nil {
						return err
					}
					select {
					case writing <- struct{}{}:
					default:
					}
					_, err := c.Write(reply)
					return err
				}, opts...)
				peer := tsDialStd(t, "tcp", ln.Addr().String()).(*net.TCPConn)
				peer.SetReadBuffer(4096)
				if _, err := peer.Write([]byte("more than you will read\n")); err != nil {
					t.Fatal(err)
				}
				tsRecv(t, writing, "the handler to write its reply")
				done := make(chan error, 1)
				go func() { done <- srv.Shutdown(context.Background()) }()
				if err := tsRecv(t, done, "Shutdown to return"); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
				peer.SetReadDeadline(time.Now().Add(tsTimeout))
				got, err := io.Copy(io.Discard, peer)
				if !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("the peer read %d of %d bytes, then %v; want a reset", got, len(reply), err)
				}
			})
		}
	})
}
