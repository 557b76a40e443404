//go:build linux

package uringp

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

type taskKind uint8

const (
	taskAttach taskKind = iota
	taskFlush
	taskResume
	taskClose
	taskListen
	taskUnlisten
	taskAcceptResume
	taskFile
	taskFileCancel
	taskSplice
	taskSpliceStop
	taskStop
)

type task struct {
	kind taskKind
	c    *conn
	a    *acceptor
	f    *FileOp
	s    *SpliceOp
}

// loop is one io_uring event loop. The fields under mu are its inbox,
// written by any goroutine; the rest belong to the loop goroutine.
type loop struct {
	mode   Mode
	tuning Tuning
	stats  poll.Stats

	// locked: the loop keeps its thread and sleeps in io_uring_enter
	// (uring-sqpoll, KeepP, a completion batch, pinned CPUs, or input
	// paused by cancel on kernels without a recv byte limit, whose cancels
	// a parked ring loses too often: cancel.go); otherwise it parks in
	// Go's poller (park.go).
	locked bool
	// cpu is 1 + the CPU the locked thread is pinned to (Tuning.CPUs); 0:
	// not pinned.
	cpu    int
	parker *parker // !locked
	// napping: a parked loop that expects its next completion soon may
	// wait for it in io_uring_enter on a P it keeps (nap.go); napNext: its
	// last sleep was short.
	napping bool
	napNext bool
	// procs is GOMAXPROCS as the loop last read it, at turn procsTurn,
	// with RefreshProcs' count at procsEpoch (spareP, keepp.go).
	procs      int32
	procsEpoch uint32
	procsTurn  int
	readyLooks int // readyToRun's calls in this park
	// tid is the thread the loop was last seen on; thread counts the
	// changes (wrapping) and settled the looks since the last (park.go).
	tid     int
	thread  uint16
	settled int
	turns   int // loop turns, counted
	// taskrunTurn is the last turn that entered the ring only because
	// task work was pending (SQTaskrun).
	taskrunTurn int
	// cancels lists the connections with an input cancel in flight,
	// looked at every cancelTick (cancel.go), next at cancelAt.
	cancels  []*conn
	cancelAt time.Time
	// iov is flush's scratch: the slices of the send it prepares, which
	// the default modes need only until the SQE is filled (the output
	// queue holds the bytes until the send completes).
	iov [][]byte
	// cancelClock ticks with every enter and every cancel tick: a cancel
	// two ticks old has had its effect (cancel.go).
	cancelClock uint8
	ev          *poll.EventFD // the wake-up eventfd of a locked or napping loop
	// sleeping says how the loop sleeps (asleep*), so that a producer
	// knows how to wake it.
	sleeping atomic.Uint32
	starving atomic.Bool // some connection waits for buffers (ENOBUFS)

	mu    sync.Mutex
	tasks []task
	// queued is set, under mu, while tasks is not empty: the loop checks
	// its inbox with one load, and takes mu only when there is work.
	queued atomic.Bool

	ring    *uring.Ring
	bufs    *bufPool
	page    []byte // locked: mmap'd page, the wake READ's target
	running []task
	giving  []uint16
	cqes    [256]uring.CQE

	conns      []*conn // by slot
	gens       []uint32
	freeSlots  []uint32
	live       int
	blockers   int // live connections whose users may run on goroutines
	acceptors  []*acceptor
	acceptGens []uint32 // by acceptor slot, as gens is by connection slot
	// File requests in flight, by slot, as conns; files counts them.
	fileOps       []*FileOp
	fileGens      []uint32
	freeFileSlots []uint32
	files         int
	sleepyFiles   int       // of files, those whose requests may sleep in an enter (FileOp.MayBlock)
	pipes         []*pipe   // empty pipes for file sends (splice.go)
	fbufs         *fileBufs // registered file buffers (Tuning.FileBuffers); nil: none
	// splices are the file sends in progress, by connection (few at a
	// time: a pointer in each conn would cost every idle connection).
	splices  map[*conn]*SpliceOp
	notify   []*conn // got input this batch
	starved  []*conn // multishot recv ended with ENOBUFS
	draining map[*conn]time.Time
	yielded  bool
	awake    poll.Awake // yields the P when the load never lets the loop sleep
	batch    uint32     // Tuning.Batch where the kernel has min_wait; else 0
	fixed    uint32     // slots of the ring's fixed-file table (0: none)
	stopping bool
	// noRecvLimit: the kernel rejected a multishot recv byte limit, so
	// input backpressure cancels the recv instead.
	noRecvLimit bool

	send  *sendRings // uring-sqpoll
	stage *stager    // uring, uring-hybrid: small sends go out of it
}

