//go:build linux

package hertz

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/cloudwego/hertz/pkg/app/server"
	"github.com/cloudwego/hertz/pkg/common/config"
	"github.com/cloudwego/hertz/pkg/network"
	"github.com/ringpoll/ringpoll"
)

// TestReadTimeout: a client that sends part of a request and stalls gets
// 408 and is closed after the read timeout; one that stays silent after
// a request is closed after the idle timeout.
func TestReadTimeout(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		s := startServer(t, opts, routes,
			server.WithReadTimeout(100*time.Millisecond),
			server.WithIdleTimeout(100*time.Millisecond))
		t.Run("slow-request", func(t *testing.T) {
			c, r := s.rawConn(t)
			io.WriteString(c, "GET /hello HTTP/1.1\r\nHost: x\r\n") // and no end of headers
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("a stalled request got no reply: %v", err)
			}
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("a stalled request got %d; want 408", resp.StatusCode)
			}
			io.Copy(io.Discard, resp.Body)
			if _, err := r.ReadByte(); err != io.EOF {
				t.Fatalf("after the 408: read %v; want EOF", err)
			}
		})
		t.Run("idle-after-request", func(t *testing.T) {
			c, r := s.rawConn(t)
			io.WriteString(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(r, nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /hello: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			if _, err := r.ReadByte(); err != io.EOF {
				t.Fatalf("an idle keep-alive connection: read %v; want EOF after the idle timeout", err)
			}
		})
	})
}

// TestShutdownWaitsForRequest: Shutdown closes a connection waiting for
// its next request at once, lets a request being served finish (its reply
// says Connection: close), and only then returns.
func TestShutdownWaitsForRequest(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		entered, release := make(chan struct{}), make(chan struct{})
		s := startServer(t, opts, func(h *server.Hertz) {
			routes(h)
			h.GET("/slow", func(ctx context.Context, c *app.RequestContext) {
				close(entered)
				<-release
				c.String(http.StatusOK, "slow done")
			})
		})

		// A keep-alive connection, idle after one request.
		idle, idleR := s.rawConn(t)
		io.WriteString(idle, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(idleR, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)

		// A request in flight.
		busy, busyR := s.rawConn(t)
		io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
		select {
		case <-entered:
		case <-time.After(bound):
			t.Fatal("the slow handler did not start")
		}

		shutDown := make(chan struct{})
		go func() {
			s.shutdown(t)
			close(shutDown)
		}()
		if _, err := idleR.ReadByte(); err != io.EOF {
			t.Fatalf("the idle connection during Shutdown: read %v; want EOF", err)
		}
		select {
		case <-shutDown:
			t.Fatal("Shutdown returned while a request was being served")
		default:
		}
		close(release)
		resp, err = http.ReadResponse(busyR, nil)
		if err != nil {
			t.Fatalf("the request in flight lost its reply: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(b) != "slow done" || !resp.Close {
			t.Fatalf("the request in flight got %d %q, close %v; want 200 \"slow done\", Connection: close", resp.StatusCode, b, resp.Close)
		}
		select {
		case <-shutDown:
		case <-time.After(bound):
			t.Fatal("Shutdown did not return after the last request")
		}
		if c, err := net.Dial("tcp", s.addr); err == nil {
			c.Close()
			t.Fatal("the server still accepts connections after Shutdown")
		}
	})
}

// TestCloseStopsAtOnce: Close ends the listener and every connection
// without waiting for a request being served.
func TestCloseStopsAtOnce(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		entered, release := make(chan struct{}), make(chan struct{})
		defer close(release)
		s := startServer(t, opts, func(h *server.Hertz) {
			h.GET("/slow", func(ctx context.Context, c *app.RequestContext) {
				close(entered)
				<-release
			})
		})
		c, r := s.rawConn(t)
		io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
		<-entered
		if err := s.tr.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := r.ReadByte(); err == nil {
			t.Fatal("the connection still delivers bytes after Close")
		}
		select {
		case err := <-s.done:
			if err != nil {
				t.Fatalf("Run returned %v after Close; want nil", err)
			}
			close(s.down) // Run returned: Hertz's Shutdown would refuse
		case <-time.After(bound):
			t.Fatal("Run did not return after Close")
		}
	})
}

