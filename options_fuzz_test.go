//go:build linux

package ringpoll

import (
	"strings"
	"testing"
	"time"
)

// FuzzOptions applies every option with fuzzed values, in a fuzzed order,
// and checks the contract of option validation: a bad value fails the
// config with an error naming the option ("ringpoll: WithX(...)"), a good
// one lands within its documented range, the first bad option is the one
// reported, and nothing panics.
func FuzzOptions(f *testing.F) {
	f.Add(uint8(0), 1, 4096, 4096, int64(0), int64(time.Second), 4096, 4096, int64(time.Millisecond), uint8(0))
	f.Add(uint8(5), 0, 1, -1, int64(-1), int64(-1), 3, 100, int64(0), uint8(3))
	f.Add(uint8(99), 1025, 1<<30, 1<<20, int64(1<<62), int64(5*time.Second), 1<<15, 1<<20, int64(10*time.Second), uint8(7))
	f.Fuzz(func(t *testing.T, engine uint8, loops, inHigh, outHigh int, idle, drain int64, ringCount, ringSize int, busy int64, order uint8) {
		type opt struct {
			name string // the option, as its error names it
			ok   bool   // whether the value is valid
			o    Option
		}
		opts := []opt{
			{"WithEngine(", int(engine) < len(engineNames), WithEngine(Engine(engine))},
			{"WithLoops(", loops >= 1 && loops <= 1024, WithLoops(loops)},
			{"WithInputHighWater(", inHigh >= 4096, WithInputHighWater(inHigh)},
			{"WithOutputHighWater(", outHigh >= 4096, WithOutputHighWater(outHigh)},
			{"WithIdleTimeout(", idle >= 0, WithIdleTimeout(time.Duration(idle))},
			{"WithDrainTimeout(", drain >= 0, WithDrainTimeout(time.Duration(drain))},
			{"WithBufferRing(", ringCount >= 1 && ringCount <= 1<<15 && ringCount&(ringCount-1) == 0 &&
				ringSize >= 512 && ringSize <= 1<<20, WithBufferRing(ringCount, ringSize)},
			{"WithBusyPoll(", busy >= int64(time.Microsecond) && busy <= int64(10*time.Millisecond),
				WithBusyPoll(time.Duration(busy))},
		}
		// Rotate the order, so that every option gets to be first.
		k := int(order) % len(opts)
		opts = append(opts[k:], opts[:k]...)
		var list []Option
		firstBad := ""
		for _, o := range opts {
			list = append(list, o.o)
			if !o.ok && firstBad == "" {
				firstBad = o.name
			}
		}
		c, err := newConfig(list)
		if firstBad != "" {
			if err == nil {
				t.Fatalf("%s with a bad value was accepted", firstBad)
			}
			if !strings.HasPrefix(err.Error(), "ringpoll: "+firstBad) {
				t.Fatalf("error %q does not name the first bad option, %s", err, firstBad)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid options rejected: %v", err)
		}
		if c.engine != Engine(engine) || c.loops != loops || c.inHigh != inHigh || c.outHigh != outHigh ||
			c.idle != time.Duration(idle) || c.drain != time.Duration(drain) ||
			c.ring.buffers != ringCount || c.ring.bufferSize != ringSize ||
			c.ring.busyPoll != time.Duration(busy) {
			t.Fatalf("options not applied as given: %+v", c)
		}
		if pc := c.pollConfig(); pc.InputLowWater > pc.InputHighWater || pc.OutputLowWater > pc.OutputHighWater {
			t.Fatalf("low-water marks above high: %+v", pc)
		}
	})
}

// FuzzParseEngine: every name parses to an engine whose String parses
// back to it, or fails with an error that lists the names; nothing panics.
func FuzzParseEngine(f *testing.F) {
	for _, s := range []string{"auto", "epoll", "uring", "uring-hybrid", "uring-reactor", "uring-sqpoll", "", "URING", "kqueue", " epoll"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		e, err := ParseEngine(name)
		if err != nil {
			if !strings.Contains(err.Error(), "uring-sqpoll") {
				t.Fatalf("ParseEngine(%q): error %q does not list the engines", name, err)
			}
			return
		}
		back, err := ParseEngine(e.String())
		if err != nil || back != e {
			t.Fatalf("ParseEngine(%q) = %v, whose String %q parses to %v, %v", name, e, e.String(), back, err)
		}
	})
}
