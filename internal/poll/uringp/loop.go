//go:build linux

package uringp

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

// loop is one io_uring event loop. The fields under mu are its inbox,
// written by any goroutine; the rest belong to the loop goroutine.
type loop struct {
	mode   Mode
	tuning Tuning
	stats  poll.Stats

	// locked: the loop keeps its thread and sleeps in io_uring_enter
	// (uring-sqpoll, pinned CPUs, or input paused by cancel on kernels
	// without a recv byte limit, whose cancels a parked ring loses too
	// often: cancel.go); otherwise it parks in Go's poller (park.go).
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
	// lastInput is when a turn last brought input (ns since napClock) and
	// inputGap the moving average of the time between such turns: a loop
	// naps only while input comes at least napGap apart (nap.go).
	lastInput, inputGap int64
	// procs is GOMAXPROCS as the loop last read it, at turn procsTurn,
	// with RefreshProcs' count at procsEpoch (spareP, nap.go).
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

	conns     []*conn // by slot
	gens      []uint32
	freeSlots []uint32
	live      int
	blockers  int // live connections whose users may run on goroutines
	// File requests in flight, by slot, as conns; files counts them.
	fileOps       []*FileOp
	fileGens      []uint32
	freeFileSlots []uint32
	files         int
	sleepyFiles   int     // of files, those whose requests may sleep in an enter (FileOp.MayBlock)
	mayBlock      bool    // sleepyFiles > 0: every enter tells the scheduler (enter)
	notify        []*conn // got input this batch
	starved       []*conn // multishot recv ended with ENOBUFS
	draining      map[*conn]time.Time
	yielded       bool
	awake         poll.Awake // yields the P when the load never lets the loop sleep
	fixed         uint32     // slots of the ring's fixed-file table (0: none)
	stopping      bool
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
		locked:      m == ModeSQPoll || t.NoRecvLimit || len(t.CPUs) > 0,
		draining:    map[*conn]time.Time{},
		noRecvLimit: t.NoRecvLimit,
		napping:     !t.NoNap && !(m == ModeSQPoll || t.NoRecvLimit || len(t.CPUs) > 0),
		inputGap:    int64(napFor), // no input yet: as if it came seldom
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
		if l.stopping && l.live == 0 && l.files == 0 {
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
	if l.ev != nil {
		l.ev.Close()
	}
	if l.page != nil {
		unix.Munmap(l.page)
	}
}
