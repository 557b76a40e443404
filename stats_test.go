//go:build linux

package ringpoll

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestStats: a Server's Stats and its listener's count the same bytes,
// name the engine that runs and its loops; the Server's also counts its
// handler panics; counters only grow. Every engine. Stats are the
// engine's, which serves every listener with the same engine and loop
// count: a count no other test uses keeps the connections of tests before
// (a drain that expires seconds after its test ended) out of them.
func TestStats(t *testing.T) {
	const loops = 8
	forEachEngine(t, func(t *testing.T, e Engine) {
		ln := listen(t, e, "tcp", WithLoops(loops))
		s := tsServeHandler(t, ln, tsLines(func(c *Conn, line []byte) error {
			if string(line) == "panic\n" {
				panic("TestStats")
			}
			return tsEchoLine(c, line)
		}), WithLogger(slog.New(slog.DiscardHandler)))
		const lines = 100
		line := strings.Repeat("x", 999) + "\n"
		c := tsDialStd(t, "tcp", ln.Addr().String())
		for range lines {
			if err := tsEchoOnce(c, line); err != nil {
				t.Fatal(err)
			}
		}
		victim := tsDialStd(t, "tcp", ln.Addr().String())
		if _, err := victim.Write([]byte("panic\n")); err != nil {
			t.Fatal(err)
		}
		tsReadEOF(t, victim, true)

		ls, ss := ln.Stats(), s.srv.Stats()
		if ls.Engine != e || ss.Engine != e || ls.Loops != loops || ss.Loops != loops {
			t.Errorf("listener %v, server %v: want engine %v, %d loops", ls, ss, e, loops)
		}
		if want := uint64(lines * len(line)); ls.BytesIn < want || ss.BytesIn < ls.BytesIn {
			t.Errorf("BytesIn: listener %d, server %d; want at least %d", ls.BytesIn, ss.BytesIn, want)
		}
		if ls.HandlerPanics != 0 || ss.HandlerPanics != 1 {
			t.Errorf("HandlerPanics: listener %d, server %d; want 0 and 1", ls.HandlerPanics, ss.HandlerPanics)
		}
		if ss.DrainsExpired != 0 || ss.BuffersRetired != 0 {
			t.Errorf("server %v: a quiet echo expired a drain or retired a buffer", ss)
		}
		if err := tsEchoOnce(c, line); err != nil {
			t.Fatal(err)
		}
		if later := ln.Stats(); later.BytesIn <= ls.BytesIn {
			t.Errorf("BytesIn went from %d to %d after another line", ls.BytesIn, later.BytesIn)
		}
	})
}

// TestAcceptsCounted: every connection a Listener accepts is counted on
// the loop it joins (LoopStats.Accepts), on every engine, whether it is
// taken by Accept or by a Server. Eleven loops, a count no other test
// uses, keep other tests' connections out of the engine's counters.
func TestAcceptsCounted(t *testing.T) {
	const loops, conns = 11, 6
	forEachEngine(t, func(t *testing.T, e Engine) {
		accepts := func(ln *Listener) (n uint64) {
			for _, s := range loopStatsOf(ln) {
				n += s.Accepts
			}
			return n
		}
		ln := listen(t, e, "tcp", WithLoops(loops))
		before := accepts(ln)
		for range conns / 2 {
			peer := tsDialStd(t, "tcp", ln.Addr().String())
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			peer.Close()
		}
		tsServeHandler(t, ln, tsEchoHandler)
		for range conns / 2 {
			if err := tsEchoOnce(tsDialStd(t, "tcp", ln.Addr().String()), "hi"); err != nil {
				t.Fatal(err)
			}
		}
		// A Server counts a connection once its Conn is made, which its
		// echo may beat: wait for the count, which must then stay.
		tsEventually(t, fmt.Sprintf("the loops to count %d accepts", conns), func() bool { return accepts(ln)-before >= conns })
		if got := accepts(ln) - before; got != conns {
			t.Errorf("the loops counted %d accepts, want %d", got, conns)
		}
	})
}
