package ringpoll

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

var (
	_ io.ByteReader = (*Reader)(nil)
	_ io.ByteWriter = (*Writer)(nil)
)

// TestReaderWriterBytes: ReadByte, ReadString and WriteByte, netpoll's
// names, read and write what they say on every engine, and ReadByte ends
// with io.EOF.
func TestReaderWriterBytes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp")
		got := make(chan string, 1)
		srv, err := NewServer(func(ctx context.Context, c *Conn) error {
			r, w := c.Reader(), c.Writer()
			first, err := r.ReadByte()
			if err != nil {
				return err
			}
			word, err := r.ReadString(5)
			if err != nil {
				return err
			}
			w.WriteByte('[')
			w.WriteString(word)
			w.WriteByte(first)
			w.WriteByte(']')
			if err := w.Flush(); err != nil {
				return err
			}
			_, err = r.ReadByte()
			got <- string(first) + word + " then " + errString(err)
			return io.EOF
		}, WithEngine(e))
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		defer srv.Shutdown(context.Background())
		c := tsDialStd(t, "tcp", ln.Addr().String())
		if _, err := c.Write([]byte("Xhello")); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, 8)
		if _, err := io.ReadFull(c, reply); err != nil || string(reply) != "[helloX]" {
			t.Fatalf("reply %q, %v; want [helloX]", reply, err)
		}
		c.(interface{ CloseWrite() error }).CloseWrite()
		if s := tsRecv(t, got, "the handler"); s != "Xhello then EOF" {
			t.Errorf("handler saw %q", s)
		}
	})
}

func errString(err error) string {
	if err == io.EOF {
		return "EOF"
	}
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestCloseCallbacks: callbacks added with AddCloseCallback run once,
// last added first, after the connection closed, whoever closed it: the
// Server after the peer closed (after the handler returned), Close on a
// dialed connection (only then: the peer's close is not enough), and
// Shutdown (which returns after them). One added afterwards runs too.
// IsActive turns false once the connection is closed or its input ended.
func TestCloseCallbacks(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		t.Run("peer closes a Server's connection", func(t *testing.T) {
			ln := listen(t, e, "tcp")
			ran := make(chan string, 4)
			var inHandler atomic.Int32
			var added atomic.Bool
			tsServeHandler(t, ln, func(ctx context.Context, c *Conn) error {
				inHandler.Add(1)
				defer inHandler.Add(-1)
				if !c.IsActive() {
					ran <- "handler saw IsActive false"
				}
				if !added.Swap(true) {
					for _, name := range []string{"first", "second"} {
						c.AddCloseCallback(func(c *Conn) error {
							if inHandler.Load() != 0 || c.IsActive() {
								name += " (while the handler ran, or active)"
							}
							ran <- name
							return nil
						})
					}
				}
				return tsEchoHandler(ctx, c)
			})
			client := tsDialStd(t, "tcp", ln.Addr().String())
			client.SetDeadline(time.Now().Add(tsTimeout))
			if _, err := client.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(client, make([]byte, 4)); err != nil {
				t.Fatal(err)
			}
			client.Close()
			if got := tsRecv(t, ran, "the close callbacks") + ", " + tsRecv(t, ran, "the second callback"); got != "second, first" {
				t.Errorf("callbacks ran as %q, want \"second, first\"", got)
			}
		})

		t.Run("Close of a dialed connection", func(t *testing.T) {
			c, peer := tsPair(t, e, "tcp", tsDialed)
			ran := make(chan string, 4)
			c.AddCloseCallback(func(*Conn) error { ran <- "before"; return nil })
			c.AddCloseCallback(nil) // ignored
			if !c.IsActive() {
				t.Fatal("a fresh connection is not active")
			}
			peer.Close()
			c.SetReadDeadline(time.Now().Add(tsTimeout))
			if _, err := c.Reader().Next(1); err != io.EOF {
				t.Fatalf("Next after the peer closed: %v, want io.EOF", err)
			}
			if c.IsActive() {
				t.Error("active after its input ended")
			}
			select {
			case s := <-ran:
				t.Fatalf("callback %q ran before Close", s)
			default:
			}
			c.Close()
			if s := tsRecv(t, ran, "the callback after Close"); s != "before" {
				t.Fatalf("ran %q", s)
			}
			<-c.fd.Done()
			c.AddCloseCallback(func(*Conn) error { ran <- "after"; return nil })
			if s := tsRecv(t, ran, "a callback added after the close"); s != "after" {
				t.Fatalf("ran %q", s)
			}
			select {
			case s := <-ran:
				t.Fatalf("callback %q ran twice", s)
			default:
			}
		})

		t.Run("Shutdown", func(t *testing.T) {
			ln := listen(t, e, "tcp")
			ran := make(chan string, 1)
			srv, err := NewServer(func(ctx context.Context, c *Conn) error {
				c.AddCloseCallback(func(*Conn) error { ran <- "shutdown"; return nil })
				return tsEchoHandler(ctx, c)
			}, WithEngine(e))
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			client := tsDialStd(t, "tcp", ln.Addr().String())
			client.SetDeadline(time.Now().Add(tsTimeout))
			client.Write([]byte("x"))
			if _, err := io.ReadFull(client, make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
			shut := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), tsTimeout)
				defer cancel()
				shut <- srv.Shutdown(ctx)
			}()
			// Shutdown shuts the writing side; the client then closes,
			// and the Server closes the connection.
			if n, err := client.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("client read %d bytes, %v; want io.EOF", n, err)
			}
			client.Close()
			if err := tsRecv(t, shut, "Shutdown"); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			select {
			case <-ran:
			default:
				t.Fatal("Shutdown returned before the close callback ran")
			}
			tsRecv(t, served, "Serve to return")
		})
	})
}

