//go:build linux

package uringp

import (
	"runtime"
	"time"
	"unsafe"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// enter is the engines' io_uring_enter. The ring offers two ways into the
// kernel, and this is where the engine picks one. An enter that cannot
// sleep (it waits for nothing and asks for no SQ room) bypasses the Go
// scheduler (Ring.EnterRaw): submission and task work are bounded work,
// and telling the scheduler costs more than they do, since sysmon hands
// off the P of a thread that stays in a system call past its tick, and a
// loopback send runs the receiver's network stack inline. An enter that
// may sleep tells the scheduler (Ring.Enter), so that the P goes to other
// goroutines meanwhile; a nap keeps it on purpose instead (nap.go).
//
// mayBlock says that requests in flight may make any enter sleep in the
// calling thread, however little it asks to wait; every enter then tells
// the scheduler, as a blocking system call does. Socket requests never do.
// A file read or write is issued inline, from the enter that submits it,
// and may be retried from the task work a later enter runs; on a file
// system without FMODE_NOWAIT that work can sleep: io_uring polls the
// file to learn whether a non-blocking try is worth it, and FUSE answers
// the poll only when its server does. An enter that bypasses the
// scheduler holds its P meanwhile, and a stop-the-world waits for the
// thread; when the FUSE server is a goroutine of the same process,
// forever (TestFileReadSleepingFS).
func enter(r *uring.Ring, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr, mayBlock bool) (int, error) {
	if !mayBlock && minComplete == 0 && flags&uring.EnterSQWait == 0 {
		return r.EnterRaw(toSubmit, minComplete, flags, arg, argSize)
	}
	return r.Enter(toSubmit, minComplete, flags, arg, argSize)
}

// enter is enter on the loop's ring.
func (l *loop) enter(toSubmit, minComplete, flags uint32) (int, error) {
	return enter(l.ring, toSubmit, minComplete, flags, nil, 0, l.mayBlock)
}

// enterTimeout is l.enter with the wait bounded by d (EnterExtArg).
func (l *loop) enterTimeout(toSubmit, minComplete, flags uint32, d time.Duration) (int, error) {
	arg, size := l.ring.TimeoutArg(d)
	return enter(l.ring, toSubmit, minComplete, flags|uring.EnterExtArg, arg, size, l.mayBlock)
}

// getSQE returns a free SQE, submitting what is queued when the SQ is
// full.
func (l *loop) getSQE() *uring.SQE {
	for {
		if sqe := l.ring.GetSQE(); sqe != nil {
			l.stats.SQEs.Add(1)
			return sqe
		}
		l.submit(0)
	}
}

// submit enters the kernel to submit queued SQEs, waiting for at least
// wait completions (0: do not wait).
func (l *loop) submit(wait uint32) {
	if l.mode == ModeSQPoll {
		l.sqpollSubmit(wait)
		return
	}
	toSubmit := l.ring.Flush()
	l.cancelClock++
	var err error
	switch {
	case wait > 0:
		l.stats.EnterWait.Add(1)
		err = l.wait(toSubmit, wait)
	case toSubmit > 0:
		l.stats.EnterSubmit.Add(1)
		_, err = l.enter(toSubmit, 0, uring.EnterGetEvents)
	default:
		l.stats.EnterGetEvents.Add(1)
		_, err = l.enter(0, 0, uring.EnterGetEvents)
	}
	if err != nil && !uring.IsTemporary(err) {
		// EBADF, EFAULT, EEXIST (another thread) or EBADR (CQEs lost to
		// OOM): a bug of ours, or a kernel that cannot keep the ring.
		panic("ringpoll: io_uring_enter: " + err.Error())
	}
}

// wait submits toSubmit SQEs and sleeps until wait completions are ready
// or the next timer is due.
func (l *loop) wait(toSubmit, wait uint32) (err error) {
	if d, timed := l.nextTimer(); timed {
		_, err = l.enterTimeout(toSubmit, wait, uring.EnterGetEvents, max(d, time.Microsecond))
		return err
	}
	_, err = l.enter(toSubmit, wait, uring.EnterGetEvents)
	return err
}

// submitOrWait submits what the last turn queued and, when nothing is left
// to do, sleeps in io_uring_enter until a completion arrives.
func (l *loop) submitOrWait() {
	flags := l.ring.SQFlags()
	if flags&uring.SQCQOverflow != 0 {
		l.stats.CQOverflows.Add(1)
	}
	stale := flags&uring.SQTaskrun != 0 && l.parker != nil && l.taskrunTurn == l.turns-1
	if stale {
		// The last turn entered to run the thread's task work and the
		// flag stayed: the work is another thread's, queued for a
		// request the loop submitted from there before it moved (a
		// parked loop has no thread of its own). Only that thread runs
		// it, when it next enters the kernel or returns from it; more
		// enters from here would spin until then. Sleep instead: the
		// request's completion, once that thread ran it, wakes the
		// poller.
		flags &^= uring.SQTaskrun
	}
	busy := l.ring.CQReady() > 0 || flags&(uring.SQTaskrun|uring.SQCQOverflow) != 0 || l.pending() || l.sendReady()
	if busy {
		if l.ring.SQReady() > 0 || flags&(uring.SQTaskrun|uring.SQCQOverflow) != 0 {
			if flags&uring.SQTaskrun != 0 {
				l.taskrunTurn = l.turns
			}
			l.submit(0)
		}
		return
	}
	if !l.yielded && l.blockers > 0 && l.locked {
		// Handlers this turn woke may be runnable on our P: let them run
		// and hand us their output before we sleep, so it goes out in
		// the next enter rather than after a wake-up. A parked loop does
		// not: the yield after its reap ran them already, and its park
		// lets anything still runnable run.
		l.yielded = true
		runtime.Gosched()
		l.awake.Slept()
		if l.pending() {
			return
		}
	}
	l.yielded = false
	if l.tuning.BusyPoll > 0 && l.mode != ModeSQPoll {
		if l.ring.SQReady() > 0 {
			l.submit(0)
		}
		if l.busyPoll(busyWatch(stale)) {
			return
		}
	}
	nap := l.mayNap()
	how := uint32(asleepInPoller)
	if l.locked || nap {
		how = asleepInKernel
	}
	l.sleeping.Store(how)
	switch {
	case l.pending():
	case l.mode == ModeSQPoll && l.spin():
	case l.locked:
		l.submit(1) // a kernel wait: the P goes to others only if sysmon takes it
	case nap:
		l.nap()
	default:
		l.noteSleep(l.park())
		if l.readyLooks > 1 { // it parked in Go's poller: others had the P
			l.awake.Slept()
		}
	}
	if nap {
		keptPs.give()
	}
	l.sleeping.Store(awake)
}

// armWake keeps a READ of the wake eventfd in flight: a producer's write
// completes it, which ends a blocking enter.
func (l *loop) armWake() {
	sqe := l.getSQE()
	sqe.PrepRead(l.ev.FD(), l.page[:8])
	sqe.UserData = userData(kindWake, 0, 0)
}

// cancel submits the cancellation of the request ud. Only a failure posts
// a CQE; a cancel that found its target ends it with the target's own
// final CQE.
func (l *loop) cancel(ud uint64) { l.cancelAs(ud, userData(kindCancel, 0, 0)) }

// cancelAs is cancel with own as the user data of a failure's CQE.
func (l *loop) cancelAs(ud, own uint64) {
	sqe := l.getSQE()
	sqe.PrepCancel64(ud, 0)
	sqe.UserData = own
}

func (l *loop) sendReady() bool { return l.send != nil && l.send.ready() }