func newLoop(m Mode, t Tuning) *loop {
	return &loop{
		mode:        m,
		tuning:      t,
		locked:      m == ModeSQPoll || t.KeepP || t.Batch > 1 || t.NoRecvLimit || len(t.CPUs) > 0,
		draining:    map[*conn]time.Time{},
		splices:     map[*conn]*SpliceOp{},
		noRecvLimit: t.NoRecvLimit,
		napping:     !t.NoNap && !(m == ModeSQPoll || t.KeepP || t.Batch > 1 || t.NoRecvLimit || len(t.CPUs) > 0),
		awake:       poll.Awake{Every: poll.AwakeEvery},
	}
}

// run is the loop goroutine. A locked loop locks itself to its thread for
// good: the ring belongs to the thread that made it (SINGLE_ISSUER,
// DEFER_TASKRUN), and when run returns the runtime ends the thread with
// it. A parked loop runs on whatever thread the scheduler gives it.
func (l *loop) run(started chan<- error) {
	if l.locked {
		runtime.LockOSThread()
	}
	if l.cpu > 0 {
		var set unix.CPUSet
		set.Set(l.cpu - 1)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			started <- fmt.Errorf("uring: pinning loop to CPU %d: %w", l.cpu-1, os.NewSyscallError("sched_setaffinity", err))
			return
		}
	}
	if err := l.setup(); err != nil {
		l.teardownRing()
		started <- err
		return
	}
	started <- nil
	for {
		l.turns++
		if l.parker != nil {
			l.checkThread()
		}
		if l.runTasks() {
			l.stopping = true
		}
		if l.stopping && l.live == 0 && l.liveAcceptors() == 0 && l.files == 0 {
			break
		}
		l.replenish()
		l.submitOrWait()
		if l.reap() && l.blockers > 0 {
			// Readers and handlers this batch woke may be runnable on
			// our P: let them run now and queue their replies, so the
			// next enter submits those and collects new completions in
			// one call, rather than entering once for each trickle of
			// deferred completions while the handlers wait for a P.
			//
			// Inline handlers (poll.FD.NoBlock) ran in reap already:
			// with only those, there is nobody to yield to, and a
			// yield costs two thread switches (the loop keeps its
			// thread).
			runtime.Gosched()
			l.awake.Slept()
		}
		l.expire()
		l.awake.Turn()
	}
	l.teardownRing()
}

