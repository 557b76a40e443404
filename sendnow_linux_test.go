package ringpoll

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

// TestSendNow echoes replies of 1 B to 4 MiB on one connection, one after
// another, so that each reply is the only send of its loop's turn, and
// checks every byte. Under GOMAXPROCS=1 no loop naps: a loop that parks
// sends such a reply with a system call of its own before it sleeps
// (LoopStats.SendsNow), which the uring engine's loops must have done; the
// large replies fill the socket, so some of those sends are partial and
// the rest waits for POLLOUT. Loops that keep their thread, and the epoll
// engine, never send that way.
func TestSendNow(t *testing.T) {
	tsOneP(t)
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp", WithLoops(1))
		tsServeHandler(t, ln, tsEchoHandler)
		c := tsDialStd(t, "tcp", ln.Addr().String())
		defer c.Close()
		rng := rand.New(rand.NewPCG(1, 2))
		for i, size := range []int{1, 10, 100, 1000, 1024, 4096, 64 << 10, 1 << 20, 4 << 20, 1, 1000} {
			msg := make([]byte, size)
			for j := range msg {
				msg[j] = byte(rng.Uint32())
			}
			// The client writes while it reads: a reply larger than the
			// sockets' buffers comes back before the request is all sent.
			werr := make(chan error, 1)
			go func() {
				_, err := c.Write(msg)
				werr <- err
			}()
			got := make([]byte, size)
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("reply %d (%d B): %v", i, size, err)
			}
			if err := <-werr; err != nil {
				t.Fatalf("request %d (%d B): %v", i, size, err)
			}
			if !bytes.Equal(got, msg) {
				t.Fatalf("reply %d (%d B) differs from the request at byte %d", i, size, firstDiff(got, msg))
			}
		}
		var n uint64
		for _, s := range loopStatsOf(ln) {
			n += s.SendsNow
		}
		t.Logf("%d sends made by the loop itself", n)
		switch {
		case e == EngineUring && n == 0:
			t.Fatal("the uring loop parked with replies queued and sent none of them itself")
		case e == EngineEpoll && n != 0:
			t.Fatalf("%d sends made outside the ring by a loop that does not park", n)
		}
	})
}

// TestSendNowFull: a parked loop's own sends of a reply that the socket
// cannot take at once. The handler answers each 1-byte request with 8 MiB
// (more than a socket's send buffer can hold, however fast the client
// reads), so the loop's sends fall short, and those that find the socket
// full end in EAGAIN and wait for POLLOUT; every byte must arrive, in
// order, on each engine.
func TestSendNowFull(t *testing.T) {
	tsOneP(t)
	reply := make([]byte, 8<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range reply {
		reply[i] = byte(rng.Uint32())
	}
	big := func(ctx context.Context, c *Conn) error {
		r, w := c.Reader(), c.Writer()
		for r.Len() > 0 {
			if _, err := r.Next(1); err != nil {
				return err
			}
			w.WriteBinary(reply)
			if err := w.Flush(); err != nil {
				return err
			}
		}
		r.Release()
		return nil
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp", WithLoops(1))
		tsServeHandler(t, ln, big)
		c := tsDialStd(t, "tcp", ln.Addr().String())
		defer c.Close()
		got := make([]byte, len(reply))
		for i := range 3 {
			if _, err := c.Write([]byte{'x'}); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("reply %d: %v", i, err)
			}
			if !bytes.Equal(got, reply) {
				t.Fatalf("reply %d differs from what the handler wrote at byte %d", i, firstDiff(got, reply))
			}
		}
		var n uint64
		for _, s := range loopStatsOf(ln) {
			n += s.SendsNow
		}
		t.Logf("%d sends made by the loop itself", n)
	})
}

// tsOneP runs the rest of the test under GOMAXPROCS=1, where no loop
// naps, and puts GOMAXPROCS back when the test ends.
func tsOneP(t *testing.T) {
	procs := runtime.GOMAXPROCS(1)
	uringp.RefreshProcs()
	t.Cleanup(func() {
		runtime.GOMAXPROCS(procs)
		uringp.RefreshProcs()
	})
}
