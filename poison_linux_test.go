//go:build ringpoison

package ringpoll

// Tests of the ringpoison build tag: memory a reader saw is overwritten
// with the poison pattern the moment it goes back to a pool or to the
// kernel, so a slice read after its Release shows the pattern instead of
// whatever reused the memory. They run only with -tags ringpoison.

import (
	"bytes"
	"context"
	"testing"

	"github.com/ringpoll/ringpoll/internal/poison"
	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

// poisoned reports whether every byte of p is the poison pattern.
func poisoned(p []byte) bool {
	return len(p) > 0 && bytes.Count(p, []byte{poison.Pattern}) == len(p)
}

// TestPoisonReleasedInput: a slice from Next shows the poison once its
// memory went back. On the engines that receive into provided buffers
// taken whole by a recv, Release gives the buffer back to the ring at
// once, so the slice shows the poison as soon as the buffer is back. A
// pooled node the epoll and uring-reactor engines read into goes back at
// Release too, unless the loop holds free space of it for its next read
// (buf.LinkBuffer.Shrink), and at the latest when the connection is
// destroyed; an incrementally consumed buffer once the kernel has moved
// past it, at the latest when the loop stops. For those the test closes
// the connection, with no engine linger, and waits.
func TestPoisonReleasedInput(t *testing.T) {
	defer engineLinger.Store(engineLinger.Swap(0))
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, ring := range ltRings {
			for _, side := range tsSides {
				t.Run(ring.name+"/"+string(side), func(t *testing.T) {
					provided := e == EngineUring || e == EngineUringHybrid || e == EngineUringSQPoll
					whole := ring.name == "whole" || !uringp.Incremental()
					poisonReleased(t, e, ring.opts(e), side, provided && whole)
				})
			}
		}
	})
}

func poisonReleased(t *testing.T, e Engine, opts []Option, side tsSide, atRelease bool) {
	msg := bytes.Repeat([]byte{'p'}, 1000)
	var p []byte
	var done <-chan struct{}
	// The connection lives in a subtest, so that its cleanups (the
	// connection, its peer, the listener) run before the wait below.
	t.Run("read", func(t *testing.T) {
		c, peer := tsPair(t, e, "tcp", side, opts...)
		done = c.fd.Done()
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		r := c.Reader()
		var err error
		if p, err = r.Next(len(msg)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, msg) {
			t.Fatalf("Next returned %q..., want %q...", p[:8], msg[:8])
		}
		if err := r.Release(); err != nil {
			t.Fatal(err)
		}
		if !atRelease {
			return
		}
		tsEventually(t, "every provided buffer to be back", func() bool {
			for _, s := range loopStatsOf(c) {
				if s.BuffersOut != 0 {
					return false
				}
			}
			return true
		})
		if !poisoned(p) {
			t.Errorf("the provided buffer is back in the ring, but the released slice shows %q...: want the poison", p[:8])
		}
	})
	if t.Failed() {
		return
	}
	// Destroyed: pooled input nodes went back (the channel orders that
	// before the check, for the race detector). Provided buffers go back
	// on the loop's own goroutine, into memory the race detector does not
	// watch, at the latest when the loop stops.
	tsRecv(t, done, "the connection to be destroyed")
	tsEventually(t, "the released slice to show the poison", func() bool { return poisoned(p) })
}

// TestPoisonReleasedBatch: a Batch's Packets show the poison once the
// Batch is released (Release, or the next ReadBatch), and a PacketServer
// handler's datagrams once the handler returned and their memory went
// back to the packet ring or the Batch.
func TestPoisonReleasedBatch(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		want := bytes.Repeat([]byte{'q'}, 1000)
		t.Run("Batch", func(t *testing.T) {
			a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
			batch := pcBatch(t, 4, 2048)
			pcDeadline(t, b)
			for _, release := range []string{"Release", "ReadBatch"} {
				if _, err := a.WriteToAddrPort(want, pcAddrPort(b)); err != nil {
					t.Fatal(err)
				}
				ps, err := b.ReadBatch(batch)
				if err != nil || len(ps) != 1 || !bytes.Equal(ps[0].Data, want) {
					t.Fatalf("ReadBatch = %d packets, %v", len(ps), err)
				}
				held := ps[0].Data
				if release == "Release" {
					batch.Release()
				} else {
					// The next read releases the last one's Packets first.
					if _, err := a.WriteToAddrPort([]byte("next"), pcAddrPort(b)); err != nil {
						t.Fatal(err)
					}
					if _, err := b.ReadBatch(batch); err != nil {
						t.Fatal(err)
					}
					held = held[len("next"):] // the new datagram fills the slot's start
				}
				if !poisoned(held) {
					t.Errorf("after %s the Packet shows %q...: want the poison", release, held[:8])
				}
			}
			batch.Release()
		})
		t.Run("PacketServer", func(t *testing.T) {
			held := make(chan []byte, 1)
			conn := pcListen(t, e, network, addr)
			s := psServe(t, PacketHandlerFunc(func(_ *PacketWriter, in []Packet) {
				select {
				case held <- in[0].Data:
				default:
				}
			}), []*PacketConn{conn}, WithEngine(e))
			sender := pcListen(t, e, network, addr)
			if _, err := sender.WriteToAddrPort(want, pcAddrPort(conn)); err != nil {
				t.Fatal(err)
			}
			p := tsRecv(t, held, "the handler to get the datagram")
			// Shutdown waits for the handler, and the server gives its
			// datagrams back before it counts the handler done.
			if err := s.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !poisoned(p) {
				t.Errorf("after the handler returned its datagram shows %q...: want the poison", p[:8])
			}
		})
	})
}