func (l *loop) setup() error {
	var err error
	switch {
	case l.mode == ModeSQPoll:
		l.ring, err = newSQPollRing(l.tuning, nil)
	case l.locked:
		l.ring, err = newLoopRing(l.tuning.SQEntries, l.tuning.CQEntries)
	default:
		l.ring, err = newRing(l.tuning.SQEntries, uring.Params{CQEntries: l.tuning.CQEntries}, parkedFlags)
	}
	if err != nil {
		return err
	}
	if l.locked && l.mode != ModeSQPoll {
		// Best effort: saves a file table lookup per enter.
		l.ring.RegisterRingFD()
		if l.ring.Params.Features&uring.FeatMinTimeout != 0 {
			l.batch = l.tuning.Batch
		}
	}
	if l.mode == ModeUring || l.mode == ModeHybrid {
		// Best effort too: requests on a connection in the table skip
		// the descriptor's lookup and reference count (fixed files).
		n := fixedSlots()
		if n > 0 && l.ring.RegisterFilesSparse(n) == nil {
			l.fixed = n
		}
	}
	if l.locked || l.napping {
		if l.ev, err = poll.NewEventFD(); err != nil {
			return err
		}
		if l.page, err = unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
			return os.NewSyscallError("mmap", err)
		}
	}
	if !l.locked {
		if l.parker, err = newParker(l); err != nil {
			return err
		}
	}
	if l.mode != ModeReactor {
		if l.bufs, err = newBufPool(l, l.tuning.Buffers, l.tuning.BufferSize, l.tuning.inc); err != nil {
			return err
		}
	}
	if l.mode == ModeSQPoll {
		if l.send, err = newSendRings(l); err != nil {
			return err
		}
	}
	if l.mode == ModeUring || l.mode == ModeHybrid {
		if l.stage, err = newStager(); err != nil {
			return err
		}
	}
	if l.tuning.FileBuffers > 0 {
		// Best effort: without them, file requests use the caller's
		// memory (RLIMIT_MEMLOCK may refuse the pinned pages).
		l.fbufs, _ = newFileBufs(l.ring, l.tuning.FileBuffers)
	}
	if l.locked || l.napping {
		l.armWake()
	}
	return nil
}

// maxFixedSlots bounds a loop's fixed-file table: the kernel keeps a
// pointer per slot, and connections past it simply go without.
const maxFixedSlots = 1 << 14

// fixedSlots returns the size of a loop's fixed-file table: the kernel
// refuses one larger than RLIMIT_NOFILE.
func fixedSlots() uint32 {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) != nil {
		return 0
	}
	return uint32(min(lim.Cur, maxFixedSlots))
}

// teardownRing releases the ring and what the kernel shared with it.
// Closing the ring cancels whatever is still in flight (only the wake READ
// by now).
func (l *loop) teardownRing() {
	l.closePipes()
	if l.send != nil {
		l.send.close()
	}
	if l.bufs != nil {
		l.bufs.close()
	}
	if l.stage != nil {
		l.stage.close()
	}
	if l.parker != nil {
		l.parker.close()
	}
	if l.ring != nil {
		l.ring.Close()
	}
	if l.fbufs != nil {
		l.fbufs.close() // after the ring: it held the pages
	}
	if l.ev != nil {
		l.ev.Close()
	}
	if l.page != nil {
		unix.Munmap(l.page)
	}
}

// How a loop sleeps (loop.sleeping).
const (
	awake          = iota
	asleepInPoller // parked: a producer sets the parker's deadline
	asleepInKernel // in io_uring_enter: a producer writes the eventfd
)

// post queues t and wakes the loop if it sleeps. The loop sets sleeping,
// re-checks the inbox (queued), and only then blocks; a producer sets
// queued, then writes the eventfd only if it clears sleeping itself. Go's
// atomics are sequentially consistent, so one side always sees the other
// (Dekker).
func (l *loop) post(t task) {
	l.later(t)
	l.wake()
}

func (l *loop) wake() {
	if s := l.sleeping.Load(); s != awake && l.sleeping.CompareAndSwap(s, awake) {
		l.stats.Wakeups.Add(1)
		if s == asleepInPoller {
			l.parker.wake()
			return
		}
		l.ev.Signal()
	}
}

// later queues t from the loop itself, without a wake-up.
func (l *loop) later(t task) {
	l.mu.Lock()
	l.tasks = append(l.tasks, t)
	l.queued.Store(true)
	l.mu.Unlock()
}

// Flush implements poll.Loop.
func (l *loop) Flush(fd *poll.FD) {
	c := (*conn)(fd.Private)
	if l.send != nil && l.send.flush(c) {
		return
	}
	l.post(task{kind: taskFlush, c: c})
}

// Resume implements poll.Loop.
func (l *loop) Resume(fd *poll.FD) { l.post(task{kind: taskResume, c: (*conn)(fd.Private)}) }

// Close implements poll.Loop.
func (l *loop) Close(fd *poll.FD) { l.post(task{kind: taskClose, c: (*conn)(fd.Private)}) }

