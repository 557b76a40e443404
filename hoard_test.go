//go:build linux

package ringpoll

// One connection must never stall another: a reader that holds its input
// without releasing it pins at most its share of the loop's receive
// buffers, and copies the rest, so that the other connections of its loop
// keep being served. Helpers are lifetime_test.go's and stress_test.go's.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// hoardLine is one request of the hoarding client: 4 KiB ending in '\n'.
var hoardLine = append(bytes.Repeat([]byte{'h'}, 4095), '\n')

// hoardRounds is how many lines a hoarder holds: eight times the bytes of
// the larger test ring, so that a ring it could pin whole would run dry
// many times over.
const hoardRounds = 8 * 64 << 10 / 4096

// TestHoardingClientStallsNobody: a dialed client loops WriteBinary,
// Flush and Until of a 4 KiB line against an echo server of the same
// engine (one loop, one small ring), never calling Release, and keeps
// every line it read. Then another client's echo must come back while the
// hoarder still holds all of it, the hoarder's lines must all be intact,
// and the hoarder may pin no more than its share of the ring.
func TestHoardingClientStallsNobody(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, ring := range ltRings {
			t.Run(ring.name, func(t *testing.T) {
				ln := listen(t, e, "tcp", ring.opts(e)...)
				tsServeHandler(t, ln, tsEchoHandler, ring.opts(e)...)
				copied0 := hoardCopied(ln)
				c := tsDialRing(t, e, "tcp", ln.Addr().String(), ring.opts(e)...)
				c.SetDeadline(time.Now().Add(tsTimeout))
				r, w := c.Reader(), c.Writer()
				held := make([][]byte, 0, hoardRounds)
				for i := range hoardRounds {
					w.WriteBinary(hoardLine)
					if err := w.Flush(); err != nil {
						t.Fatalf("request %d: Flush: %v", i, err)
					}
					b, err := r.Until('\n')
					if err != nil {
						t.Fatalf("request %d: Until: %v (loops: %v)", i, err, ln.Stats())
					}
					held = append(held, b)
				}
				// The hoarder holds 512 KiB; the others must not notice.
				other := tsDialStd(t, "tcp", ln.Addr().String())
				if err := tsEchoOnce(other, "while another holds its input\n"); err != nil {
					t.Fatalf("another client's echo: %v (loops: %v)", err, ln.Stats())
				}
				for i, b := range held {
					if !bytes.Equal(b, hoardLine) {
						t.Fatalf("held line %d changed: %q...", i, b[:min(len(b), 16)])
					}
				}
				if isProactor(e) {
					hoardCheckShare(t, ln, copied0)
				}
				r.Release()
				if isProactor(e) {
					ufBuffersBack(t, ln)
				}
			})
		}
	})
}

// TestHoardingHandlerStallsNobody: a handler reads a long upload with
// Next and keeps every slice until the whole upload is in; while it holds
// half of it (more than the ring's bytes), another client's echo through
// the same loop must come back.
func TestHoardingHandlerStallsNobody(t *testing.T) {
	const upload = 2 * hoardRounds * 4096 // 1 MiB
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, ring := range ltRings {
			t.Run(ring.name, func(t *testing.T) {
				echoLn := listen(t, e, "tcp", ring.opts(e)...)
				tsServeHandler(t, echoLn, tsEchoHandler, ring.opts(e)...)
				copied0 := hoardCopied(echoLn)
				ln := listen(t, e, "tcp", ring.opts(e)...)
				half := make(chan struct{})
				tsServeHandler(t, ln, func(ctx context.Context, c *Conn) error {
					r := c.Reader()
					var held [][]byte
					for got := 0; got < upload; got += 4096 {
						if got == upload/2 {
							close(half)
						}
						b, err := r.Next(4096)
						if err != nil {
							return err
						}
						held = append(held, b)
					}
					for i, b := range held {
						if !bytes.Equal(b, hoardLine) {
							return fmt.Errorf("held piece %d changed", i)
						}
					}
					_, err := c.Write([]byte("ok\n"))
					return err
				}, ring.opts(e)...)
				up := tsDialStd(t, "tcp", ln.Addr().String())
				up.SetDeadline(time.Now().Add(tsTimeout))
				for range upload / 2 / 4096 {
					if _, err := up.Write(hoardLine); err != nil {
						t.Fatal(err)
					}
				}
				tsRecv(t, half, "the handler to hold half the upload")
				other := tsDialStd(t, "tcp", echoLn.Addr().String())
				if err := tsEchoOnce(other, "while a handler holds an upload\n"); err != nil {
					t.Fatalf("another client's echo: %v (loops: %v)", err, ln.Stats())
				}
				if isProactor(e) {
					hoardCheckShare(t, ln, copied0)
				}
				for range upload / 2 / 4096 {
					if _, err := up.Write(hoardLine); err != nil {
						t.Fatal(err)
					}
				}
				reply := make([]byte, 3)
				if _, err := io.ReadFull(up, reply); err != nil || string(reply) != "ok\n" {
					t.Fatalf("the upload's reply: %q, %v", reply, err)
				}
			})
		}
	})
}

