//go:build linux

package uringp

import (
	"runtime"
	"sync/atomic"
	"time"
)

// keptPs counts the loops, of every engine in the process, asleep in
// io_uring_enter on a P they kept (Tuning.KeepP).
//
// A loop that sleeps through syscall.Syscall6 gives its P up: sysmon sees
// the thread 20µs into the syscall, hands the P off and starts another
// thread to look for work, which usually finds none and sleeps again; the
// loop takes the P back when it wakes. Under load that happens on most
// waits, and it keeps sysmon polling every 20µs. A loop that keeps its P
// (RawSyscall6) pays none of that, but no other goroutine can use the P
// while it sleeps. So a loop keeps its P only while at least one P stays
// for everything else: with GOMAXPROCS=1 no loop ever keeps one, and with
// GOMAXPROCS=n at most n-1 loops do at a time.
//
// A kept wait never lasts longer than keptWaitBound (enter.go), and the
// runtime's preemption signal ends it sooner with EINTR, so a
// stop-the-world always gets through, and should GOMAXPROCS shrink under a
// kept P, a stale limit slows other goroutines for at most procsRefresh;
// it never starves them.
var keptPs pBudget

// procsRefresh is how old the budget's copy of GOMAXPROCS may get.
// runtime.GOMAXPROCS takes the scheduler's global lock, too dear for
// every wait.
const procsRefresh = 10 * time.Millisecond

// pBudget hands out Ps to keep, up to GOMAXPROCS-1.
type pBudget struct {
	n       atomic.Int32 // Ps kept now
	procs   atomic.Int32 // GOMAXPROCS, as of checked
	checked atomic.Int64 // when procs was read, in time.Now().UnixNano()
}

// take reserves a P to keep, and reports whether one was left.
func (b *pBudget) take() bool {
	if b.n.Add(1) < b.limit() {
		return true
	}
	b.n.Add(-1)
	return false
}

// RefreshProcs makes the loops read GOMAXPROCS again at their next wait,
// rather than within procsRefresh or procsTurns (tests that change
// GOMAXPROCS call it).
func RefreshProcs() {
	keptPs.checked.Store(0)
	procsEpoch.Add(1)
}

// procsEpoch counts RefreshProcs calls; a loop that sees it change reads
// GOMAXPROCS again (spareP).
var procsEpoch atomic.Uint32

// procsTurns is how many turns a loop goes on its own copy of GOMAXPROCS
// (spareP): a turn that reads the clock to age the shared copy costs a
// clock read per sleep, and with GOMAXPROCS=1, where no loop may nap,
// that is all the check ever does.
const procsTurns = 1024

// spareP reports whether GOMAXPROCS, as the loop last read it, leaves a P
// to spare for a nap. It is only a first look: take decides, on a fresh
// enough copy. With one P it is false, and the loop neither times its
// sleeps nor asks the budget, which would read the clock each time.
func (l *loop) spareP() bool {
	if e := procsEpoch.Load(); e != l.procsEpoch || l.turns-l.procsTurn >= procsTurns || l.procsTurn == 0 {
		l.procsEpoch, l.procsTurn = e, l.turns
		l.procs = keptPs.limit()
	}
	return l.procs > 1
}

// give returns a P that take reserved.
func (b *pBudget) give() { b.n.Add(-1) }

// limit returns GOMAXPROCS, read again when the copy is older than
// procsRefresh (or the clock went back).
func (b *pBudget) limit() int32 {
	now := time.Now().UnixNano()
	if c := b.checked.Load(); now-c > int64(procsRefresh) || now < c {
		b.procs.Store(int32(runtime.GOMAXPROCS(0)))
		b.checked.Store(now)
	}
	return b.procs.Load()
}
