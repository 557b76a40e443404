//go:build linux

package hertz

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll"
)

// TestHeldAfterClose: slices that the adapter's Peek and Next return
// (after zero-length calls too, as Hertz's parser makes them) keep their
// bytes after the connection is closed while other connections of the
// same loop cycle every buffer of its small ring.
func TestHeldAfterClose(t *testing.T) {
	const held = 4000
	paths := []struct {
		name string
		take func(c *Conn) ([]byte, error)
	}{
		{"next", func(c *Conn) ([]byte, error) { return c.Next(held) }},
		{"peek0-next", func(c *Conn) ([]byte, error) {
			if _, err := c.Peek(0); err != nil {
				return nil, err
			}
			return c.Next(held)
		}},
		{"next0-peek", func(c *Conn) ([]byte, error) {
			if _, err := c.Next(0); err != nil {
				return nil, err
			}
			return c.Peek(held)
		}},
		{"skip0-next", func(c *Conn) ([]byte, error) {
			if err := c.Skip(0); err != nil {
				return nil, err
			}
			return c.Next(held)
		}},
	}
	forEachEngineOf(t, func(t *testing.T, e ringpoll.Engine, opts []ringpoll.Option) {
		// A small ring where the engine receives into one: epoll and
		// uring-reactor, which read into memory of their own, refuse it.
		if e != ringpoll.EngineEpoll && e != ringpoll.EngineUringReactor {
			opts = append(opts, ringpoll.WithBufferRing(8, 4096))
		}
		echo := heldEchoServer(t, opts)
		for _, p := range paths {
			t.Run(p.name, func(t *testing.T) {
				std, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer std.Close()
				nc, err := NewDialer(opts...).DialConnection("tcp", std.Addr().String(), bound, nil)
				if err != nil {
					t.Fatal(err)
				}
				c := nc.(*Conn)
				defer c.Close()
				peer, err := std.Accept()
				if err != nil {
					t.Fatal(err)
				}
				defer peer.Close()
				want := bytes.Repeat([]byte{'v'}, held)
				if _, err := peer.Write(want); err != nil {
					t.Fatal(err)
				}
				// All the bytes in first, so that a zero-length call
				// finds them.
				c.SetReadTimeout(bound)
				for n := c.Len(); n < held; n = c.Len() {
					if _, err := c.Peek(n + 1); err != nil {
						t.Fatal(err)
					}
				}
				b, err := p.take(c)
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
				heldCycle(t, echo)
				if !bytes.Equal(b, want) {
					i := bytes.IndexFunc(b, func(r rune) bool { return r != 'v' })
					t.Errorf("the held slice changed after Close: byte %d is %q: another connection's bytes", i, b[i])
				}
				c.Release()
			})
		}
	})
}

// heldEchoServer starts a ringpoll echo server with opts (the engine and
// ring of the connection under test), stopped at the end of the test.
func heldEchoServer(t *testing.T, opts []ringpoll.Option) string {
	t.Helper()
	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ringpoll.NewServer(func(ctx context.Context, c *ringpoll.Conn) error {
		r, w := c.Reader(), c.Writer()
		b, _ := r.Next(r.Len())
		w.WriteBinary(b)
		err := w.Flush()
		r.Release()
		return err
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// heldCycle echoes 256 KiB through each of four connections to addr: many
// times the ring's bytes.
func heldCycle(t *testing.T, addr string) {
	t.Helper()
	for i := range 4 {
		c, err := net.DialTimeout("tcp", addr, bound)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(bound))
		data := bytes.Repeat([]byte{'a' + byte(i)}, 256<<10)
		errc := make(chan error, 1)
		go func() {
			_, err := c.Write(data)
			errc <- err
		}()
		got := make([]byte, len(data))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("echo %d: %v", i, err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}