// TestSenseClientDisconnection: with the option, a handler's context ends
// when its client goes away.
func TestSenseClientDisconnection(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		entered, cancelled := make(chan struct{}), make(chan struct{})
		s := startServer(t, opts, func(h *server.Hertz) {
			h.GET("/wait", func(ctx context.Context, c *app.RequestContext) {
				close(entered)
				select {
				case <-ctx.Done():
					close(cancelled)
				case <-time.After(bound):
				}
			})
			routes(h)
		}, server.WithSenseClientDisconnection(true))

		// Requests on a connection that stays still work as usual.
		code, body, err := httpDo(httpClient(t), "POST", s.url("/echo"), []byte("still here"))
		if err != nil || code != http.StatusOK || string(body) != "still here" {
			t.Fatalf("POST /echo: %d %q %v", code, body, err)
		}

		c, _ := s.rawConn(t)
		io.WriteString(c, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
		<-entered
		c.Close()
		select {
		case <-cancelled:
		case <-time.After(bound):
			t.Fatal("the handler's context was not cancelled when its client left")
		}
	})
}

type ctxKey struct{}

// TestOnAcceptOnConnect: the hooks run once per connection, before its
// first request, and the context they return reaches the handlers.
func TestOnAcceptOnConnect(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		accepted, connected := make(chan net.Addr, 10), make(chan net.Addr, 10)
		s := startServer(t, opts, func(h *server.Hertz) {
			h.GET("/value", func(ctx context.Context, c *app.RequestContext) {
				v, _ := ctx.Value(ctxKey{}).(string)
				c.String(http.StatusOK, v)
			})
		},
			server.WithOnAccept(func(conn net.Conn) context.Context {
				accepted <- conn.RemoteAddr()
				return context.WithValue(context.Background(), ctxKey{}, "accepted")
			}),
			server.WithOnConnect(func(ctx context.Context, conn network.Conn) context.Context {
				connected <- conn.RemoteAddr()
				v, _ := ctx.Value(ctxKey{}).(string)
				return context.WithValue(ctx, ctxKey{}, v+"+connected")
			}))
		c, r := s.rawConn(t)
		for range 3 {
			io.WriteString(c, "GET /value HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if string(b) != "accepted+connected" {
				t.Fatalf("the handler's context holds %q; want \"accepted+connected\"", b)
			}
		}
		if len(accepted) != 1 || len(connected) != 1 {
			t.Fatalf("OnAccept ran %d times, OnConnect %d, for one connection; want 1 each", len(accepted), len(connected))
		}
		if a := <-accepted; a.String() != c.LocalAddr().String() {
			t.Fatalf("OnAccept saw peer %v; want %v", a, c.LocalAddr())
		}
	})
}

// TestUnixSocket serves on a Unix socket.
func TestUnixSocket(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		path := filepath.Join(t.TempDir(), "hertz.sock")
		startServerOn(t, "unix", path, opts, routes)
		hc := &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", path)
			},
		}, Timeout: bound}
		defer hc.CloseIdleConnections()
		code, body, err := httpDo(hc, "GET", "http://unix/hello", nil)
		if err != nil || code != http.StatusOK || string(body) != "hello world" {
			t.Fatalf("GET /hello over a Unix socket: %d %q %v", code, body, err)
		}
	})
}

