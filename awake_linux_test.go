package ringpoll

// However much work waits, a loop lets the rest of its program run within
// a few milliseconds (poll.Awake). The loop's own work is made to outlast
// the test here, so that it never runs out of work and sleeps, whatever
// the machine's pace: each request costs its inline handler 50 to 100 µs, and a
// few thousand wait in the socket before the measurement starts.

import (
	"context"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// maxHeld bounds how much of the flooded loop's own work may run while a
// timer or a signal waits: a loop yields after 2 ms awake. It is counted
// in the loop's requests (each costs a known time), not read off the
// clock, so that a machine busy with other processes, which delays the
// timer and the loop alike, cannot fail the test.
const maxHeld = 50 * time.Millisecond

// burn spends d of CPU, as a handler with real work to do would.
func burn(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// TestLoopYieldsUnderFlood: with one P, an inline TCP handler's loop and
// an inline PacketServer's reader, each with more queued work than the
// measurement lasts, yield their P (HookLoopYielded) and let a timer and a
// signal handler run within maxHeld, on every engine. Without the yield,
// only the runtime's preemption would take the P from them, and it cannot
// when its sysmon thread shares a CPU flooded with softirq work: an inline
// PacketServer under 600,000 datagrams/s with RPS on its CPU held a
// signal for up to 2 s (docs/RELIABILITY.md).
func TestLoopYieldsUnderFlood(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, kind := range []string{"tcp-inline", "udp-inline"} {
			t.Run(kind, func(t *testing.T) {
				var yields atomic.Int64
				defer poll.SetTestHook(func(p poll.HookPoint, _ *poll.FD) {
					if p == poll.HookLoopYielded {
						yields.Add(1)
					}
				})()
				var served atomic.Int64
				cost := tcpRequestCost
				if kind == "tcp-inline" {
					floodTCPInline(t, e, &served)
				} else {
					cost = udpDatagramCost
					floodUDPInline(t, e, &served)
				}
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
				tsEventually(t, "the server to start on the flood", func() bool { return served.Load() > 0 })
				y0, s0 := yields.Load(), served.Load()
				held, during := heldFor(t, &served)
				if limit := int64(maxHeld / cost); during > limit {
					t.Errorf("a timer or a signal waited while the loop served %d requests of %v (%v by the clock); want at most %d (%v of its work)",
						during, cost, held, limit, maxHeld)
				}
				if yields.Load() == y0 {
					t.Errorf("no loop yielded its P while it served %d requests without running out of work", served.Load()-s0)
				}
			})
		}
	})
}

// The work each request of a flood costs its handler.
const (
	tcpRequestCost  = 100 * time.Microsecond
	udpDatagramCost = 50 * time.Microsecond
)

// floodTCPInline starts an inline server whose handler spends
// tcpRequestCost on each request of 16 bytes, and queues 4,000 of them on
// it: more than maxHeld of work.
func floodTCPInline(t *testing.T, e Engine, served *atomic.Int64) {
	ln := listen(t, e, "tcp")
	tsServeHandler(t, ln, func(ctx context.Context, c *Conn) error {
		// One request a call: the Server calls again while input remains.
		if _, err := c.Reader().Next(16); err != nil {
			return err
		}
		burn(tcpRequestCost)
		served.Add(1)
		return nil
	}, WithInlineHandler())
	c := tsDialStd(t, "tcp", ln.Addr().String())
	if _, err := c.Write(make([]byte, 4000*16)); err != nil {
		t.Fatal(err)
	}
	go func() { // replies there are none; hold the connection open
		var b [1]byte
		c.Read(b[:])
	}()
}

// floodUDPInline starts an inline PacketServer whose handler spends
// udpDatagramCost a datagram, and queues 3,000 datagrams on it: more than
// maxHeld of work.
func floodUDPInline(t *testing.T, e Engine, served *atomic.Int64) {
	pc := pcListen(t, e, "udp4", "127.0.0.1:0")
	pc.SetReadBuffer(4 << 20)
	gate := make(chan struct{})
	psServe(t, PacketHandlerFunc(func(w *PacketWriter, in []Packet) {
		<-gate // until the datagrams are all queued
		for range in {
			burn(udpDatagramCost)
			served.Add(1)
		}
	}), []*PacketConn{pc}, WithEngine(e), WithInlineHandler())
	c, err := net.Dial("udp4", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3000 {
		if _, err := c.Write(make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
}

// heldFor measures how late a 1 ms timer fires and how long a signal the
// process sends itself takes to reach its handler, five times each, and
// returns the worst wait by the clock and the most requests the loop
// served during one wait.
func heldFor(t *testing.T, served *atomic.Int64) (time.Duration, int64) {
	t.Helper()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	defer signal.Stop(sig)
	var worst time.Duration
	var most int64
	for range 5 {
		start, s0 := time.Now(), served.Load()
		<-time.After(time.Millisecond)
		worst = max(worst, time.Since(start)-time.Millisecond)
		most = max(most, served.Load()-s0)
		start, s0 = time.Now(), served.Load()
		syscall.Kill(os.Getpid(), syscall.SIGUSR1)
		<-sig
		worst = max(worst, time.Since(start))
		most = max(most, served.Load()-s0)
	}
	return worst, most
}
