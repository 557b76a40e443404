package ringpoll

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

// parkedEngines are the engines whose loops park in Go's poller, and so
// may nap (uring-sqpoll's are locked to their thread).
var parkedEngines = map[Engine]bool{EngineUring: true, EngineUringHybrid: true, EngineUringReactor: true}

// TestLoopNaps serves echo exchanges with the default options while
// garbage collections stop the world again and again, in the inline and
// the goroutine handler styles, and checks every byte and the loops' naps
// (waits in io_uring_enter on a P the loop keeps, between requests that
// come close together, though not so close that the program's handlers
// want that P: each client pauses a millisecond between its rounds):
// some under GOMAXPROCS=2 on the engines whose
// loops park, with goroutine handlers; none with inline handlers, and
// none under GOMAXPROCS=1, where a nap would hold the only P and every
// other goroutine of the program would wait for its end. The
// clients are goroutines of this process, and a collection must stop a
// napping loop: either failing shows up as a hang.
func TestLoopNaps(t *testing.T) {
	tsPerProcsAndStyle(t, nil, func(t *testing.T, e Engine, ln *Listener, procs int, style tsStyle) {
		// The engine may serve an earlier test's listener too: count
		// this run's naps only.
		var before uint64
		naps := func() (n uint64) {
			for _, s := range loopStatsOf(ln) {
				n += s.Naps
			}
			return n - before
		}
		before = naps()
		exchange := func() { tsEchoRounds(t, ln, 4, 100, time.Millisecond) }
		exchange()
		// Inline handlers run in the loop: nothing of the
		// loop's waits on a goroutine, and such a loop
		// never naps.
		napper := parkedEngines[e] && style == tsHandler
		if procs == 2 && napper {
			// A loop naps once a sleep of its ended within
			// 10 ms: on a machine slow enough that none did,
			// more exchanges give it the chance.
			tsEventually(t, "the loop to nap", func() bool {
				if naps() > 0 {
					return true
				}
				exchange()
				return false
			})
		}
		n := naps()
		switch {
		case procs == 1 && n != 0:
			t.Fatalf("GOMAXPROCS=1: the loop napped %d times on the only P", n)
		case !napper && n != 0:
			t.Fatalf("%v, %s handler: the loop napped %d times; only a parked loop with pooled handlers naps", e, style, n)
		}
		t.Logf("%d naps", n)
	})
}

// tsPerProcsAndStyle runs f for each engine, under GOMAXPROCS 1 and 2,
// with inline and with goroutine handlers, on an echo server of one loop
// (listened with opts) that garbage collections, one after the other,
// keep stopping. Naps draw on a process-wide budget of Ps, so no loop of
// an earlier test may linger and hold it; GOMAXPROCS is put back at the
// end.
func tsPerProcsAndStyle(t *testing.T, opts []Option, f func(t *testing.T, e Engine, ln *Listener, procs int, style tsStyle)) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer engineLinger.Store(engineLinger.Swap(0))
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, procs := range []int{1, 2} {
			for _, style := range []tsStyle{tsInline, tsHandler} {
				t.Run(fmt.Sprintf("gomaxprocs=%d/%s", procs, style), func(t *testing.T) {
					runtime.GOMAXPROCS(procs)
					uringp.RefreshProcs()
					ln := listen(t, e, "tcp", append([]Option{WithLoops(1)}, opts...)...)
					var serve []Option
					if style == tsInline {
						serve = append(serve, WithInlineHandler())
					}
					tsServeHandler(t, ln, tsEchoHandler, serve...)
					defer tsCollectAlways()()
					f(t, e, ln, procs, style)
				})
			}
		}
	})
}

// tsCollectAlways runs garbage collections back to back, each stopping
// the world, until the function it returns is called.
func tsCollectAlways() (stop func()) {
	done := make(chan struct{})
	var gcs sync.WaitGroup
	gcs.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				runtime.GC()
			}
		}
	})
	return func() { close(done); gcs.Wait() }
}

// tsEchoRounds has clients std net connections to ln each make rounds
// 1 KiB echo exchanges, every byte checked, pausing between rounds.
func tsEchoRounds(t *testing.T, ln *Listener, clients, rounds int, pause time.Duration) {
	t.Helper()
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		c := tsDialStd(t, "tcp", ln.Addr().String())
		wg.Go(func() {
			defer c.Close()
			msg := bytes.Repeat([]byte{byte('a' + i)}, 1024)
			for r := range rounds {
				if err := tsEchoOnce(c, string(msg)); err != nil {
					errs <- fmt.Errorf("client %d round %d: %w", i, r, err)
					return
				}
				time.Sleep(pause)
			}
		})
	}
	wg.Wait()
	close(errs)
	tsReportErrors(t, errs)
}
