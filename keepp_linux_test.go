package ringpoll

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

// keepPEngines are the engines withLoopKeepsP applies to.
var keepPEngines = map[Engine]bool{EngineUring: true, EngineUringHybrid: true, EngineUringReactor: true}

// waitsKeptP sums the waits in which ln's loops kept their P, a counter
// LoopStats leaves out since only the tests' keep-P mode moves it.
func waitsKeptP(ln *Listener) (n uint64) {
	for _, s := range ln.eng.eng.Stats() {
		n += s.WaitsKeptP.Load()
	}
	return n
}

// TestLoopKeepsP serves echo exchanges with withLoopKeepsP while garbage
// collections stop the world again and again, in the inline and the
// goroutine handler styles, and checks every byte, and the loop's count of
// waits that kept their P: some under GOMAXPROCS=2 (for the engines the
// option applies to), none under GOMAXPROCS=1, where keeping the only P
// would starve every other goroutine. The goroutine handlers run on the
// Ps the loop left, so a loop that kept a P it should not have shows up
// here as a hang.
func TestLoopKeepsP(t *testing.T) {
	tsPerProcsAndStyle(t, []Option{withLoopKeepsP()}, func(t *testing.T, e Engine, ln *Listener, procs int, style tsStyle) {
		tsEchoRounds(t, ln, 8, 200)

		keptNow := func() uint64 { return waitsKeptP(ln) }
		if procs == 2 && keepPEngines[e] {
			// The idle loop waits again every keptWaitBound,
			// and keeps its P once no other loop holds the
			// budget.
			tsEventually(t, "a wait to keep its P", func() bool { return keptNow() > 0 })
		}
		kept := keptNow()
		switch {
		case procs == 1 && kept != 0:
			t.Fatalf("GOMAXPROCS=1: %d waits kept the only P", kept)
		case procs == 2 && keepPEngines[e] && kept == 0:
			t.Fatalf("GOMAXPROCS=2: no wait kept its P")
		case !keepPEngines[e] && kept != 0:
			t.Fatalf("%v ignores withLoopKeepsP, yet %d waits kept their P", e, kept)
		}
		t.Logf("%d waits kept their P", kept)
	})
}

// TestLoopKeepsPWithoutPreemptSignals runs its child with
// GODEBUG=asyncpreemptoff=1: the runtime then sends no preemption signal,
// so nothing but the loop's own bound on a kept wait ends the wait of an
// idle loop asleep on its P, and a garbage collection, which must stop
// that loop, waited for the next completion: on an idle server, for ever.
// The child must finish its collections; it also reports how often an
// idle loop keeping its P wakes.
func TestLoopKeepsPWithoutPreemptSignals(t *testing.T) {
	needUring(t)
	var out ufLockedBuffer
	cmd := ufChild("TestLoopKeepsPWithoutPreemptSignalsChild", ufChildEnv+"=keepp-nosignal",
		"GODEBUG=asyncpreemptoff=1", "GOMAXPROCS=2")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start the test binary as a child: %v", err)
	}
	err := ufWaitChild(t, cmd, 3*tsTimeout)
	if err != nil || !strings.Contains(out.String(), "--- PASS: TestLoopKeepsPWithoutPreemptSignalsChild") {
		t.Fatalf("child: %v; output:\n%s", err, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "idle kept-P loop") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// TestLoopKeepsPWithoutPreemptSignalsChild is the child: an idle uring
// loop that keeps its P, and garbage collections.
func TestLoopKeepsPWithoutPreemptSignalsChild(t *testing.T) {
	if os.Getenv(ufChildEnv) != "keepp-nosignal" {
		t.Skip("the child of TestLoopKeepsPWithoutPreemptSignals")
	}
	uringp.RefreshProcs()
	ln := listen(t, EngineUring, "tcp", WithLoops(1), withLoopKeepsP())
	kept := func() uint64 { return waitsKeptP(ln) }
	tsEventually(t, "the idle loop to sleep on its P", func() bool { return kept() >= 2 })
	for range 20 {
		runtime.GC()
	}
	// The wake-ups of the idle loop, over half a second.
	before, start := loopStatsOf(ln)[0].EnterWait, time.Now()
	time.Sleep(500 * time.Millisecond)
	waits := loopStatsOf(ln)[0].EnterWait - before
	t.Logf("idle kept-P loop: %.0f wake-ups per second", float64(waits)/time.Since(start).Seconds())
}

// tsPerProcsAndStyle runs f for each engine, under GOMAXPROCS 1 and 2,
// with inline and with goroutine handlers, on an echo server of one loop
// (listened with opts) that garbage collections, one after the other,
// keep stopping. Kept Ps and naps draw on a process-wide budget, so no
// loop of an earlier test may linger and hold it; GOMAXPROCS is put back
// at the end.
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
// 1 KiB echo exchanges, every byte checked.
func tsEchoRounds(t *testing.T, ln *Listener, clients, rounds int) {
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
			}
		})
	}
	wg.Wait()
	close(errs)
	tsReportErrors(t, errs)
}
