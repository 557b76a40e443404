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

// TestSpareP: a loop reads GOMAXPROCS on its first look, then goes on its
// copy for procsTurns turns, or until RefreshProcs, and sees a change
// after either.
func TestSpareP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer RefreshProcs()
	runtime.GOMAXPROCS(2)
	RefreshProcs()
	l := &loop{turns: 1}
	if !l.spareP() {
		t.Fatal("GOMAXPROCS=2: no P to spare on the first look")
	}
	runtime.GOMAXPROCS(1)
	keptPs.checked.Store(0) // the shared copy reads GOMAXPROCS when next asked: only the loop's own copy can be old
	l.turns += procsTurns - 1
	if !l.spareP() {
		t.Fatal("the loop read GOMAXPROCS again before procsTurns turns")
	}
	l.turns++
	if l.spareP() {
		t.Fatal("GOMAXPROCS=1: a P to spare after procsTurns turns")
	}
	runtime.GOMAXPROCS(2)
	RefreshProcs()
	if !l.spareP() {
		t.Fatal("GOMAXPROCS=2 and RefreshProcs: the loop did not read it again")
	}
}
