//go:build linux

package uringp

import (
	"errors"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// A parked loop sleeps in Go's poller (park.go). Each such sleep is a
// round through the scheduler: the loop goroutine parks, its thread looks
// for other work, asks the poller without waiting, then waits in
// epoll_pwait, which the task work of the arriving completion interrupts
// (EINTR) before the retried wait finds the ring readable; then the
// goroutine is scheduled again: four system calls and the scheduler's
// search, where a loop that waits in io_uring_enter makes one.
//
// So a loop whose last sleep was short (requests come close together)
// naps instead, when a P can be spared: it waits in
// io_uring_enter(GETEVENTS, min_complete=1), which submits what the turn
// queued, runs the completions' task work and returns with the next
// completion. The nap keeps the loop's P (Ring.EnterRaw): through Ring.Enter,
// sysmon takes the P of a thread that stays in a system call over one of
// its ticks and starts another thread to look for work, again and again
// on a loaded server with GOMAXPROCS=1. A kept P is one no other goroutine
// can use, so a loop naps only while GOMAXPROCS leaves at least one P for
// the rest of the program (keptPs). With GOMAXPROCS=1 a loop never naps:
// on the only P, a goroutine of the program waiting on Go's poller (a
// dial of its own, say) would wait for the nap's end.
//
// A nap that saw no completion for napFor parks, and the next sleep
// parks too unless that one ended within napFor.
//
// A kept P is one the program's handlers cannot use, and the more often
// input comes, the more they want it: a loop naps only while the turns
// that bring it input come napGap apart or more on average (inputGap).
// Input that comes more often finds the loop parked, with its P free.
//
// A loop whose connections all run their users inline (poll.FD.NoBlock)
// does not nap: it has no hand-off to a goroutine to save, and with the
// server sharing its CPUs naps made such a loop dearer
// (docs/ARCHITECTURE.md, "Naps").
//
// napFor is longer than a scheduler tick on purpose: the wait's timer is
// then never the CPU's next event, so arming and cancelling it reprograms
// nothing; a shorter bound reprograms the timer at every nap.
const napFor = 10 * time.Millisecond

// napGap is the shortest average time between a loop's input turns at
// which it naps: with input more often, a nap costs more than it saves,
// since the P it keeps is one the handlers need.
const napGap = 150 * time.Microsecond

// napClock is the origin of the loops' input times (noteInput).
var napClock = time.Now()

// mayNap reports whether the loop naps at this sleep; if so, it has taken
// a P from keptPs, which the caller gives back after the nap.
func (l *loop) mayNap() bool {
	return l.napping && l.napNext && l.blockers > 0 && l.sleepyFiles == 0 && l.spareP() &&
		l.inputGap >= int64(napGap) && keptPs.take()
}

// noteInput notes that a turn brought input, at now (ns since napClock),
// in the moving average of the time between such turns (weight 1/8, a
// gap counted up to napFor). Only loops that may nap keep it, so that
// with one P a turn reads no clock.
func (l *loop) noteInput(now int64) {
	gap := min(now-l.lastInput, int64(napFor))
	l.lastInput = now
	l.inputGap += (gap - l.inputGap) / 8
}

// nap waits in io_uring_enter, keeping the loop's P, for a completion or
// a producer's wake-up, for at most napFor (or until the next timer). If
// none came, it parks in Go's poller.
func (l *loop) nap() {
	d, timed := l.nextTimer()
	if !timed || d > napFor {
		d = napFor
	}
	d = max(d, time.Microsecond)
	l.stats.Naps.Add(1)
	l.stats.EnterWait.Add(1)
	// Kept P: through the raw enter (a nap has no file request that may
	// sleep in flight: mayNap).
	arg, size := l.ring.TimeoutArg(d)
	_, err := l.ring.EnterRaw(l.ring.Flush(), 1, uring.EnterGetEvents|uring.EnterExtArg, arg, size)
	if err != nil && !uring.IsTemporary(err) {
		// EBADF, EFAULT or EBADR: as in submit.
		panic("ringpoll: io_uring_enter: " + err.Error())
	}
	if !errors.Is(err, syscall.ETIME) || l.ring.CQReady() > 0 || d < napFor {
		return // a completion, a signal, or a timer of the loop's own is due
	}
	// Nothing came: park, unless a producer woke us meanwhile (its
	// eventfd write completes the wake READ, which the next turn reaps).
	if !l.sleeping.CompareAndSwap(asleepInKernel, asleepInPoller) || l.pending() {
		return
	}
	l.noteSleep(l.park())
}

// noteSleep notes how long a park slept (-1: not at all, which says
// nothing of how far apart completions come).
func (l *loop) noteSleep(d time.Duration) {
	if d >= 0 {
		l.napNext = d <= napFor && l.napping
	}
}

// keptPs counts the loops, of every engine in the process, napping on a
// P they kept. With GOMAXPROCS=n at most n-1 loops nap at a time, so one
// P always stays for everything else. A nap lasts at most napFor, and the
// runtime's preemption signal ends it sooner with EINTR, so a
// stop-the-world always gets through, and should GOMAXPROCS shrink under
// a kept P, a stale limit slows other goroutines for at most
// procsRefresh; it never starves them.
var keptPs pBudget

// procsRefresh is how old the budget's copy of GOMAXPROCS may get.
// runtime.GOMAXPROCS takes the scheduler's global lock, too dear for
// every nap.
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

// RefreshProcs makes the loops read GOMAXPROCS again at their next sleep,
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
