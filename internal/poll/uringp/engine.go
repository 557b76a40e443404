//go:build linux

// Package uringp holds ringpoll's io_uring engines. They share one loop
// design and differ in how input is taken and output sent:
//
//	mode           input                                   output
//	uring          multishot recv into provided buffers    writers queue; the loop submits SEND
//	uring-hybrid   multishot recv into provided buffers    writers send(2) themselves; leftovers go to the loop's SEND
//	uring-reactor  multishot POLL_ADD, then read(2)        writers send(2) themselves; leftovers wait for POLLOUT
//	uring-sqpoll   as uring, on an SQPOLL ring             writers submit SEND on mutex-guarded SQPOLL send rings
//
// Each loop owns one ring, which only the loop goroutine enters. By
// default the loop is an ordinary goroutine that sleeps in Go's poller on
// the ring's descriptor (park.go), or, between requests that come close
// together and with a P to spare, in io_uring_enter (nap.go);
// uring-sqpoll's loops, and loops pinned to CPUs, lock their OS thread
// and sleep in io_uring_enter instead. Other goroutines reach a loop through an inbox
// and wake it, only when it sleeps. Listening sockets stay on Go's
// poller: a multishot accept's task work woke whichever thread had armed
// it, an idle one under connection churn.
//
// user_data never holds a Go pointer: it is kind:8 | generation:24 |
// slot:32, an index into the loop's table of connections. A connection's
// descriptor is closed only after the final CQE of every request on it.
package uringp

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// Mode selects one of the io_uring engines.
type Mode uint8

// The modes.
const (
	ModeUring Mode = iota
	ModeHybrid
	ModeReactor
	ModeSQPoll
)

var modeNames = [...]string{"uring", "uring-hybrid", "uring-reactor", "uring-sqpoll"}

func (m Mode) String() string { return modeNames[m] }

// Tuning sizes a loop's ring and buffers. The zero value means the
// defaults; tests shrink them to force ENOBUFS and CQ overflow.
type Tuning struct {
	// SQEntries is the submission queue size (default 512).
	SQEntries uint32
	// CQEntries is the completion queue size (default 16 × SQEntries).
	CQEntries uint32
	// Buffers is the number of provided receive buffers per loop, a power
	// of two, and BufferSize the size of each. Buffers of IncMinSize or
	// more are consumed incrementally where the kernel can
	// (uring.PbufRingInc), smaller ones whole by each recv. Default, if
	// both are 0: 256 of 64 KiB where the kernel consumes incrementally,
	// else 4096 of 4 KiB (16 MiB either way).
	Buffers    int
	BufferSize int
	// inc is set by New: the buffers are consumed incrementally.
	inc bool
	// SQThreadIdle is how long an SQPOLL thread spins before sleeping
	// (uring-sqpoll; default 10 ms).
	SQThreadIdle time.Duration
	// CPUs, if set, locks each loop to a thread pinned to a CPU: loop i to
	// CPUs[i mod len(CPUs)]. The thread is pinned before it sets up the
	// ring, so an SQPOLL thread, which the kernel creates with its
	// creator's mask, runs there too unless SQThreadCPU moves it.
	CPUs []int
	// SQThreadCPU is 1 + the CPU to pin the SQPOLL thread to
	// (uring-sqpoll; 0: not pinned).
	SQThreadCPU int
	// SendRings is the number of send rings (uring-sqpoll; default
	// GOMAXPROCS).
	SendRings int
	// NoRecvLimit arms multishot recvs without a byte limit, as on a
	// kernel that lacks it: input backpressure then cancels the recv
	// (tests use it to exercise that path).
	NoRecvLimit bool
	// NoNap keeps a parked loop from napping (nap.go): it always sleeps
	// in Go's poller. The environment variable RINGPOLL_NAP=off sets it
	// for every engine of the process (for comparisons).
	NoNap bool
	// BusyPoll, if above 0, is how long a loop that has run out of work
	// polls its ring and inbox before it sleeps (busyPoll). Ignored by
	// uring-sqpoll, whose loops poll for spinFor.
	BusyPoll time.Duration
	// MoveEvery, if above 0, makes a parked loop act as if it had moved to
	// another thread every MoveEvery turns and stayed there, so that it
	// arms input requests anew (tests).
	MoveEvery int
}