// TestSliceAfterClose: a Reader from Slice keeps its bytes after the
// connection's Reader released and the connection closed, and its
// Release gives the memory back (provided buffers back in the ring); one
// dropped without Release is cleaned up by the garbage collector, its
// provided buffers retired rather than reused.
func TestSliceAfterClose(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, drop := range []bool{false, true} {
			name := "released"
			if drop {
				name = "dropped"
			}
			t.Run(name, func(t *testing.T) {
				// One loop, so that the echo traffic below takes the
				// same loop's buffers.
				ln := listen(t, e, "tcp", WithLoops(1))
				echo := listen(t, e, "tcp", WithLoops(1))
				tsServeEcho(t, echo, tsHandler)
				retired := ltRetired(ln)
				peer := tsDialStd(t, "tcp", ln.Addr().String())
				c, err := ln.AcceptConn()
				if err != nil {
					t.Fatal(err)
				}
				want := tsRandom(7, 20000)
				if _, err := peer.Write(want); err != nil {
					t.Fatal(err)
				}
				c.SetReadDeadline(time.Now().Add(tsTimeout))
				s, err := c.Reader().Slice(len(want))
				if err != nil {
					t.Fatal(err)
				}
				got, _ := s.Next(s.Len())
				c.Reader().Release()
				c.Close()
				<-c.fd.Done()
				// More traffic on the engine takes buffers from the ring.
				ltEchoOthers(t, echo.Addr().String())
				if !bytes.Equal(got, want) {
					t.Fatalf("the Slice's bytes differ from byte %d after its connection closed", firstDiff(got, want))
				}
				if !drop {
					s.Release()
					ufBuffersBack(t, ln)
					if n := ltRetired(ln) - retired; n != 0 {
						t.Fatalf("%d buffers retired after a Release", n)
					}
					return
				}
				s, got = nil, nil
				tsEventually(t, "the dropped Slice's buffers to come back", func() bool {
					runtime.GC()
					for _, st := range loopStatsOf(ln) {
						if st.BuffersOut != 0 {
							return false
						}
					}
					return true
				})
				if isProactor(e) && ltRetired(ln) == retired {
					t.Fatal("no buffer retired: a dropped Slice's provided buffers went back for reuse")
				}
			})
		}
	})
}
