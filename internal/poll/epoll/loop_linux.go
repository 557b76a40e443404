package epoll

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
)

const (
	events = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET
	hangup = unix.EPOLLRDHUP | unix.EPOLLHUP | unix.EPOLLERR
)

type taskKind uint8

const (
	taskFlush taskKind = iota
	taskResume
	taskClose
	taskStop
)

type task struct {
	kind taskKind
	fd   *poll.FD
}

// loop is one epoll event loop. Fields after the mutex-guarded group are
// touched only by the loop goroutine.
type loop struct {
	epfd     int
	ev       *poll.EventFD // the wake-up eventfd
	file     *os.File      // epfd on Go's poller
	rc       syscall.RawConn
	poll     func(uintptr) bool // pollOnce, bound once: no allocation per wait
	n        int                // events pollOnce found
	deadline time.Time          // the read deadline set on file
	sleeping atomic.Bool
	done     chan struct{}
	awake    poll.Awake // yields the P when the load never lets the loop park

	mu    sync.Mutex
	fds   []*poll.FD // by descriptor number
	tasks []task

	running  []task
	ready    []ready
	events   [256]unix.EpollEvent
	draining map[*poll.FD]time.Time
	iov      [][]byte
	iovecs   poll.Iovecs
	evbuf    [8]byte
	stats    poll.Stats
}

type ready struct {
	fd     *poll.FD
	events uint32
}

func newLoop() (*loop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wake, err := poll.NewEventFD()
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	evfd := wake.FD()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(evfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(epfd)
		wake.Close()
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	l := &loop{epfd: epfd, ev: wake, done: make(chan struct{}), draining: map[*poll.FD]time.Time{}, awake: poll.Awake{Every: poll.AwakeEvery}}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		wake.Close()
		return nil, os.NewSyscallError("fcntl", err)
	}
	l.file = os.NewFile(uintptr(epfd), "epoll")
	rc, err := l.file.SyscallConn()
	if err != nil {
		l.file.Close()
		wake.Close()
		return nil, err
	}
	l.rc = rc
	l.poll = l.pollOnce
	return l, nil
}

// add registers fd's socket. Safe for concurrent use.
func (l *loop) add(fd *poll.FD) error {
	s := fd.Sysfd
	l.mu.Lock()
	for len(l.fds) <= s {
		l.fds = append(l.fds, nil)
	}
	l.fds[s] = fd
	l.mu.Unlock()
	ev := unix.EpollEvent{Events: events, Fd: int32(s)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, s, &ev); err != nil {
		l.forget(s)
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

func (l *loop) forget(s int) {
	l.mu.Lock()
	l.fds[s] = nil
	l.mu.Unlock()
}

// Flush implements poll.Loop.
func (l *loop) Flush(fd *poll.FD) { l.post(task{taskFlush, fd}) }

// Resume implements poll.Loop.
func (l *loop) Resume(fd *poll.FD) { l.post(task{taskResume, fd}) }

// Close implements poll.Loop.
func (l *loop) Close(fd *poll.FD) { l.post(task{taskClose, fd}) }

// Stats implements poll.Loop.
func (l *loop) Stats() *poll.Stats { return &l.stats }

// WatchWritable implements poll.Loop. Every socket is registered for
// EPOLLOUT edges, and each one calls FD.NoteWritable: nothing to arm.
func (l *loop) WatchWritable(*poll.FD) {}

// post queues t and wakes the loop if it sleeps. The sleeping flag makes the
// wake-up syscall rare under load: the loop sets it, re-checks the queue,
// and only then blocks; a producer writes the eventfd only if it clears the
// flag itself (Go atomics are sequentially consistent, so one side always
// sees the other).
func (l *loop) post(t task) {
	l.later(t)
	if l.sleeping.Load() && l.sleeping.CompareAndSwap(true, false) {
		l.stats.Wakeups.Add(1)
		l.ev.Signal()
	}
}

func (l *loop) run() {
	defer close(l.done)
	for {
		if stop := l.runTasks(); stop {
			l.shutdown()
			return
		}
		l.sleeping.Store(true)
		if l.hasTasks() {
			l.sleeping.Store(false)
			continue
		}
		n := l.wait()
		l.sleeping.Store(false)
		l.dispatch(n)
		l.expireDrains()
		l.awake.Turn()
	}
}

// wait returns the next batch of events. It polls without blocking, and
// when nothing is ready parks the goroutine on Go's own poller, where the
// epoll descriptor is registered: an idle loop holds no thread and no P, and
// a wake-up is an ordinary goroutine wake-up.
func (l *loop) wait() int {
	if dl := l.nextDrain(); !dl.Equal(l.deadline) {
		l.deadline = dl
		l.file.SetReadDeadline(dl)
	}
	l.n = 0
	err := l.rc.Read(l.poll)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		panic("ringpoll: waiting for epoll: " + err.Error())
	}
	return l.n
}

// pollOnce takes ready events without blocking; it reports whether there
// were any (RawConn.Read parks the goroutine until epfd is readable if not).
func (l *loop) pollOnce(uintptr) bool {
	l.stats.PollWaits.Add(1)
	n, err := poll.EpollWaitNow(l.epfd, l.events[:])
	if err != nil && err != unix.EINTR {
		panic("ringpoll: epoll_wait: " + err.Error()) // EBADF/EFAULT/EINVAL: a bug of ours
	}
	l.n = max(n, 0)
	if n <= 0 {
		l.awake.Slept() // the poller parks the loop until events come
	}
	return n > 0
}

// later queues t from the loop itself, without a wake-up.
func (l *loop) later(t task) {
	l.mu.Lock()
	l.tasks = append(l.tasks, t)
	l.mu.Unlock()
}

func (l *loop) hasTasks() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tasks) > 0
}

