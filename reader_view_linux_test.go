package ringpoll

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// acceptedPair returns a server-side Conn on e and a std client connected
// to it.
func acceptedPair(t *testing.T, e Engine) (*Conn, net.Conn) {
	t.Helper()
	ln := listen(t, e, "tcp")
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c, err := ln.AcceptConn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, client
}

// TestReaderViewConsumes checks that the bytes a Reader takes without the
// input's lock (from its view of one input node) count as consumed for
// every other way of reading: Len at once, and a Conn.Read, a Release
// followed by more Next calls, WriteTo and Until afterwards, on every
// engine.
func TestReaderViewConsumes(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		c, client := acceptedPair(t, e)
		r := c.Reader()
		msg := []byte("0123456789abcdefghij")
		if _, err := client.Write(msg); err != nil {
			t.Fatal(err)
		}
		if p, err := r.Peek(2); err != nil || string(p) != "01" {
			t.Fatalf("Peek(2) = %q, %v", p, err)
		}
		// The remaining bytes arrived in one write; wait until the
		// connection holds them all, so the next calls find them.
		if p, err := r.Peek(len(msg)); err != nil || !bytes.Equal(p, msg) {
			t.Fatalf("Peek(%d) = %q, %v", len(msg), p, err)
		}
		for i, want := range []string{"0123", "4", "56"} {
			p, err := r.Next(len(want))
			if err != nil || string(p) != want {
				t.Fatalf("Next %d = %q, %v; want %q", i, p, err, want)
			}
		}
		if err := r.Skip(1); err != nil { // the 7
			t.Fatal(err)
		}
		if n := r.Len(); n != len(msg)-8 {
			t.Fatalf("Len = %d after taking 8 of %d bytes", n, len(msg))
		}
		if p, err := r.Peek(2); err != nil || string(p) != "89" {
			t.Fatalf("Peek(2) = %q, %v after taking 8", p, err)
		}
		buf := make([]byte, 4)
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "89ab" {
			t.Fatalf("Read = %q, %v; want 89ab", buf[:n], err)
		}
		if p, err := r.Next(3); err != nil || string(p) != "cde" {
			t.Fatalf("Next(3) after Read = %q, %v", p, err)
		}
		if err := r.Release(); err != nil {
			t.Fatal(err)
		}
		if p, err := r.Next(2); err != nil || string(p) != "fg" {
			t.Fatalf("Next(2) after Release = %q, %v", p, err)
		}
		if _, err := client.Write([]byte("\nrest")); err != nil {
			t.Fatal(err)
		}
		if p, err := r.Until('\n'); err != nil || string(p) != "hij\n" {
			t.Fatalf("Until = %q, %v", p, err)
		}
		if p, err := r.Next(1); err != nil || string(p) != "r" {
			t.Fatalf("Next(1) after Until = %q, %v", p, err)
		}
		client.(*net.TCPConn).CloseWrite()
		var out bytes.Buffer
		if _, err := c.WriteTo(&out); err != nil || out.String() != "est" {
			t.Fatalf("WriteTo = %q, %v; want est", out.String(), err)
		}
	})
}

// TestReaderViewHonoursDeadlineAndClose checks that buffered bytes a
// Reader could take from its view are refused, as a locked read refuses
// them, once the read deadline passed or the connection is closed.
func TestReaderViewHonoursDeadlineAndClose(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		c, client := acceptedPair(t, e)
		r := c.Reader()
		if _, err := client.Write([]byte("abcdefgh")); err != nil {
			t.Fatal(err)
		}
		if p, err := r.Peek(8); err != nil || string(p) != "abcdefgh" {
			t.Fatalf("Peek(8) = %q, %v", p, err)
		}
		if p, err := r.Next(2); err != nil || string(p) != "ab" {
			t.Fatalf("Next(2) = %q, %v", p, err)
		}
		c.SetReadDeadline(time.Now().Add(-time.Second))
		if _, err := r.Next(2); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Next after the deadline: %v, want a timeout", err)
		}
		if _, err := r.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Peek after the deadline: %v, want a timeout", err)
		}
		c.SetReadDeadline(time.Time{})
		// The bytes taken before the deadline stay taken.
		if p, err := r.Next(2); err != nil || string(p) != "cd" {
			t.Fatalf("Next(2) after clearing the deadline = %q, %v", p, err)
		}
		c.Close()
		if _, err := r.Next(1); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Next after Close: %v, want net.ErrClosed", err)
		}
		if n := r.Len(); n < 0 {
			t.Fatalf("Len after Close = %d", n)
		}
		r.Release()
	})
}

// TestHandlerViewProgress checks that what a handler takes from its view
// counts as progress for the Server: a handler that answers one frame a
// call and returns without Release is called again for the next frame,
// and never sees a frame twice, with the frames in one segment.
func TestHandlerViewProgress(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp")
		startServer(t, ln, func(ctx context.Context, c *Conn) error {
			r, w := c.Reader(), c.Writer()
			h, err := r.Peek(1)
			if err != nil {
				return err
			}
			n := int(h[0])
			if r.Len() < 1+n {
				return nil
			}
			f, err := r.Next(1 + n)
			if err != nil {
				return err
			}
			w.WriteBinary(f[1:])
			w.WriteByte('|')
			return w.Flush()
		})
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		var frames []byte
		var want bytes.Buffer
		for i := range 50 {
			body := bytes.Repeat([]byte{'a' + byte(i%26)}, 1+i%7)
			frames = append(append(frames, byte(len(body))), body...)
			want.Write(body)
			want.WriteByte('|')
		}
		if _, err := client.Write(frames); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, want.Len())
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := io.ReadFull(client, got); err != nil {
			t.Fatalf("replies: %v after %q", err, got[:n])
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("replies differ at byte %d:\n got %q\nwant %q", firstDiff(got, want.Bytes()), got, want.Bytes())
		}
	})
}