func (t Tuning) withDefaults() Tuning {
	if os.Getenv("RINGPOLL_NAP") == "off" {
		t.NoNap = true
	}
	if t.SQEntries == 0 {
		t.SQEntries = 512
	}
	if t.CQEntries == 0 {
		t.CQEntries = 16 * t.SQEntries
	}
	if t.Buffers == 0 && t.BufferSize == 0 && incWorks() {
		t.Buffers, t.BufferSize = 256, 64<<10
	}
	if t.Buffers == 0 {
		t.Buffers = 4096
	}
	if t.BufferSize == 0 {
		t.BufferSize = 4096
	}
	t.inc = t.BufferSize >= IncMinSize && incWorks()
	if t.SQThreadIdle == 0 {
		t.SQThreadIdle = 10 * time.Millisecond
	}
	if t.SendRings == 0 {
		t.SendRings = runtime.GOMAXPROCS(0)
	}
	return t
}

// IncMinSize is the smallest receive buffer consumed incrementally. Below
// it a buffer holds few messages, and one recv taking the whole buffer
// costs less bookkeeping than a count of the pieces in use.
const IncMinSize = 16 << 10

// Engine is a set of io_uring loops of one mode.
type Engine struct {
	mode  Mode
	loops []*loop
	next  atomic.Uint32
}

// New starts n loops of mode m. It fails if a ring cannot be set up; the
// caller decides whether to fall back to epoll.
func New(m Mode, n int, t Tuning) (*Engine, error) {
	t = t.withDefaults()
	if m != ModeReactor && !recvLimitWorks() {
		t.NoRecvLimit = true
	}
	if t.Buffers&(t.Buffers-1) != 0 || t.Buffers > 1<<15 {
		return nil, fmt.Errorf("uring: %d buffers: want a power of two up to 32768", t.Buffers)
	}
	e := &Engine{mode: m}
	for i := range n {
		l := newLoop(m, t)
		if len(t.CPUs) > 0 {
			l.cpu = 1 + t.CPUs[i%len(t.CPUs)]
		}
		started := make(chan error, 1)
		go l.run(started)
		if err := <-started; err != nil {
			e.Stop()
			return nil, err
		}
		e.loops = append(e.loops, l)
	}
	return e, nil
}

// Name returns the mode's name.
func (e *Engine) Name() string { return e.mode.String() }

// Register attaches fd to the next loop and starts its input. Safe for
// concurrent use.
func (e *Engine) Register(fd *poll.FD) error {
	l := e.pick()
	c := &conn{fd: fd, l: l}
	if e.mode == ModeSQPoll {
		c.setup = uShared
		c.mode = new(modeState)
	}
	fd.Private = unsafe.Pointer(c)
	fd.Loop = l
	fd.DirectWrite = e.mode == ModeHybrid || e.mode == ModeReactor
	if e.mode != ModeReactor {
		// One connection may hold at most a quarter of the loop's
		// provided buffers, so it cannot starve the others.
		fd.LimitInput(l.tuning.Buffers * l.tuning.BufferSize / 4)
	}
	l.post(task{kind: taskAttach, c: c})
	return nil
}

func (e *Engine) pick() *loop {
	return e.loops[int(e.next.Add(1)-1)%len(e.loops)]
}

// Stats returns each loop's counters.
func (e *Engine) Stats() []*poll.Stats {
	s := make([]*poll.Stats, len(e.loops))
	for i, l := range e.loops {
		s[i] = &l.stats
	}
	return s
}

// Stop ends the loops. Every FD must have been destroyed. It does not
// wait.
func (e *Engine) Stop() {
	for _, l := range e.loops {
		l.post(task{kind: taskStop})
	}
}
