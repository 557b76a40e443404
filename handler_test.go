//go:build linux

package ringpoll

import (
	"bytes"
	"context"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startServer serves ln with h until the test ends.
func startServer(t *testing.T, ln *Listener, h Handler, opts ...Option) *Server {
	t.Helper()
	srv, err := NewServer(h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	return srv
}

// pattern returns n bytes whose value depends on their position, so a byte
// from a recycled buffer shows up as a mismatch.
func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>13)
	}
	return p
}

// TestHandlerNocopyEchoQueued checks the netpoll echo (Next, WriteBinary,
// Flush, Release) when Flush cannot send everything: the client writes 8 MiB
// before it reads anything, so the server's Flush meets a full socket while
// its Writer links input slices of 4 KiB and more, and the handler then
// releases those slices for reuse. Every byte must come back unchanged, and
// the output queue must have been used (else the test proved nothing).
func TestHandlerNocopyEchoQueued(t *testing.T) {
	const size = 8 << 20
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp", WithOutputHighWater(256<<10))
		var server atomic.Pointer[Conn]
		startServer(t, ln, func(ctx context.Context, c *Conn) error {
			server.Store(c)
			r, w := c.Reader(), c.Writer()
			// Pieces of at most 16 KiB mostly lie within one input node,
			// so Next returns node memory (a span over nodes is copied)
			// and WriteBinary links it (from 4 KiB).
			for r.Len() > 0 {
				b, err := r.Next(min(r.Len(), 16<<10))
				if err != nil {
					return err
				}
				w.WriteBinary(b)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return r.Release()
		})
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		want := pattern(size)
		werr := make(chan error, 1)
		go func() {
			_, err := c.Write(want)
			werr <- err
		}()

		// Read nothing until the server had to queue output.
		queued := 0
		deadline := time.Now().Add(20 * time.Second)
		for queued == 0 && time.Now().Before(deadline) {
			if s := server.Load(); s != nil {
				queued = s.fd.OutputQueued()
			}
			runtime.Gosched()
		}
		if queued == 0 {
			t.Fatal("the server never queued output: the EAGAIN path was not exercised")
		}
		got := make([]byte, size)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("reading the echo: %v", err)
		}
		if err := <-werr; err != nil {
			t.Fatalf("client write: %v", err)
		}
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("echo differs from byte %d (output queue peaked at least %d)", i, queued)
		}
	})
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestHandlerOneAtATime floods connections with small writes and checks that
// the handler never runs twice at once for one connection and that it sees
// every byte, in order.
func TestHandlerOneAtATime(t *testing.T) {
	const conns, writes, size = 4, 2000, 13
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp")
		var (
			mu      sync.Mutex
			active  = map[*Conn]int{}
			overlap atomic.Int64
			seen    atomic.Int64
			order   atomic.Int64 // bytes out of sequence
		)
		next := map[*Conn]byte{}
		total := int64(conns * writes * size)
		all := make(chan struct{}) // closed when the handlers saw every byte
		startServer(t, ln, func(ctx context.Context, c *Conn) error {
			mu.Lock()
			active[c]++
			if active[c] > 1 {
				overlap.Add(1)
			}
			mu.Unlock()
			r := c.Reader()
			b, err := r.Next(r.Len())
			if err != nil {
				return err
			}
			runtime.Gosched() // widen the window for a second run to start
			mu.Lock()
			for _, x := range b {
				if x != next[c] {
					order.Add(1)
				}
				next[c] = x + 1
			}
			active[c]--
			mu.Unlock()
			if seen.Add(int64(len(b))) == total {
				close(all)
			}
			return nil
		})
		var wg sync.WaitGroup
		for range conns {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				var v byte
				msg := make([]byte, size)
				for range writes {
					for i := range msg {
						msg[i] = v
						v++
					}
					if _, err := c.Write(msg); err != nil {
						t.Errorf("write: %v", err)
						return
					}
				}
			}()
		}
		wg.Wait()
		select {
		case <-all:
		case <-time.After(20 * time.Second):
			t.Fatalf("handlers saw %d bytes, want %d", seen.Load(), total)
		}
		if n := overlap.Load(); n != 0 {
			t.Errorf("the handler ran twice at once for one connection %d times", n)
		}
		if n := order.Load(); n != 0 {
			t.Errorf("%d bytes arrived out of order", n)
		}
	})
}

// TestHandlerInputReplacedWhileRunning checks that a pooled handler's
// progress is what it consumed, not what is left: while the handler runs on
// its first request, exactly as many bytes arrive as it took, followed by
// the peer's FIN. The input left after the call then equals the input
// before it; a server that judged progress by that length closed the
// connection with the second request unserved (seen as a truncated echo in
// TestStressBulkEcho). Every byte must come back, then EOF.
func TestHandlerInputReplacedWhileRunning(t *testing.T) {
	const size = 100
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp")
		first := make(chan *Conn, 1)
		resume := make(chan struct{})
		var calls atomic.Int32
		startServer(t, ln, func(ctx context.Context, c *Conn) error {
			r, w := c.Reader(), c.Writer()
			b, err := r.Next(r.Len())
			if err != nil {
				return err
			}
			w.WriteBinary(b)
			if calls.Add(1) == 1 {
				first <- c
				<-resume // the second request and the FIN are in
			}
			return w.Flush()
		})
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		msg := pattern(2 * size)
		if _, err := c.Write(msg[:size]); err != nil {
			t.Fatal(err)
		}
		var srv *Conn
		select {
		case srv = <-first:
		case <-time.After(20 * time.Second):
			t.Fatal("the handler never ran")
		}
		if _, err := c.Write(msg[size:]); err != nil {
			t.Fatal(err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		// Wait until the server holds the second request and the FIN, as
		// much input as the handler consumed, all while it runs.
		deadline := time.Now().Add(20 * time.Second)
		for {
			n, _, ended := srv.fd.InputState()
			if n == size && ended {
				break
			}
			if time.Now().After(deadline) {
				close(resume)
				t.Fatalf("server input %d bytes, ended %v; want %d and ended", n, ended, size)
			}
			time.Sleep(time.Millisecond)
		}
		close(resume)
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
		if !bytes.Equal(got, msg) {
			t.Errorf("echo: got %d bytes (first difference at %d), want %d", len(got), firstDiff(got, msg), len(msg))
		}
		if n := calls.Load(); n != 2 {
			t.Errorf("handler ran %d times, want 2", n)
		}
	})
}
