package ringpoll

import "testing"

// TestLoopNaps serves echo exchanges with the default options while
// garbage collections stop the world again and again, in the inline and
// the goroutine handler styles, and checks every byte and the loops' naps
// (waits in io_uring_enter on a P the loop keeps, between requests that
// come close together): some under GOMAXPROCS=2 on the engines whose
// loops park, with goroutine handlers; none with inline handlers, and
// none under GOMAXPROCS=1, where a nap would hold the only P and every
// other goroutine of the program would wait for its end. The
// clients are goroutines of this process, and a collection must stop a
// napping loop: either failing shows up as a hang.
func TestLoopNaps(t *testing.T) {
	tsPerProcsAndStyle(t, nil, func(t *testing.T, e Engine, ln *Listener, procs int, style tsStyle) {
		naps := func() (n uint64) {
			for _, s := range loopStatsOf(ln) {
				n += s.Naps
			}
			return n
		}
		exchange := func() { tsEchoRounds(t, ln, 4, 200) }
		exchange()
		// Loops that keep their thread (every one under
		// RINGPOLL_TEST_KEEP_P=1) do not park, so they do not
		// nap either.
		parked := keepPEngines[e] && !keepPByDefault
		// Inline handlers run in the loop: nothing of the
		// loop's waits on a goroutine, and such a loop
		// never naps.
		napper := parked && style == tsHandler
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
