//go:build linux

package ringpoll

// Lifetime tests: memory a reader can still see (a slice from Next, Peek or
// Until, a handler's whole call) is never recycled while it can see it,
// whoever closes the connection and whenever. Helpers (ts*) are in
// stress_test.go; the ones here start with lt.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ltRings are the buffer rings of the lifetime tests, small so that a
// buffer recycled too early is soon refilled by another connection: eight
// 4 KiB buffers, each taken whole by a recv, and four of 16 KiB, consumed
// incrementally where the kernel can (each holding the input of several
// recvs and connections).
var ltRings = []ltRing{
	{"whole", 8, 4096},
	{"incremental", 4, 16 << 10},
}

type ltRing struct {
	name        string
	count, size int
}

// opts are the options of one loop with the ring, on engine e: the
// engines that receive into no buffer ring refuse WithBufferRing.
func (r ltRing) opts(e Engine) []Option {
	if !bufferEngines.has(e) {
		return []Option{WithLoops(1)}
	}
	return []Option{WithLoops(1), WithBufferRing(r.count, r.size)}
}

// ltHeld is how many bytes the victim's reader holds.
const ltHeld = 4000

// ltCloser is one way a connection gets closed under a reader that holds a
// slice of its input.
type ltCloser struct {
	name string
	// opts are the victim's options, over ltRing.
	opts []Option
	// server: only a Server can close this way.
	server bool
	// close closes c, or leaves it to a timer; srv is the victim's Server
	// (nil in the net.Conn style).
	close func(t *testing.T, c *Conn, srv *Server)
}

var ltClosers = []ltCloser{
	{name: "close", close: func(t *testing.T, c *Conn, _ *Server) {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}},
	{name: "shutdown-gives-up", server: true, close: func(t *testing.T, _ *Conn, srv *Server) {
		// The handler holds its slice and does not return: Shutdown gives
		// up at once and closes the connection under it.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := srv.Shutdown(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Shutdown with a running handler returned %v, want context.Canceled", err)
		}
	}},
	{name: "idle-timeout", opts: []Option{WithIdleTimeout(time.Hour)},
		close: func(_ *testing.T, c *Conn, _ *Server) {
			// The idle timer fires now, through its own path: a short
			// timeout could fire before the reader holds its slice.
			c.fd.ExpireIdle()
		}},
	{name: "drain-timeout", opts: []Option{WithDrainTimeout(20 * time.Millisecond), WithOutputHighWater(32 << 20)},
		close: func(t *testing.T, c *Conn, _ *Server) {
			// 16 MiB the peer does not read: the drain stalls until its
			// timeout, then the connection is torn down.
			if _, err := c.Write(tsBig[:16<<20]); err != nil {
				t.Errorf("Write: %v", err)
			}
			c.Close()
		}},
}

// ltLetGo waits until c's loop has let go of the socket: its last request
// ended and it would recycle nothing more on its own.
func ltLetGo(t *testing.T, c *Conn) {
	t.Helper()
	tsEventually(t, "the loop to let go of the closed connection", c.fd.Detached)
}

// ltEchoOthers has four clients echo 1 MiB each, of one repeated letter
// each ('a' to 'd'), through the echo server at addr: they fill every
// provided buffer of the loop many times over.
func ltEchoOthers(t *testing.T, addr string) { ltEchoOthersN(t, addr, 1<<20) }

// ltEchoOthersN is ltEchoOthers with n bytes a client.
func ltEchoOthersN(t *testing.T, addr string, n int) {
	t.Helper()
	errs := make(chan error, 4)
	for i := range 4 {
		c := tsDialStd(t, "tcp", addr)
		go func() {
			errs <- tsBulkRoundTrip(c, bytes.Repeat([]byte{'a' + byte(i)}, n), uint64(i))
		}()
	}
	for range 4 {
		if err := tsRecv(t, errs, "the other clients' echoes"); err != nil {
			t.Errorf("another client's echo: %v", err)
		}
	}
}

// ltCompare describes how held differs from want, or returns nil.
func ltCompare(held, want []byte) error {
	if bytes.Equal(held, want) {
		return nil
	}
	i := firstDiff(held, want)
	return fmt.Errorf("the held slice changed after Close: byte %d is %q, was %q (now %q...): another connection's bytes",
		i, held[i], want[i], held[i:min(len(held), i+16)])
}

