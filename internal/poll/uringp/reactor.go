//go:build linux

package uringp

import (
	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

// The uring-reactor mode (tRPC's Reactor model): a multishot POLL_ADD per
// connection for input stands in for epoll, and the loop reads and sends
// with plain syscalls, as the epoll engine does. Output that meets a full
// socket, in every io_uring mode, waits on a multishot POLL_ADD for POLLOUT
// armed after the EAGAIN (armPollOut): armed then, its first check sees
// the socket's state, so no wake-up is missed. A zero-copy send from a
// user goroutine that met a full socket waits on the same poll
// (watchOut).

const hangup = unix.POLLRDHUP | unix.POLLHUP | unix.POLLERR

// pollDone handles a readiness CQE: res is the ready event mask.
func (l *loop) pollDone(c *conn, cqe *uring.CQE) {
	if c == nil {
		return
	}
	if cqe.More() {
		l.cancelIfStale(c)
	}
	if cqe.Res >= 0 && !l.isTearing(c) {
		ev := uint32(cqe.Res)
		if ev&(unix.POLLIN|hangup) != 0 && !c.is(fClosing) {
			if poll.ReadReady(c.fd, ev&hangup == 0, &l.stats) {
				l.later(task{kind: taskResume, c: c})
			}
		}
		if ev&hangup != 0 && l.mode == ModeReactor {
			l.reactorFlush(c)
		}
	} else if cqe.Res == -int32(unix.ECANCELED) {
		l.countCancel(c)
	} else if cqe.Res < 0 {
		c.fd.InputError(errno("poll", cqe.Res))
		c.fd.InputReady()
	}
	if cqe.More() {
		return
	}
	moved := c.is(fMoving)
	c.unset(fRecvArmed | fCanceling | fMoving)
	if l.isTearing(c) {
		l.maybeDetach(c)
		return
	}
	if cqe.Res >= 0 || moved && !c.is(fClosing) {
		// The poll ended by itself (the kernel may end a multishot
		// request at any time), or was cancelled to be armed from this
		// thread: arm it again, for output too. Its first check sees
		// input that came meanwhile.
		l.stats.Rearms.Add(1)
		l.armRecv(c)
	}
}

// armPollOut waits for room in c's socket after a send met EAGAIN, with a
// multishot POLL_ADD for POLLOUT. Armed after the EAGAIN, its first check
// sees the socket's state, so no wake-up is missed; later CQEs come with
// each wake-up. It must be multishot: io_uring always reports POLLRDHUP,
// so a one-shot poll on a socket whose peer shut down its writing side
// fires at once, without POLLOUT, for ever.
func (l *loop) armPollOut(c *conn) {
	c.set(fNeedOut)
	l.armOut(c)
}

// watchOut arms the POLLOUT poll for good, for zero-copy sends that meet a
// full socket (poll.Loop.WatchWritable): from then on every POLLOUT calls
// FD.NoteWritable, as epoll's edges do. The poll only reports wake-ups
// after a send found the socket full (the kernel wakes writers only then),
// so it costs nothing while the socket has room. On a connection being
// closed there is nothing to wait for: the send is woken at once, and
// finds it closed.
func (l *loop) watchOut(c *conn) {
	if l.isTearing(c) || c.is(fClosing) {
		c.fd.NoteWritable()
		return
	}
	c.set(fWatchOut)
	if c.is(fOutArmed) && !c.is(fOutCanceling) {
		// Armed for output: a wake-up it reported while fWatchOut was
		// clear told nobody, and may be the last. Wake the send to try
		// again.
		c.fd.NoteWritable()
		return
	}
	l.armOut(c) // or re-armed when the cancel in flight ends; its first check sees the state
}

// armOut arms the multishot POLLOUT poll unless it is in flight.
func (l *loop) armOut(c *conn) {
	if c.is(fOutArmed) {
		return
	}
	sqe := l.getSQE()
	sqe.PrepPollMultishot(c.fd.Sysfd, unix.POLLOUT)
	sqe.UserData = userData(kindPollOut, c.gen, c.slot)
	c.set(fOutArmed)
}

// stopPollOut cancels the POLLOUT poll when output no longer waits for it
// and no zero-copy send watches it (fWatchOut, which teardown clears
// before it calls this).
func (l *loop) stopPollOut(c *conn) {
	if c.is(fOutArmed) && !c.is(fOutCanceling) && !c.is(fWatchOut) {
		c.set(fOutCanceling)
		l.cancel(userData(kindPollOut, c.gen, c.slot))
	}
}

// pollOutDone handles a POLLOUT CQE: send again if there is room.
func (l *loop) pollOutDone(c *conn, cqe *uring.CQE) {
	if c == nil {
		return
	}
	if !cqe.More() {
		c.unset(fOutArmed | fOutCanceling)
	}
	if l.isTearing(c) {
		l.maybeDetach(c)
		return
	}
	if cqe.Res >= 0 && uint32(cqe.Res)&(unix.POLLOUT|unix.POLLERR|unix.POLLHUP) != 0 {
		// Counted even while a send is in flight: if that send fails
		// with EAGAIN, it knows room came after it was issued.
		c.outSeq.Add(1)
		if c.is(fWatchOut) {
			c.fd.NoteWritable()
		}
		if c.is(fNeedOut) {
			c.unset(fNeedOut)
			l.flush(c)
		}
	}
	if !c.is(fOutArmed) && c.is(fNeedOut|fWatchOut) {
		l.armOut(c) // the poll ended while output waits, or sends watch it
	}
}

// reactorFlush sends c's queued output; if the socket is full, the next
// POLLOUT edge brings the loop back.
func (l *loop) reactorFlush(c *conn) {
	if l.isTearing(c) {
		return
	}
	if c.mode == nil {
		c.mode = &modeState{vecs: new(poll.Iovecs)}
	}
	if full := poll.SendQueued(c.fd, &c.mode.iov, c.mode.vecs, &l.stats); full {
		l.armPollOut(c)
		return
	}
	l.stopPollOut(c)
	if c.is(fClosing) {
		l.teardown(c)
	}
}