// Stats implements poll.Loop.
func (l *loop) Stats() *poll.Stats { return &l.stats }

// pending reports whether the inbox holds work.
func (l *loop) pending() bool {
	if l.queued.Load() {
		return true
	}
	return len(l.starved) > 0 && l.bufs.anyBack()
}

// runTasks runs the inbox and reports whether the loop was told to stop.
func (l *loop) runTasks() (stop bool) {
	if !l.queued.Load() {
		return false
	}
	l.mu.Lock()
	l.running, l.tasks = l.tasks, l.running[:0]
	l.queued.Store(false)
	l.mu.Unlock()
	for i, t := range l.running {
		switch t.kind {
		case taskAttach:
			l.attach(t.c)
		case taskFlush:
			l.flush(t.c)
		case taskResume:
			l.resume(t.c)
		case taskClose:
			l.close(t.c)
		case taskListen:
			l.listen(t.a)
		case taskUnlisten:
			l.unlisten(t.a)
		case taskAcceptResume:
			l.acceptResume(t.a)
		case taskFile:
			l.submitFile(t.f)
		case taskFileCancel:
			l.cancelFile(t.f)
		case taskSplice:
			l.startSplice(t.s)
		case taskSpliceStop:
			l.stopSplice(t.s)
		case taskStop:
			stop = true
		}
		l.running[i] = task{}
	}
	return stop
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
		// Not with requests in flight that may sleep in this thread
		// (Ring.SetMayBlock): a kept P would sleep with them.
		kept := l.tuning.KeepP && l.sleepyFiles == 0 && keptPs.take()
		if kept {
			l.stats.WaitsKeptP.Add(1)
			l.ring.SetKeepP(true)
		}
		err = l.wait(toSubmit, wait, kept)
		if kept {
			l.ring.SetKeepP(false)
			keptPs.give()
		}
	case toSubmit > 0:
		l.stats.EnterSubmit.Add(1)
		_, err = l.ring.Enter(toSubmit, 0, uring.EnterGetEvents, nil, 0)
	default:
		l.stats.EnterGetEvents.Add(1)
		_, err = l.ring.Enter(0, 0, uring.EnterGetEvents, nil, 0)
	}
	if err != nil && !uring.IsTemporary(err) {
		// EBADF, EFAULT, EEXIST (another thread) or EBADR (CQEs lost to
		// OOM): a bug of ours, or a kernel that cannot keep the ring.
		panic("ringpoll: io_uring_enter: " + err.Error())
	}
}

// keptWaitBound bounds a wait that keeps the loop's P. Such a wait is
// invisible to the scheduler, so a stop-the-world reaches it only through
// the runtime's preemption signal, which ends it with EINTR; where no
// signal comes (GODEBUG=asyncpreemptoff=1), the bound brings the loop back
// to Go code, where it can be stopped, at least this often. An idle loop
// keeping its P thus wakes 1/keptWaitBound times a second.
const keptWaitBound = 10 * time.Millisecond