// TestLifetimeHeldSliceAfterClose is the regression test of a cross-tenant
// leak: a reader takes Next(4000) and keeps the slice; its connection is
// closed under it (by Close from another goroutine, by Shutdown giving up,
// by the idle timer, by the drain timeout); four other clients then echo
// 1 MiB each through the same loop and its eight provided buffers. The
// held slice must still hold the reader's own bytes. The peer must see the
// connection end while the slice is held: closing ends the socket at once,
// only recycling waits.
func TestLifetimeHeldSliceAfterClose(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, ring := range ltRings {
			for _, cl := range ltClosers {
				for _, style := range tsBlockingStyles {
					if cl.server && style != tsHandler {
						continue
					}
					t.Run(ring.name+"/"+cl.name+"/"+string(style), func(t *testing.T) { ltHeldSlice(t, e, ring.opts(e), cl, style) })
				}
			}
		}
	})
}

func ltHeldSlice(t *testing.T, e Engine, ltRing []Option, cl ltCloser, style tsStyle) {
	opts := append(append([]Option{}, ltRing...), cl.opts...)
	// Both listeners share one engine (same loops and ring): the victim's
	// buffers and the others' come from one ring.
	victimLn := listen(t, e, "tcp", opts...)
	othersLn := listen(t, e, "tcp", ltRing...)
	tsServeHandler(t, othersLn, tsEchoHandler, ltRing...)
	retired0 := ltRetired(victimLn) // the engine may have served other tests

	type held struct {
		c    *Conn
		b    []byte
		copy []byte
	}
	heldc := make(chan held, 1)
	check := make(chan struct{})
	result := make(chan error, 1)
	hold := func(c *Conn) {
		b, err := c.Reader().Next(ltHeld)
		if err != nil {
			result <- fmt.Errorf("Next(%d): %w", ltHeld, err)
			heldc <- held{c: c}
			return
		}
		heldCopy := bytes.Clone(b)
		heldc <- held{c, b, heldCopy}
		<-check
		if err := ltCompare(b, heldCopy); err != nil {
			result <- err
		}
		c.Reader().Release() // a Server does, after the handler
	}
	var srv *Server
	if style == tsHandler {
		var err error
		srv, err = NewServer(func(ctx context.Context, c *Conn) error {
			hold(c)
			return nil
		}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(victimLn)
		defer tsShutdown(srv, tsTimeout)
	} else {
		go func() {
			c, err := victimLn.AcceptConn()
			if err != nil {
				result <- err
				heldc <- held{}
				return
			}
			defer c.Close()
			hold(c)
		}()
	}
	peer := tsDialStd(t, "tcp", victimLn.Addr().String())
	if _, err := peer.Write(bytes.Repeat([]byte{'v'}, ltHeld)); err != nil {
		t.Fatal(err)
	}
	h := tsRecv(t, heldc, "the reader to hold its slice")
	if h.b == nil {
		t.Fatal(<-result)
	}
	cl.close(t, h.c, srv)
	ltLetGo(t, h.c)
	// Closed for the peer, though the slice is still held.
	peer.SetReadDeadline(time.Now().Add(tsTimeout))
	if _, err := io.Copy(io.Discard, peer); err != nil && !tsReadReset(err) {
		t.Errorf("the peer of the closed connection read %v, want EOF or a reset", err)
	}
	ltEchoOthers(t, othersLn.Addr().String())
	if err := ltCompare(h.b, h.copy); err != nil {
		t.Error(err)
	}
	// The descriptor is closed at once, whoever holds the input.
	tsEventually(t, "the descriptor to be closed", h.c.fd.DescriptorClosed)
	if _, err := h.c.Reader().Next(1); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Next after Close returned %v, want net.ErrClosed", err)
	}
	if style == tsHandler {
		// A running handler holds the connection's memory: it is freed,
		// and recycled, once the handler returned.
		if h.c.fd.Finalized() {
			t.Error("the connection was finalized while its handler ran")
		}
		close(check)
		tsEventually(t, "the closed connection to be finalized", h.c.fd.Finalized)
		if got := ltRetired(victimLn) - retired0; got != 0 {
			t.Errorf("%d provided buffers retired: the handler returned, they should have been recycled", got)
		}
	} else {
		// A plain reader holds nothing: the connection was destroyed with
		// the slice held, so what it sees was retired, not recycled.
		tsEventually(t, "the closed connection to be finalized", h.c.fd.Finalized)
		if isProactor(e) && ltRetired(victimLn) == retired0 {
			t.Error("no provided buffer was retired, though a reader held one when its connection was destroyed")
		}
		close(check)
	}
	if isProactor(e) {
		ufBuffersBack(t, victimLn)
	}
	select {
	case err := <-result:
		t.Error(err)
	default:
	}
}

