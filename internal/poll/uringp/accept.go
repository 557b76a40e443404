//go:build linux

package uringp

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

const (
	// maxQueued bounds accepted sockets waiting for Accept: above it the
	// multishot accept is cancelled, and it is armed again once Accept has
	// taken half of them. Connections then wait in the kernel's backlog.
	maxQueued = 1024
	// acceptBackoff is the pause before accepting again after EMFILE,
	// ENFILE, ENOBUFS or ENOMEM.
	acceptBackoff = 50 * time.Millisecond
)

// acceptor is a listening socket served by a multishot accept. Accept and
// Close run on user goroutines; the rest on the loop.
type acceptor struct {
	l     *loop
	sysfd int
	slot  uint32
	gen   uint32 // the slot's generation while a holds it

	mu sync.Mutex
	// fds[head:] are the accepted sockets, oldest first. Taking one moves
	// head; the array is reused from its start once emptied, or shifted
	// down when an append finds it full, so that accepting leaves no old
	// arrays behind (reslicing the front away made append grow a new one
	// as the front moved).
	fds     []int
	head    int
	err     error // terminal accept error
	paused  bool  // cancelled because fds is full
	isShut  bool
	ready   chan struct{}
	closed  chan struct{}
	closeMu sync.Once

	armed   bool // loop only, from here on
	ending  bool
	retryAt time.Time
}

func newAcceptor(l *loop, sysfd int) *acceptor {
	return &acceptor{l: l, sysfd: sysfd, ready: make(chan struct{}, 1), closed: make(chan struct{})}
}

// queued is how many accepted sockets wait; a.mu is held.
func (a *acceptor) queued() int { return len(a.fds) - a.head }

// push queues an accepted socket; a.mu is held.
func (a *acceptor) push(fd int) {
	if a.head > 0 && len(a.fds) == cap(a.fds) {
		n := copy(a.fds, a.fds[a.head:])
		a.fds, a.head = a.fds[:n], 0
	}
	a.fds = append(a.fds, fd)
}

// Accept implements poll.Listening.
func (a *acceptor) Accept() (int, error) {
	for {
		a.mu.Lock()
		if a.isShut {
			a.mu.Unlock()
			return -1, poll.ErrClosed
		}
		if a.queued() > 0 {
			fd := a.fds[a.head]
			if a.head++; a.head == len(a.fds) {
				a.fds, a.head = a.fds[:0], 0
			}
			resume := a.paused && a.queued() <= maxQueued/2
			if resume {
				a.paused = false
			}
			more := a.queued() > 0
			a.mu.Unlock()
			if resume {
				a.l.post(task{kind: taskAcceptResume, a: a})
			}
			if more {
				signalChan(a.ready)
			}
			return fd, nil
		}
		if err := a.err; err != nil {
			a.mu.Unlock()
			return -1, err
		}
		a.mu.Unlock()
		select {
		case <-a.ready:
		case <-a.closed:
		}
	}
}

// Close implements poll.Listening. The loop closes the socket once its
// accept has ended, which may be after Close returns; shutting the socket
// down first takes it out of the listening state at once, as close(2)
// would: dials are refused from here on, and a new listener may bind the
// address (with SO_REUSEADDR, which net's listeners set). Only the loop
// closes sysfd, after unlisten, which is posted below: it is open here.
func (a *acceptor) Close() {
	a.closeMu.Do(func() {
		a.mu.Lock()
		a.isShut = true
		a.mu.Unlock()
		close(a.closed)
		unix.Shutdown(a.sysfd, unix.SHUT_RDWR)
		a.l.post(task{kind: taskUnlisten, a: a})
	})
}

func signalChan(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (l *loop) listen(a *acceptor) {
	a.slot = uint32(len(l.acceptors))
	for i, x := range l.acceptors {
		if x == nil {
			a.slot = uint32(i)
			break
		}
	}
	if int(a.slot) == len(l.acceptors) {
		l.acceptors = append(l.acceptors, nil)
		l.acceptGens = append(l.acceptGens, 0)
	}
	l.acceptors[a.slot] = a
	a.gen = l.acceptGens[a.slot]
	l.armAccept(a)
}

func (l *loop) armAccept(a *acceptor) {
	if a.ending || a.armed {
		return
	}
	sqe := l.getSQE()
	sqe.PrepMultishotAccept(a.sysfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	sqe.UserData = userData(kindAccept, a.gen, a.slot)
	a.armed = true
}

func (l *loop) acceptResume(a *acceptor) {
	if !a.ending {
		l.armAccept(a)
	}
}

// unlisten stops accepting: cancel the accept, and when its final CQE came,
// close the socket and whatever nobody accepted.
func (l *loop) unlisten(a *acceptor) {
	if a.ending {
		return
	}
	a.ending = true
	a.retryAt = time.Time{}
	if a.armed {
		l.cancel(userData(kindAccept, a.gen, a.slot))
		return
	}
	l.endAcceptor(a)
}

func (l *loop) endAcceptor(a *acceptor) {
	unix.Close(a.sysfd)
	a.mu.Lock()
	for _, fd := range a.fds[a.head:] {
		unix.Close(fd)
	}
	a.fds, a.head = nil, 0
	a.mu.Unlock()
	l.acceptors[a.slot] = nil
	l.acceptGens[a.slot] = (l.acceptGens[a.slot] + 1) & genMask
}

func (l *loop) liveAcceptors() int {
	n := 0
	for _, a := range l.acceptors {
		if a != nil {
			n++
		}
	}
	return n
}

// acceptDone handles a multishot accept CQE. One for a slot's former
// acceptor (an older generation) is stale: a socket it carries is closed,
// since no Accept will take it.
func (l *loop) acceptDone(gen, slot uint32, cqe *uring.CQE) {
	if int(slot) >= len(l.acceptors) || l.acceptors[slot] == nil || l.acceptGens[slot] != gen {
		if cqe.Res >= 0 {
			unix.Close(int(cqe.Res))
		}
		return
	}
	a := l.acceptors[slot]
	if cqe.Res >= 0 {
		l.stats.Accepts.Add(1)
		a.mu.Lock()
		if a.isShut {
			unix.Close(int(cqe.Res))
		} else {
			a.push(int(cqe.Res))
			if a.queued() >= maxQueued && !a.paused && cqe.More() {
				a.paused = true
				l.cancel(userData(kindAccept, a.gen, a.slot))
			}
		}
		a.mu.Unlock()
		signalChan(a.ready)
	}
	if cqe.More() {
		return
	}
	a.armed = false
	if a.ending {
		l.endAcceptor(a)
		return
	}
	switch e := unix.Errno(-cqe.Res); {
	case cqe.Res >= 0, e == unix.ECANCELED:
		// Ended by the kernel, or cancelled because the queue is full.
		a.mu.Lock()
		paused := a.paused
		a.mu.Unlock()
		if !paused {
			l.stats.Rearms.Add(1)
			l.armAccept(a)
		}
	case e == unix.EMFILE || e == unix.ENFILE || e == unix.ENOBUFS || e == unix.ENOMEM:
		// Out of descriptors or memory: the connection waits in the
		// backlog; try again once some may have been freed.
		a.retryAt = time.Now().Add(acceptBackoff)
	case e == unix.ECONNABORTED || e == unix.EINTR || e == unix.EPERM || e == unix.EPROTO:
		l.stats.Rearms.Add(1)
		l.armAccept(a)
	default:
		a.mu.Lock()
		a.err = errno("accept", cqe.Res)
		a.mu.Unlock()
		signalChan(a.ready)
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
