//go:build linux

package uringp

import (
	"runtime"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// TestNapWake: a loop naps only with connections whose users run on
// goroutines; a producer that posts to a napping loop wakes it through
// the eventfd READ the loop keeps armed, so that the nap ends with that
// completion rather than at its 10 ms bound; and a loop napping that way
// gives its P back to the budget afterwards.
func TestNapWake(t *testing.T) {
	l := napLoopAtTwoPs(t)
	if err := l.setup(); err != nil {
		l.teardownRing()
		t.Skipf("io_uring: %v", err)
	}
	defer l.teardownRing()
	l.submit(0) // the wake READ armed at setup

	l.napNext = true
	if l.mayNap() {
		keptPs.give()
		t.Fatal("a loop without connections whose users run on goroutines would nap")
	}
	l.blockers = 1 // as if a pooled handler's connection were attached
	if !l.mayNap() {
		t.Fatal("GOMAXPROCS=2 left no P for a loop's nap")
	}
	l.sleeping.Store(asleepInKernel)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.nap()
	}()
	l.post(task{kind: taskResume}) // what a producer does
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the nap did not end")
	}
	keptPs.give()
	if got := l.sleeping.Load(); got != awake {
		t.Errorf("the producer left sleeping at %d, want awake", got)
	}
	var cqes [8]uring.CQE
	n := l.ring.PeekCQE(cqes[:])
	var woke bool
	for _, c := range cqes[:n] {
		if k, _, _ := splitUserData(c.UserData); k == kindWake {
			woke = true
		}
	}
	if !woke {
		t.Fatalf("the nap ended without the wake READ's completion (%d CQEs): the producer did not write the eventfd", n)
	}
	if l.stats.Naps.Load() != 1 || l.stats.Wakeups.Load() != 1 {
		t.Errorf("naps %d, wake-ups %d; want 1 and 1", l.stats.Naps.Load(), l.stats.Wakeups.Load())
	}
	if !keptPs.take() {
		t.Fatal("the nap's P was not given back to the budget")
	}
	keptPs.give()
}

// napLoopAtTwoPs returns a new loop that may nap, under GOMAXPROCS=2
// until the test ends; it skips the test if naps are off.
func napLoopAtTwoPs(t *testing.T) *loop {
	t.Helper()
	procs := runtime.GOMAXPROCS(2)
	RefreshProcs()
	t.Cleanup(func() {
		runtime.GOMAXPROCS(procs)
		RefreshProcs()
	})
	l := newLoop(ModeUring, Tuning{}.withDefaults())
	if !l.napping {
		t.Skip("naps are off (RINGPOLL_NAP=off)")
	}
	return l
}

// TestNoNapOnTheOnlyP: with GOMAXPROCS=1 a loop never naps, however
// close together its completions come.
func TestNoNapOnTheOnlyP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	RefreshProcs()
	defer RefreshProcs()
	l := newLoop(ModeUring, Tuning{}.withDefaults())
	l.napNext, l.blockers = true, 1
	if l.mayNap() {
		keptPs.give()
		t.Fatal("a loop would nap on the only P")
	}
}

// TestNapOnlyWhileInputIsSeldom: a loop naps while the turns that bring
// it input come napGap apart or more on average, not when they come more
// often; a long silence counts as napFor, so that the average comes back
// down within a few dozen turns once input is frequent again.
func TestNapOnlyWhileInputIsSeldom(t *testing.T) {
	l := napLoopAtTwoPs(t)
	l.napNext, l.blockers = true, 1
	naps := func() bool {
		if l.mayNap() {
			keptPs.give()
			return true
		}
		return false
	}
	if !naps() {
		t.Fatal("a loop that has seen no input yet would not nap")
	}
	now := int64(0)
	feed := func(gap time.Duration, turns int) {
		for range turns {
			now += int64(gap)
			l.noteInput(now)
		}
	}
	feed(napGap/3, 64)
	if naps() {
		t.Fatalf("input every %v on average (%v): the loop would nap", napGap/3, time.Duration(l.inputGap))
	}
	feed(2*napGap, 64)
	if !naps() {
		t.Fatalf("input every %v on average (%v): the loop would not nap", 2*napGap, time.Duration(l.inputGap))
	}
	feed(napGap/3, 64)
	feed(time.Hour, 1)
	if got := time.Duration(l.inputGap); got > napFor/4 {
		t.Fatalf("an hour's silence took the average to %v; a gap counts up to napFor (%v)", got, napFor)
	}
	feed(napGap/3, 48)
	if naps() {
		t.Fatalf("48 frequent turns after a silence: the average is still %v, the loop would nap", time.Duration(l.inputGap))
	}
}

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