// hoardCopied sums the receives ln's loops copied out of their ring.
func hoardCopied(ln *Listener) (n uint64) {
	for _, s := range loopStatsOf(ln) {
		n += s.BuffersCopied
	}
	return n
}

// hoardCheckShare checks that the hoarder, holding more than the ring,
// pins no more than its share of it (a quarter, two buffers at least),
// and that its loop copied the rest.
func hoardCheckShare(t *testing.T, ln *Listener, copied0 uint64) {
	t.Helper()
	for _, s := range loopStatsOf(ln) {
		if s.BuffersOut > 2+2 { // the hoarder's share, and the others' in flight
			t.Errorf("loop %d has %d buffers out while one connection holds its input: more than its share", s.Loop, s.BuffersOut)
		}
	}
	if hoardCopied(ln) == copied0 {
		t.Error("no receive was copied out of the ring, though a connection held more than its share")
	}
}

// TestSliceReleaseFreesAll: a Reader from Slice that was never read frees
// all of its bytes on Release, before or after its connection closed.
func TestSliceReleaseFreesAll(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, closeFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("close-first=%v", closeFirst), func(t *testing.T) {
				c, peer := tsPair(t, e, "tcp", tsAccepted, ltRings[0].opts(e)...)
				if _, err := peer.Write(hoardLine); err != nil {
					t.Fatal(err)
				}
				c.SetReadDeadline(time.Now().Add(tsTimeout))
				s, err := c.Reader().Slice(len(hoardLine))
				if err != nil {
					t.Fatal(err)
				}
				if closeFirst {
					c.Close()
					tsEventually(t, "the connection to be finalized", c.fd.Finalized)
				}
				if err := s.Release(); err != nil {
					t.Fatal(err)
				}
				if n := s.Len(); n != 0 {
					t.Errorf("Len after Release = %d, want 0", n)
				}
				if _, err := s.Next(1); !errors.Is(err, io.EOF) {
					t.Errorf("Next after Release: %v, want io.EOF", err)
				}
				c.Close()
				if isProactor(e) {
					tsEventually(t, "the slice's buffers to return to the ring", func() bool {
						for _, s := range loopStatsOf(c) {
							if s.BuffersOut != 0 {
								return false
							}
						}
						return true
					})
				}
			})
		}
	})
}

// TestHoardingReadersShareTheRing: several readers each hold their share
// of the ring (8 KiB read with Next, not released) and wait for one more
// byte; together they hold every buffer. Each must still get its byte:
// the loop retires what they hold and gives the ring new memory, and
// the held bytes stay theirs.
func TestHoardingReadersShareTheRing(t *testing.T) {
	const readers, held = 4, 8 << 10
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, ring := range ltRings {
			t.Run(ring.name, func(t *testing.T) {
				ln := listen(t, e, "tcp", ring.opts(e)...)
				type result struct {
					b   []byte
					err error
				}
				results := make(chan result, readers)
				holding := make(chan struct{}, readers)
				tsServeConns(t, ln, func(c *Conn) {
					c.SetReadDeadline(time.Now().Add(tsTimeout))
					r := c.Reader()
					b, err := r.Next(held)
					if err != nil {
						results <- result{err: err}
						return
					}
					want := bytes.Clone(b)
					holding <- struct{}{}
					_, err = r.Next(1) // every buffer is held by now
					if err == nil && !bytes.Equal(b, want) {
						err = fmt.Errorf("the held bytes changed while the reader waited")
					}
					results <- result{b: b, err: err}
					r.Release()
				})
				peers := make([]net.Conn, readers)
				for i := range peers {
					peers[i] = tsDialStd(t, "tcp", ln.Addr().String())
					if _, err := peers[i].Write(bytes.Repeat([]byte{'a' + byte(i)}, held)); err != nil {
						t.Fatal(err)
					}
				}
				for range readers {
					tsRecv(t, holding, "the readers to hold their input")
				}
				for _, p := range peers {
					if _, err := p.Write([]byte{'!'}); err != nil {
						t.Fatal(err)
					}
				}
				for range readers {
					if r := tsRecv(t, results, "each reader's last byte"); r.err != nil {
						t.Errorf("a reader: %v (loops: %v)", r.err, ln.Stats())
					}
				}
			})
		}
	})
}
