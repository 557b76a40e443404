//go:build linux

package ringpoll

// Tests of what an inline handler (WithInlineHandler) does instead of
// waiting. The rest of the suite runs the inline style too (tsStyles).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tsInlineFrames is an inline handler that answers 4-byte length-prefixed
// frames by reading them the blocking way, Peek for the header and Next for
// the whole frame, and lets ErrWouldBlock take it back to the loop.
func tsInlineFrames(wouldBlock *atomic.Int64) Handler {
	return func(ctx context.Context, c *Conn) error {
		r, w := c.Reader(), c.Writer()
		for {
			h, err := r.Peek(4)
			if err == nil {
				var f []byte
				if f, err = r.Next(4 + int(binary.BigEndian.Uint32(h))); err == nil {
					out, _ := w.Malloc(len(f))
					copy(out, f)
					if err = w.Flush(); err == nil {
						continue
					}
				}
			}
			if errors.Is(err, ErrWouldBlock) {
				wouldBlock.Add(1)
			}
			return err
		}
	}
}

// TestInlineFrames: an inline handler that reads whole frames with Peek and
// Next gets ErrWouldBlock for a partial one, is called again as the rest
// arrives, also for frames four times the input high-water mark, and every
// reply comes back exact and in order. A partial frame at the peer's EOF
// ends the connection.
func TestInlineFrames(t *testing.T) {
	const high = 64 << 10
	sizes := []int{0, 1, 100, 4 << 10, 60 << 10, 4 * high, 3, 200 << 10, 17}
	var sent bytes.Buffer
	for i, n := range sizes {
		binary.Write(&sent, binary.BigEndian, uint32(n))
		sent.Write(tsRandom(uint64(100+i), n))
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		var wouldBlock atomic.Int64
		ln := listen(t, e, "tcp", WithInputHighWater(high))
		tsServeHandler(t, ln, tsInlineFrames(&wouldBlock), WithInlineHandler())
		client := tsDialStd(t, "tcp", ln.Addr().String())
		client.SetDeadline(time.Now().Add(tsTimeout))
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(client)
			got <- b
		}()
		// Half a header first: the handler must be back on the loop, not
		// waiting, before the rest is sent.
		all := sent.Bytes()
		if _, err := client.Write(all[:2]); err != nil {
			t.Fatal(err)
		}
		tsEventually(t, "ErrWouldBlock for half a header", func() bool { return wouldBlock.Load() > 0 })
		// Then the rest in odd pieces, and a frame cut short by the EOF.
		for rest := all[2:]; len(rest) > 0; {
			n := min(len(rest), 7777)
			if _, err := client.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		client.Write([]byte{0, 0, 1, 0, 'x'})
		client.(interface{ CloseWrite() error }).CloseWrite()
		b := tsRecv(t, got, "the replies and EOF")
		if !bytes.Equal(b, all) {
			t.Errorf("got %d bytes of replies, want the %d bytes sent, byte for byte", len(b), len(all))
		}
		if n := wouldBlock.Load(); n < 2 {
			t.Errorf("the handler got ErrWouldBlock %d times, want several (frames larger than the reads)", n)
		}
	})
}

