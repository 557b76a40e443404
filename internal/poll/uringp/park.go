//go:build linux

package uringp

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// A parked loop sleeps in Go's network poller instead of io_uring_enter:
// its ring's descriptor, registered there, polls readable when completions
// are ready (io_uring_poll in io_uring/io_uring.c). The loop goroutine is
// then an ordinary goroutine. It holds no thread while it sleeps, and
// waking the handler goroutines of its connections, and being woken by
// them, is a goroutine switch on the same P. A locked loop pays a thread
// switch there instead (two per turn that wakes handlers): its P moves to
// another thread to run them and comes back.
//
// The ring then cannot be bound to one thread. It has no SINGLE_ISSUER and
// no DEFER_TASKRUN, and any thread the loop goroutine runs on may enter it.
// With COOP_TASKRUN, a completion's task work goes to the thread that
// submitted the request without an interrupt. That thread runs it at its
// next entry into the kernel, or wakes for it if it sleeps interruptibly
// (task_work_add with TWA_SIGNAL_NO_IPI, kernel/task_work.c). Without
// COOP_TASKRUN, every completion would interrupt that thread with an IPI.
//
// A request's task work goes to the thread that submitted it for as long
// as the request lives, and a multishot receive lives as long as its
// connection. When the loop goroutine moves to another thread (the
// scheduler gave its P to another thread while one slept in a syscall, or
// several Ps take turns running it), the receives it armed before still
// wake their old thread, which may sleep in a futex, for every arrival: a
// context switch each. So a loop notes the thread it runs on every
// threadEvery turns (a gettid), and once it has been seen settleSamples
// times in a row on a new one, it cancels and re-arms, from there, each
// input request armed elsewhere when that request next completes. A loop
// that keeps moving between threads never settles and re-arms nothing.
//
// Wake-ups need no syscall: a producer sets the descriptor's read deadline
// in the past, which ends the loop's wait in the poller at once (as
// net/http interrupts a blocked read).

// parkedFlags are the setup flags of a parked loop's ring, in the order
// uring.NewRingFallback tries them: NO_SQARRAY (6.6), SUBMIT_ALL (5.18)
// and COOP_TASKRUN (5.19) are dropped, newest first, on kernels without
// them.
var parkedFlags = []uint32{
	uring.SetupCoopTaskrun | uring.SetupTaskrunFlag | uring.SetupSubmitAll | uring.SetupNoSQArray | uring.SetupCQSize,
	uring.SetupCoopTaskrun | uring.SetupTaskrunFlag | uring.SetupSubmitAll | uring.SetupCQSize,
	uring.SetupCQSize,
}

// A loop looks at its thread every threadEvery turns, and re-arms input
// requests armed on another thread once it was seen on its own
// settleSamples times in a row.
const (
	threadEvery   = 16
	settleSamples = 4
)

// aLongTimeAgo is a deadline that has passed: setting it wakes the loop.
var aLongTimeAgo = time.Unix(1, 0)

// parker is what a parked loop waits on: its ring's descriptor (a
// duplicate, non-blocking, which the poller owns) as a RawConn.
type parker struct {
	file  *os.File
	rc    syscall.RawConn
	ready func(uintptr) bool // l.readyToRun, made once
	timed bool               // a deadline is set on file
}

// newParker registers a duplicate of l's ring descriptor with Go's
// poller.
func newParker(l *loop) (*parker, error) {
	file, rc, err := pollRing(l.ring)
	if err != nil {
		return nil, err
	}
	return &parker{file: file, rc: rc, ready: l.readyToRun}, nil
}

// pollRing registers a non-blocking duplicate of ring's descriptor with
// Go's poller, which reports it readable when completions are ready; a
// parked loop or packet reader waits on it with RawConn.Read.
func pollRing(ring *uring.Ring) (*os.File, syscall.RawConn, error) {
	fd, err := unix.FcntlInt(uintptr(ring.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC)", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, nil, os.NewSyscallError("fcntl(O_NONBLOCK)", err)
	}
	file := os.NewFile(uintptr(fd), "io_uring")
	rc, err := file.SyscallConn()
	if err != nil {
		file.Close()
		return nil, nil, err
	}
	return file, rc, nil
}

func (p *parker) close() { p.file.Close() }

// wake ends the loop's wait, or its next one if it is not waiting yet.
func (p *parker) wake() { p.file.SetReadDeadline(aLongTimeAgo) }

// park submits what is queued and sleeps in Go's poller until a
// completion is ready, a producer wakes the loop or the next timer is due.
// It returns how long it slept, or -1 if it found work at once or the
// loop cannot nap (mayNap), which alone asks.
func (l *loop) park() time.Duration {
	p := l.parker
	if l.ring.SQReady() > 0 {
		if l.sendNow() {
			return -1 // work done: a turn, then maybe a park
		}
		l.submit(0)
	}
	if d, timed := l.nextTimer(); timed {
		p.file.SetReadDeadline(time.Now().Add(max(d, time.Microsecond)))
		p.timed = true
	}
	l.stats.Parks.Add(1)
	// Only a loop that may nap needs to know how long it slept.
	timing := l.napping && l.blockers > 0 && l.spareP()
	var start time.Time
	if timing {
		start = time.Now()
	}
	l.readyLooks = 0
	err := p.rc.Read(p.ready)
	slept := time.Duration(-1)
	if timing && l.readyLooks > 1 { // 1: ready at once, it did not wait
		slept = time.Since(start)
	}
	if p.timed || err != nil {
		// A deadline, ours or a producer's, is cleared only once it was
		// seen (a producer's may also land during the turn: it wakes the
		// next wait at once, which finds the inbox as it is).
		p.file.SetReadDeadline(time.Time{})
		p.timed = false
	}
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		panic("ringpoll: waiting for io_uring completions: " + err.Error())
	}
	return slept
}

// checkThread notes, every threadEvery turns, which thread the loop runs
// on.
func (l *loop) checkThread() {
	var moved bool
	switch {
	case l.tuning.MoveEvery > 0:
		// Tests: a move every MoveEvery turns, settled at once.
		moved, l.settled = l.turns%l.tuning.MoveEvery == 0, settleSamples
	case l.turns%threadEvery != 0:
		return
	default:
		tid := unix.Gettid()
		moved = tid != l.tid && l.tid != 0
		l.tid = tid
		if moved {
			l.settled = 0
		} else if l.settled < settleSamples {
			l.settled++
		}
	}
	if moved {
		l.stats.ThreadMoves.Add(1)
		l.thread++
	}
}

// armedElsewhere reports whether c's input request was armed on another
// thread than the one the loop has settled on.
func (l *loop) armedElsewhere(c *conn) bool {
	return l.settled >= settleSamples && c.armThread != l.thread && c.is(fRecvArmed) && !c.is(fCanceling)
}

// readyToRun reports whether the loop has work; when it has none, the
// poller parks it until the ring's descriptor polls readable. Task work
// queued for this thread runs first: with COOP_TASKRUN it waits for the
// thread to enter the kernel.
func (l *loop) readyToRun(uintptr) bool {
	if l.ring.SQFlags()&uring.SQTaskrun != 0 {
		l.stats.EnterGetEvents.Add(1)
		l.cancelClock++
		l.enter(0, 0, uring.EnterGetEvents)
	}
	l.readyLooks++
	return l.ring.CQReady() > 0 || l.pending()
}