// isProactor reports whether e receives into provided buffers.
func isProactor(e Engine) bool {
	return e == EngineUring || e == EngineUringHybrid || e == EngineUringSQPoll
}

// ltRetired sums the provided buffers the loops of ln's engine retired.
func ltRetired(ln *Listener) uint64 {
	var n uint64
	for _, s := range loopStatsOf(ln) {
		n += s.BuffersRetired
	}
	return n
}

// TestLifetimeCloseRacesReader: eight clients each stream their own letter
// while the server reads with Next, checks the slice, yields, checks it
// again and releases it; connections are closed at random points under
// those readers. Every check must see only the connection's own letter.
func TestLifetimeCloseRacesReader(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, ring := range ltRings {
			for _, style := range tsBlockingStyles {
				t.Run(ring.name+"/"+string(style), func(t *testing.T) { ltCloseRaces(t, e, ring.opts(e), style) })
			}
		}
	})
}

func ltCloseRaces(t *testing.T, e Engine, ltRing []Option, style tsStyle) {
	const clients = 8
	ln := listen(t, e, "tcp", ltRing...)
	var bad atomic.Value
	var checked atomic.Int64
	var seen sync.Map
	conns := make(chan *Conn, clients)
	announce := func(c *Conn) {
		if _, dup := seen.LoadOrStore(c, true); !dup {
			conns <- c
		}
	}
	read := func(c *Conn, letter byte) error {
		r := c.Reader()
		b, err := r.Next(min(max(r.Len(), 1), 3000))
		if err != nil {
			return err
		}
		for round := range 2 {
			if i := bytes.IndexFunc(b, func(r rune) bool { return r != rune(letter) }); i >= 0 {
				bad.CompareAndSwap(nil, fmt.Errorf("check %d of a slice of %q bytes found %q at %d", round, letter, b[i], i))
			}
			checked.Add(1)
			announce(c) // closed only after a first check
			runtime.Gosched()
		}
		return r.Release()
	}
	first := func(c *Conn) (byte, error) {
		b, err := c.Reader().Peek(1)
		if err != nil {
			return 0, err
		}
		return b[0], nil
	}
	switch style {
	case tsHandler:
		tsServeHandler(t, ln, func(ctx context.Context, c *Conn) error {
			letter, err := first(c)
			if err == nil {
				err = read(c, letter)
			}
			return err
		}, ltRing...)
	default:
		tsServeConns(t, ln, func(c *Conn) {
			letter, err := first(c)
			for err == nil {
				err = read(c, letter)
			}
		})
	}
	var wg sync.WaitGroup
	for i := range clients {
		peer := tsDialStd(t, "tcp", ln.Addr().String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			chunk := bytes.Repeat([]byte{'A' + byte(i)}, 16<<10)
			peer.SetDeadline(time.Now().Add(tsTimeout))
			for j := 0; j < 256; j++ {
				if _, err := peer.Write(chunk); err != nil {
					return // closed by the server
				}
			}
		}()
	}
	// Each connection is closed after a random number of yields,
	// somewhere in its readers' Next, check, yield, Release.
	rng := rand.New(rand.NewPCG(uint64(e), 7))
	for range clients {
		c := tsRecv(t, conns, "a connection to close")
		for range rng.IntN(200) {
			runtime.Gosched()
		}
		c.Close()
	}
	wg.Wait()
	if err, _ := bad.Load().(error); err != nil {
		t.Fatal(err)
	}
	if checked.Load() == 0 {
		t.Fatal("no slice was checked")
	}
}