// TestGivenListener serves a listener from ringpoll.Listen passed with
// server.WithListener, and refuses any other kind.
func TestGivenListener(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		ln, err := ringpoll.Listen("tcp", "127.0.0.1:0", opts...)
		if err != nil {
			t.Fatal(err)
		}
		h := server.New(server.WithListener(ln), server.WithDisablePrintRoute(true),
			server.WithTransport(NewTransporterWith(opts...)))
		routes(h)
		done := make(chan error, 1)
		go func() { done <- h.Run() }()
		code, body, err := httpDo(httpClient(t), "GET", "http://"+ln.Addr().String()+"/hello", nil)
		if err != nil || code != http.StatusOK || string(body) != "hello world" {
			t.Fatalf("GET /hello: %d %q %v", code, body, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
	t.Run("net-listener", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		tr := NewTransporter(&config.Options{Listener: ln})
		err = tr.ListenAndServe(func(context.Context, any) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "ringpoll.Listen") {
			t.Fatalf("ListenAndServe on a net listener: %v; want an error naming ringpoll.Listen", err)
		}
	})
	t.Run("listen-config-control", func(t *testing.T) {
		tr := NewTransporter(&config.Options{Network: "tcp", Addr: "127.0.0.1:0",
			ListenConfig: &net.ListenConfig{Control: func(string, string, syscall.RawConn) error { return nil }}})
		err := tr.ListenAndServe(func(context.Context, any) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "Control") {
			t.Fatalf("ListenAndServe with a ListenConfig.Control: %v; want an error naming Control", err)
		}
	})
	t.Run("tls", func(t *testing.T) {
		tr := NewTransporter(&config.Options{Network: "tcp", Addr: "127.0.0.1:0", TLS: &tls.Config{}})
		err := tr.ListenAndServe(func(context.Context, any) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "WithTLS") {
			t.Fatalf("ListenAndServe with TLS options: %v; want an error naming WithTLS", err)
		}
	})
	t.Run("bad-address", func(t *testing.T) {
		tr := NewTransporter(&config.Options{Network: "tcp", Addr: "127.0.0.1:-1"})
		if err := tr.ListenAndServe(func(context.Context, any) error { return nil }); err == nil {
			t.Fatal("ListenAndServe on a bad address returned nil")
		}
	})
	t.Run("shutdown-first", func(t *testing.T) {
		tr := NewTransporter(&config.Options{Network: "tcp", Addr: "127.0.0.1:0"})
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := tr.ListenAndServe(func(context.Context, any) error { return nil }); err != nil {
			t.Fatalf("ListenAndServe after Shutdown: %v; want nil", err)
		}
		if tr.(*Transporter).Listener() != nil {
			t.Fatal("a transport shut down before it served has a listener")
		}
	})
}

// TestBadOption: a malformed ringpoll option fails ListenAndServe with
// ringpoll's error.
func TestBadOption(t *testing.T) {
	tr := NewTransporterWith(ringpoll.WithLoops(0))(&config.Options{Network: "tcp", Addr: "127.0.0.1:0"})
	err := tr.ListenAndServe(func(context.Context, any) error { return nil })
	if !errors.Is(err, ringpoll.ErrInvalidOption) {
		t.Fatalf("ListenAndServe with WithLoops(0): %v; want ErrInvalidOption", err)
	}
}

// TestIdleTimeoutSettings: with IdleTimeout 0 Hertz's server closes the
// connection after each response, as on netpoll; a negative one keeps it
// without a timeout.
func TestIdleTimeoutSettings(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		for _, tc := range []struct {
			idle      time.Duration
			wantClose bool
		}{{0, true}, {-1, false}} {
			t.Run(fmt.Sprint(tc.idle), func(t *testing.T) {
				s := startServer(t, opts, routes, server.WithIdleTimeout(tc.idle))
				c, r := s.rawConn(t)
				for i := range 2 {
					io.WriteString(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
					resp, err := http.ReadResponse(r, nil)
					if err != nil {
						t.Fatalf("request %d: %v", i, err)
					}
					io.Copy(io.Discard, resp.Body)
					if tc.wantClose {
						if _, err := r.ReadByte(); err != io.EOF {
							t.Fatalf("after the response: read %v; want EOF", err)
						}
						return
					}
				}
			})
		}
	})
}

// TestKeepAliveTimeout: accepted connections get TCP keep-alive probes at
// KeepAliveTimeout.
func TestKeepAliveTimeout(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		type probe struct{ on, idle, intvl int }
		got := make(chan probe, 1)
		s := startServer(t, opts, routes,
			server.WithKeepAliveTimeout(7*time.Second),
			server.WithOnConnect(func(ctx context.Context, conn network.Conn) context.Context {
				raw, _ := conn.(*Conn).Ringpoll().SyscallConn()
				var p probe
				raw.Control(func(fd uintptr) {
					p.on, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
					p.idle, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
					p.intvl, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL)
				})
				got <- p
				return ctx
			}))
		code, _, err := httpDo(httpClient(t), "GET", s.url("/hello"), nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /hello: %d %v", code, err)
		}
		if p := <-got; p != (probe{1, 7, 7}) {
			t.Fatalf("SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL = %d, %d, %d; want 1, 7, 7", p.on, p.idle, p.intvl)
		}
	})
}