// wait submits toSubmit SQEs and sleeps until wait completions are ready,
// or the next timer is due, or (with a completion batch) min_wait has
// passed. A wait that keeps the P (kept) lasts at most keptWaitBound.
func (l *loop) wait(toSubmit, wait uint32, kept bool) (err error) {
	d, timed := l.nextTimer()
	if kept && (!timed || d > keptWaitBound) {
		d, timed = keptWaitBound, true
	}
	if timed {
		d = max(d, time.Microsecond)
	}
	switch {
	case l.batch > 1:
		_, err = l.ring.EnterMinWait(toSubmit, l.batch, l.tuning.BatchWait, d)
	case timed:
		_, err = l.ring.SubmitAndWaitTimeout(wait, d)
	default:
		_, err = l.ring.Enter(toSubmit, wait, uring.EnterGetEvents, nil, 0)
	}
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

// reap takes every completion and dispatches it. It reports whether it
// woke readers.
func (l *loop) reap() (woke bool) {
	for {
		n := l.ring.PeekCQE(l.cqes[:])
		if l.send != nil {
			n += l.send.reap(l.cqes[n:])
		}
		if n == 0 {
			break
		}
		l.stats.CQEs.Add(uint64(n))
		for i := range l.cqes[:n] {
			l.dispatch(&l.cqes[i])
		}
		if n < len(l.cqes)/2 {
			break
		}
	}
	woke = len(l.notify) > 0
	for i, c := range l.notify {
		c.notified = false
		c.fd.InputReady()
		l.notify[i] = nil
	}
	l.notify = l.notify[:0]
	return woke
}

func (l *loop) dispatch(cqe *uring.CQE) {
	cqe.Res = userErrno(cqe.Res)
	k, gen, slot := splitUserData(cqe.UserData)
	switch k {
	case kindWake:
		l.armWake()
		return
	case kindAccept:
		l.acceptDone(gen, slot, cqe)
		return
	case kindCancel:
		return // the target's own final CQE tells what happened
	case kindFile:
		l.fileDone(gen, slot, cqe)
		return
	}
	var c *conn
	if int(slot) < len(l.conns) && l.gens[slot] == gen {
		c = l.conns[slot]
	}
	switch k {
	case kindRecv:
		l.recvDone(c, cqe)
	case kindSend:
		l.sendDone(c, cqe)
	case kindPoll:
		l.pollDone(c, cqe)
	case kindPollOut:
		l.pollOutDone(c, cqe)
	case kindCancelInput:
		if cqe.Res != 0 {
			l.cancelInputMissed(c)
		}
	case kindSpliceIn:
		l.spliceInDone(c, cqe)
	case kindSpliceOut:
		l.spliceOutDone(c, cqe)
	}
}

// The kernel's restart codes (ERESTARTSYS 512 to ERESTART_RESTARTBLOCK
// 516) are never meant for user space, but a request that io-wq ran and
// a cancellation interrupted (a file splice when its file closes) can
// complete with one. They mean what EINTR means.
const (
	errnoRestartSys   = 512
	errnoRestartBlock = 516
)

// userErrno returns a completion's result with a kernel restart code
// turned into -EINTR.
func userErrno(res int32) int32 {
	if res <= -errnoRestartSys && res >= -errnoRestartBlock {
		return -int32(unix.EINTR)
	}
	return res
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

// nextTimer returns the time to the nearest drain deadline, accept retry
// or cancel tick.
func (l *loop) nextTimer() (time.Duration, bool) {
	first := l.cancelAt
	for _, t := range l.draining {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	for _, a := range l.acceptors {
		if a != nil && !a.retryAt.IsZero() && (first.IsZero() || a.retryAt.Before(first)) {
			first = a.retryAt
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return time.Until(first), true
}

// expire acts on passed deadlines.
func (l *loop) expire() {
	if len(l.draining) == 0 && !l.acceptWaits() && l.cancelAt.IsZero() {
		return // no deadline: spare the clock read
	}
	now := time.Now()
	if !l.cancelAt.IsZero() && !now.Before(l.cancelAt) {
		l.retryCancels(now)
	}
	for c, t := range l.draining {
		if !now.Before(t) {
			c.fd.ExpireDrain(&l.stats)
			l.teardown(c)
		}
	}
	for _, a := range l.acceptors {
		if a != nil && !a.retryAt.IsZero() && !now.Before(a.retryAt) {
			a.retryAt = time.Time{}
			l.armAccept(a)
		}
	}
}

// acceptWaits reports whether an acceptor waits to re-arm (EMFILE).
func (l *loop) acceptWaits() bool {
	for _, a := range l.acceptors {
		if a != nil && !a.retryAt.IsZero() {
			return true
		}
	}
	return false
}

func (l *loop) sendReady() bool { return l.send != nil && l.send.ready() }

// errno turns a negative CQE result into an error like the syscall's.
func errno(op string, res int32) error {
	return os.NewSyscallError(op, syscall.Errno(-res))
}