// dispatch maps the n events to FDs under one lock, then handles them.
func (l *loop) dispatch(n int) {
	l.ready = l.ready[:0]
	l.mu.Lock()
	for i := range n {
		ev := &l.events[i]
		if int(ev.Fd) == l.ev.FD() {
			continue
		}
		if fd := l.fds[ev.Fd]; fd != nil {
			l.ready = append(l.ready, ready{fd, ev.Events})
		}
	}
	l.mu.Unlock()
	if len(l.ready) < n {
		poll.RawRead(l.ev.FD(), l.evbuf[:]) // reset the counter; EAGAIN is fine
	}
	mayLeave := len(l.ready) >= int(leaveTurn.Load())
	for i := range l.ready {
		r := &l.ready[i]
		if r.events&(unix.EPOLLIN|hangup) != 0 {
			l.read(r.fd, r.events&hangup == 0, mayLeave)
		}
		if r.events&(unix.EPOLLOUT|hangup) != 0 {
			r.fd.NoteWritable()
			l.flush(r.fd)
		}
		r.fd = nil
	}
}

// runTasks runs the queued tasks and reports whether the loop must stop.
func (l *loop) runTasks() (stop bool) {
	l.mu.Lock()
	l.running, l.tasks = l.tasks, l.running[:0]
	l.mu.Unlock()
	for i, t := range l.running {
		switch t.kind {
		case taskFlush:
			l.flush(t.fd)
		case taskResume:
			l.read(t.fd, false, false)
		case taskClose:
			l.close(t.fd)
		case taskStop:
			stop = true
		}
		l.running[i] = task{}
	}
	return stop
}

// leaveTurn is the fewest ready sockets in a turn for which the loop leaves
// the read of a blocked reader's socket to that reader (poll.ReadOrLeave).
// A turn that long comes with a long queue, where bytes read as soon as
// they arrive wait long for their reply; in shorter turns the loop's
// reads in a row cost less than the readers' own, so a loop with fewer
// connections never leaves a read. Tests lower it (SetLeaveTurn).
var leaveTurn atomic.Int32

func init() { leaveTurn.Store(128) }

// SetLeaveTurn sets leaveTurn until restore is called. Tests only.
func SetLeaveTurn(n int) (restore func()) {
	old := leaveTurn.Swap(int32(n))
	return func() { leaveTurn.Store(old) }
}

// read reads fd until it has nothing more to give now (see
// poll.ReadReady), or leaves that to fd's blocked reader where mayLeave.
func (l *loop) read(fd *poll.FD, short, mayLeave bool) {
	if poll.ReadOrLeave(fd, short, mayLeave, &l.stats) {
		// Edge triggering will not report this data again: come back to
		// it after the other connections.
		l.later(task{taskResume, fd})
	}
}

// flush sends fd's queued output until it is empty or the socket is full
// (EPOLLOUT brings it back), and finishes a close whose output drained.
// A close is the loop's once its close task ran (fd is draining): before
// that, Close may have been called after SendQueued found the queue
// empty and a writer queued more, which the close task will drain. Taking
// fd.Closing for the sign lost that output: the socket closed under it.
func (l *loop) flush(fd *poll.FD) {
	if fd.Detached() {
		return
	}
	if full := poll.SendQueued(fd, &l.iov, &l.iovecs, &l.stats); full {
		return
	}
	if _, closing := l.draining[fd]; closing {
		l.detach(fd)
	}
}

// close starts closing fd: drain its output first, bounded by its drain
// timeout.
func (l *loop) close(fd *poll.FD) {
	if fd.Detached() {
		return
	}
	if fd.OutputPending() && !fd.Aborted() {
		l.draining[fd] = time.Now().Add(fd.DrainTimeout())
		l.flush(fd)
		return
	}
	l.detach(fd)
}

// detach ends the loop's part in fd's life: the socket leaves epoll
// before the loop lets go, since a descriptor number may be reused as soon
// as the last reference closes it.
func (l *loop) detach(fd *poll.FD) {
	delete(l.draining, fd)
	l.forget(fd.Sysfd)
	unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd.Sysfd, nil)
	fd.Detach()
}

// nextDrain returns the nearest drain deadline, or the zero time.
func (l *loop) nextDrain() time.Time {
	var first time.Time
	for _, t := range l.draining {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return first
}

func (l *loop) expireDrains() {
	if len(l.draining) == 0 {
		return
	}
	now := time.Now()
	for fd, t := range l.draining {
		if !now.Before(t) {
			fd.ExpireDrain(&l.stats)
			l.detach(fd)
		}
	}
}

// shutdown releases the loop's descriptors. The engine stops only once
// every FD registered with it was destroyed, so none is left.
func (l *loop) shutdown() {
	l.ev.Close()
	l.file.Close() // closes epfd
}
