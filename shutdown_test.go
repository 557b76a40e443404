//go:build linux

package ringpoll

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
)

// TestShutdownHalfLine: a peer sends a request and half of the next line
// ("hal"), then stalls. Shutdown(context.Background()) cancels the
// handlers' context with the cause ErrServerClosed as it starts, returns
// although the line will never complete, and the reply already owed
// reaches the peer, then EOF. A pooled handler blocked in Until for the
// rest of the line is woken with an error matching ErrServerClosed, its
// context already cancelled; an inline one, which never blocks, was
// called on "hal" and left it.
func TestShutdownHalfLine(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range []tsStyle{tsHandler, tsInline} {
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
				if style == tsHandler {
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