// TestInlineHoldBack: a client writes 16 MiB to an inline echo handler and
// reads nothing for a while. The handler's output queues without blocking
// the loop, the Server stops calling the handler while the queue is above
// its high-water mark (so the queue stays within the mark plus one call's
// output), and once the client reads, every byte comes back in order.
func TestInlineHoldBack(t *testing.T) {
	const (
		high  = 64 << 10
		total = 16 << 20
		// One handler call echoes at most what input held: the input
		// mark plus one read.
		bound = high + high + 64<<10
	)
	data := tsRandom(11, total)
	want := sha256.Sum256(data)
	forEachEngine(t, func(t *testing.T, e Engine) {
		conns := make(chan *Conn, 1)
		var once sync.Once
		var calledFull atomic.Int64
		ln := listen(t, e, "tcp", WithInputHighWater(high), WithOutputHighWater(high))
		tsServeHandler(t, ln, func(ctx context.Context, c *Conn) error {
			once.Do(func() { conns <- c })
			if c.fd.OutputFull() {
				calledFull.Add(1)
			}
			return tsEchoHandler(ctx, c)
		}, WithInlineHandler())
		client := tsDialStd(t, "tcp", ln.Addr().String())
		client.SetDeadline(time.Now().Add(2 * tsTimeout))
		werr := tsWriteAsync(client, data)
		c := tsRecv(t, conns, "the server connection")
		s := tsSample(c.fd.OutputQueued)
		tsEventually(t, "the handler to be held back", func() bool { return c.flagSet(connHeldBack) })
		// Held back, the connection stops reading: its input fills to
		// the mark and stays there.
		tsEventually(t, "input to reach the high-water mark", func() bool { return c.fd.InputHeld() >= high })
		h := sha256.New()
		if n, err := io.CopyN(h, client, total); err != nil {
			t.Fatalf("reading the echo: %d bytes, then %v", n, err)
		}
		max, samples := s.stop()
		if err := tsRecv(t, werr, "the client's write"); err != nil {
			t.Errorf("client write: %v", err)
		}
		if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
			t.Errorf("echo sha256 %x, sent %x", got, want)
		}
		if max > bound {
			t.Errorf("output queue reached %d bytes (%d samples), above %d (the mark plus one call's output)", max, samples, bound)
		}
		if n := calledFull.Load(); n != 0 {
			t.Errorf("the handler was called %d times with the output queue above its mark", n)
		}
		t.Logf("max queued %d bytes over %d samples", max, samples)
	})
}

// TestInlineNoWait: on an inline handler's connection, Conn.Read with
// nothing buffered returns ErrWouldBlock at once, as a *net.OpError.
func TestInlineNoWait(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		errs := make(chan error, 1)
		ln := listen(t, e, "tcp")
		tsServeHandler(t, ln, func(ctx context.Context, c *Conn) error {
			b := make([]byte, 16)
			for {
				if _, err := c.Read(b); err != nil {
					select {
					case errs <- err:
					default:
					}
					return nil
				}
			}
		}, WithInlineHandler())
		client := tsDialStd(t, "tcp", ln.Addr().String())
		client.Write([]byte("hello, loop"))
		err := tsRecv(t, errs, "Read on an empty input")
		if !errors.Is(err, ErrWouldBlock) {
			t.Fatalf("Read with nothing buffered returned %v, want ErrWouldBlock", err)
		}
		if _, ok := err.(interface{ Timeout() bool }); !ok {
			t.Errorf("Read's error %T is not a net.Error", err)
		}
	})
}

// TestInlineCloseAfterDrain: an inline echo handler run from the loop's
// send path (its output had drained) queues a reply the socket cannot take
// at once and, its input ended, closes the connection. The loop's send
// must not take the queue for empty and finish the close: a bug that cut
// the echo short about once in 30 rounds of 16 MiB on epoll, before the
// fix. Engines whose writers send directly (epoll, uring-hybrid) are the
// ones that reach that path.
func TestInlineCloseAfterDrain(t *testing.T) {
	const rounds, size = 40, 16 << 20
	data := tsRandom(21, size)
	for _, e := range []Engine{EngineEpoll, EngineUringHybrid} {
		t.Run(e.String(), func(t *testing.T) {
			if e != EngineEpoll {
				needUring(t)
			}
			ln := listen(t, e, "tcp", WithDrainTimeout(2*tsTimeout)) // not the client's pace (TestStressBulkEcho)
			defer tsNoDrainExpired(t, ln)()
			tsServeHandler(t, ln, tsEchoHandler, WithInlineHandler())
			for round := range rounds {
				c := tsDialRing(t, e, "tcp", ln.Addr().String())
				if err := tsBulkRoundTrip(c, data, uint64(round)); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				c.Close()
			}
		})
	}
}
