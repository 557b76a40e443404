//go:build linux

package ringpoll

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestShutdownUnderLoad: Shutdown while clients pipeline requests as fast
// as they can, a quarter of them reading their replies slowly. Every request the server read gets its whole reply (the
// count of replies a client got equals the count of its requests the
// handler consumed, and no reply is cut short), Shutdown drains every
// connection and returns nil within its context, and nothing leaks (TestMain checks goroutines and fds; here,
// every provided buffer is back).
func TestShutdownUnderLoad(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		const clients = 32
		var consumed sync.Map // client address -> *atomic.Int64
		handler := func(ctx context.Context, c *Conn) error {
			n, _ := consumed.LoadOrStore(c.RemoteAddr().String(), new(atomic.Int64))
			r, w := c.Reader(), c.Writer()
			answered := false
			for r.Len() >= 4 {
				h, err := r.Peek(4)
				if err != nil {
					return err
				}
				size := int(binary.BigEndian.Uint32(h))
				if r.Len() < 4+size {
					break
				}
				req, err := r.Next(4 + size)
				if err != nil {
					return err
				}
				out, err := w.Malloc(4 + size)
				if err != nil {
					return err
				}
				copy(out, req)
				n.(*atomic.Int64).Add(1)
				answered = true
			}
			if !answered {
				return nil
			}
			if err := w.Flush(); err != nil {
				return err
			}
			return r.Release()
		}
		// The input a connection holds bounds what it is owed at
		// Shutdown, and so the replies its client must take before the
		// drain ends: at the default mark a client slowed by -race on a
		// busy machine can outlast the default drain timeout and be
		// reset. 64 KiB keeps the backlog small, and the drain timeout,
		// like the context, only bounds a hang.
		srv, err := NewServer(handler, WithEngine(e), WithInputHighWater(64<<10), WithDrainTimeout(tsTimeout))
		if err != nil {
			t.Fatal(err)
		}
		ln := listen(t, e, "tcp")
		serveErr := make(chan error, 1)
		go func() { serveErr <- srv.Serve(ln) }()

		results := make(chan shutdownResult, clients)
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results <- shutdownClient(ln.Addr().String(), i)
			}()
		}
		// Shutdown once the load is under way: the handler has answered
		// a good number of requests.
		tsEventually(t, "the load to build up", func() bool {
			var n int64
			consumed.Range(func(_, v any) bool {
				n += v.(*atomic.Int64).Load()
				return true
			})
			return n >= 2000
		})
		// The context only bounds a hang: draining must end well within
		// it, or Shutdown closes connections under their replies and
		// returns its error. The clients' deadline is later still.
		ctx, cancel := context.WithTimeout(context.Background(), tsTimeout)
		defer cancel()
		t0 := time.Now()
		shut := make(chan error, 1)
		go func() { shut <- srv.Shutdown(ctx) }()
		select {
		case err = <-shut:
		case <-time.After(2 * tsTimeout):
			t.Fatalf("Shutdown did not return %v after its %v context ended", tsTimeout, tsTimeout)
		}
		took := time.Since(t0)
		t.Logf("Shutdown: %v after %v", err, took)
		if err != nil {
			t.Errorf("Shutdown returned %v after %v, want nil: every connection drained within the %v context", err, took, tsTimeout)
		}
		tsWait(t, "the clients to end", wg.Wait)
		close(results)
		var replies int64
		unserved := 0
		for r := range results {
			replies += r.replies
			if r.replies == 0 {
				unserved++ // not yet accepted or read when Shutdown began
			}
			if r.mismatch != "" || r.partial != 0 {
				t.Errorf("client %s: mismatch %q, %d bytes of a cut reply", r.addr, r.mismatch, r.partial)
			}
			var read int64
			if n, ok := consumed.Load(r.addr); ok {
				read = n.(*atomic.Int64).Load()
			}
			if r.replies != read {
				t.Errorf("client %s: the server read %d requests, the client got %d replies (sent %d; ended by %v)",
					r.addr, read, r.replies, r.sent, r.err)
			}
		}
		t.Logf("%d replies in all; %d of %d clients had none read when Shutdown began", replies, unserved, clients)
		if err := tsRecv(t, serveErr, "Serve to return"); !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		for _, s := range loopStatsOf(ln) {
			if s.BuffersOut != 0 {
				t.Errorf("loop %d: %d provided buffers still out after Shutdown", s.Loop, s.BuffersOut)
			}
		}
	})
}

// shutdownResult is what one client of TestShutdownUnderLoad saw.
type shutdownResult struct {
	addr     string // the client's address, the server's RemoteAddr
	sent     int64  // requests written
	replies  int64  // whole, correct replies read
	partial  int    // bytes of a reply cut short at the end
	mismatch string // a reply that differs from its request
	err      error  // what ended the reading
}

// shutdownClient pipelines length-prefixed requests on one connection
// until the server closes it, checking every reply. Its deadline, 3 ×
// tsTimeout, is past the test's bounds on the load building up and on
// Shutdown, so only a hang meets it.
func shutdownClient(addr string, id int) (res shutdownResult) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		res.err = err
		return res
	}
	defer c.Close()
	res.addr = c.LocalAddr().String()
	c.SetDeadline(time.Now().Add(3 * tsTimeout))
	sizes := make(chan int, 1<<16) // payload sizes sent, in order
	frame := func(seq int64, size int) []byte {
		b := make([]byte, 4+size)
		binary.BigEndian.PutUint32(b, uint32(size))
		for i := range size {
			b[4+i] = byte(int64(id)*31 + seq*7 + int64(i))
		}
		return b
	}
	var sent atomic.Int64
	go func() {
		defer close(sizes)
		for seq := int64(0); ; seq++ {
			size := 16 + int(seq*97+int64(id)*13)%8000
			if _, err := c.Write(frame(seq, size)); err != nil {
				return
			}
			sent.Add(1)
			select {
			case sizes <- size:
			default:
				return // far ahead of the replies: stop sending
			}
		}
	}()
	hdr := make([]byte, 4)
	for seq := int64(0); ; seq++ {
		size, ok := <-sizes
		if !ok {
			// The writer stopped; replies may still come.
			size = -1
		}
		if _, err := io.ReadFull(c, hdr); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				res.partial = 1
			}
			res.err = err
			break
		}
		n := int(binary.BigEndian.Uint32(hdr))
		body := make([]byte, n)
		if k, err := io.ReadFull(c, body); err != nil {
			res.partial = 4 + k
			res.err = err
			break
		}
		if want := frame(seq, max(size, 0))[4:]; size < 0 || !bytes.Equal(body, want) {
			res.mismatch = fmt.Sprintf("reply %d: %d bytes, want %d", seq, n, size)
			break
		}
		res.replies++
		if id%4 == 0 && seq%16 == 0 {
			// A slow reader: replies pile up in the server's socket, and
			// Shutdown must not close it under them.
			time.Sleep(2 * time.Millisecond)
		}
	}
	res.sent = sent.Load()
	return res
}
