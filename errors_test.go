//go:build linux

package ringpoll

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestErrors: every error a caller can meet is an exported value, or one
// of net's (net.ErrClosed, os.ErrDeadlineExceeded) or
// errors.ErrUnsupported, or wraps one (the errors of arguments no correct
// program passes wrap an unexported value), and I/O errors on a connection
// come in a *net.OpError, as net's do.
func TestErrors(t *testing.T) {
	type check struct {
		name   string
		err    func(t *testing.T, c *Conn) error
		want   []error // each must match (errors.Is)
		opErr  bool    // in a *net.OpError
		noConn bool    // needs no connection: run once
	}
	checks := []check{
		{name: "Next(-1)", err: func(_ *testing.T, c *Conn) error { _, err := c.Reader().Next(-1); return err }, want: []error{errNegativeCount}},
		{name: "Peek(-1)", err: func(_ *testing.T, c *Conn) error { _, err := c.Reader().Peek(-1); return err }, want: []error{errNegativeCount}},
		{name: "Skip(-1)", err: func(_ *testing.T, c *Conn) error { return c.Reader().Skip(-1) }, want: []error{errNegativeCount}},
		{name: "Malloc(-1)", err: func(_ *testing.T, c *Conn) error { _, err := c.Writer().Malloc(-1); return err }, want: []error{errNegativeCount}},
		{name: "Slice(-1)", err: func(_ *testing.T, c *Conn) error { _, err := c.Reader().Slice(-1); return err }, want: []error{errNegativeCount}},
		{name: "MallocAck(-1)", err: func(_ *testing.T, c *Conn) error { return c.Writer().MallocAck(-1) }, want: []error{errNegativeCount}},
		{name: "MallocAck past MallocLen", err: func(_ *testing.T, c *Conn) error {
			c.Writer().Malloc(3)
			return c.Writer().MallocAck(4)
		}, want: []error{errBeyondWritten}},
		{name: "WriteDirect past MallocLen", err: func(_ *testing.T, c *Conn) error { return c.Writer().WriteDirect([]byte("x"), 1) }, want: []error{errBeyondWritten}},
		{name: "LinkBuffer.MallocAck past MallocLen", noConn: true, err: func(*testing.T, *Conn) error { return NewLinkBuffer().MallocAck(1) }, want: []error{errBeyondWritten}},
		{name: "LinkBuffer.WriteDirect(-1)", noConn: true, err: func(*testing.T, *Conn) error { return NewLinkBuffer().WriteDirect([]byte("x"), -1) }, want: []error{errNegativeCount}},
		{name: "write after CloseWrite", err: func(t *testing.T, c *Conn) error {
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			_, err := c.Write([]byte("x"))
			return err
		}, want: []error{ErrWriteClosed, syscall.EPIPE}, opErr: true},
		{name: "Flush after CloseWrite", err: func(t *testing.T, c *Conn) error {
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			c.Writer().WriteString("x")
			return c.Writer().Flush()
		}, want: []error{ErrWriteClosed, syscall.EPIPE}, opErr: true},
		{name: "Read after Close", err: func(_ *testing.T, c *Conn) error {
			c.Close()
			_, err := c.Read(make([]byte, 1))
			return err
		}, want: []error{net.ErrClosed}, opErr: true},
		{name: "Next after Close", err: func(_ *testing.T, c *Conn) error {
			c.Close()
			_, err := c.Reader().Next(1)
			return err
		}, want: []error{net.ErrClosed}, opErr: true},
		{name: "Write after Close", err: func(_ *testing.T, c *Conn) error {
			c.Close()
			_, err := c.Write([]byte("x"))
			return err
		}, want: []error{net.ErrClosed}, opErr: true},
		{name: "second Close", err: func(_ *testing.T, c *Conn) error { c.Close(); return c.Close() }, want: []error{net.ErrClosed}, opErr: true},
		{name: "SetNoDelay after Close", err: func(_ *testing.T, c *Conn) error { c.Close(); return c.SetNoDelay(true) }, want: []error{net.ErrClosed}, opErr: true},
		{name: "read deadline", err: func(_ *testing.T, c *Conn) error {
			c.SetReadDeadline(time.Now().Add(-time.Second))
			_, err := c.Reader().Next(1)
			return err
		}, want: []error{os.ErrDeadlineExceeded}, opErr: true},
		{name: "RawConn Read", err: func(_ *testing.T, c *Conn) error {
			rc, _ := c.SyscallConn()
			return rc.Read(func(uintptr) bool { return true })
		}, want: []error{errors.ErrUnsupported}, opErr: true},
		{name: "WithLoops(0)", noConn: true, err: func(*testing.T, *Conn) error {
			_, err := Listen("tcp", "127.0.0.1:0", WithLoops(0))
			return err
		}, want: []error{ErrInvalidOption}},
		{name: "WithBufferRing(3, 4096)", noConn: true, err: func(*testing.T, *Conn) error {
			_, err := NewServer(tsEchoHandler, WithBufferRing(3, 4096))
			return err
		}, want: []error{ErrInvalidOption}},
		{name: "Dial with WithDrainTimeout(-1)", noConn: true, err: func(*testing.T, *Conn) error {
			_, err := Dial("tcp", "127.0.0.1:1", WithDrainTimeout(-1))
			return err
		}, want: []error{ErrInvalidOption}},
		{name: "ParseEngine", noConn: true, err: func(*testing.T, *Conn) error {
			_, err := ParseEngine("kqueue")
			return err
		}, want: []error{ErrInvalidOption}},
		{name: "NewServer(nil)", noConn: true, err: func(*testing.T, *Conn) error {
			_, err := NewServer(nil)
			return err
		}, want: []error{errNilHandler}},
		{name: "Serve a net listener", noConn: true, err: func(t *testing.T, _ *Conn) error {
			srv, err := NewServer(tsEchoHandler)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown(context.Background())
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			return srv.Serve(ln)
		}, want: []error{errListenerMismatch}},
		{name: "Serve a listener of another engine", noConn: true, err: func(t *testing.T, _ *Conn) error {
			srv, err := NewServer(tsEchoHandler, WithEngine(EngineEpoll))
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown(context.Background())
			needUring(t)
			return srv.Serve(listen(t, EngineUring, "tcp"))
		}, want: []error{errListenerMismatch}},
	}
	verify := func(t *testing.T, c check, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: %v does not match %v", c.name, err, w)
			}
		}
		var op *net.OpError
		if c.opErr != errors.As(err, &op) {
			t.Errorf("%s: %v (%T): in a *net.OpError is %v, want %v", c.name, err, err, !c.opErr, c.opErr)
		}
	}
	for _, c := range checks {
		if c.noConn {
			t.Run(c.name, func(t *testing.T) { verify(t, c, c.err(t, nil)) })
		}
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, c := range checks {
			if c.noConn {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				conn, _ := tsPair(t, e, "tcp", tsAccepted)
				verify(t, c, c.err(t, conn))
			})
		}
		t.Run("Until without the delimiter", func(t *testing.T) {
			conn, peer := tsPair(t, e, "tcp", tsAccepted, WithInputHighWater(4096))
			go peer.Write(make([]byte, 8192))
			conn.SetReadDeadline(time.Now().Add(tsTimeout))
			_, err := conn.Reader().Until('\n')
			verify(t, check{name: "Until", want: []error{ErrBufferFull}, opErr: true}, err)
		})
	})
}
