//go:build linux

package uringp

import (
	"runtime"
	"testing"
)

// TestPBudget: loops may keep at most GOMAXPROCS-1 Ps between them, none
// with GOMAXPROCS=1, and a P given back may be taken again.
func TestPBudget(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 4} {
		runtime.GOMAXPROCS(procs)
		var b pBudget // a fresh one reads GOMAXPROCS on its first take
		taken := 0
		for b.take() {
			taken++
			if taken > procs {
				t.Fatalf("GOMAXPROCS=%d: take keeps succeeding (%d so far)", procs, taken)
			}
		}
		if taken != procs-1 {
			t.Fatalf("GOMAXPROCS=%d: %d Ps kept, want %d", procs, taken, procs-1)
		}
		if got := b.n.Load(); got != int32(taken) {
			t.Fatalf("GOMAXPROCS=%d: a refused take left the count at %d, want %d", procs, got, taken)
		}
		if taken > 0 {
			b.give()
			if !b.take() {
				t.Fatalf("GOMAXPROCS=%d: a P given back could not be taken again", procs)
			}
		}
	}
}
