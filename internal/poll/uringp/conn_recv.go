//go:build linux

package uringp

import (
	"io"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

// armRecv starts the connection's multishot input request.
func (l *loop) armRecv(c *conn) {
	sqe := l.getSQE()
	if c.is(fPollIn) {
		sqe.PrepPollMultishot(c.fd.Sysfd, unix.POLLIN|unix.POLLRDHUP)
		sqe.UserData = userData(kindPoll, c.gen, c.slot)
	} else {
		sqe.PrepRecvMultishot(c.fd.Sysfd, 0, l.bufs.ring.Bgid)
		c.useFixed(sqe)
		if !l.noRecvLimit {
			// The kernel stops at the high-water mark by itself: held
			// input never exceeds it by more than one buffer.
			sqe.SetRecvLimit(uint32(max(c.fd.InputRoom(), l.recvFloor())))
			c.set(fLimited)
		}
		sqe.UserData = userData(kindRecv, c.gen, c.slot)
	}
	c.set(fRecvArmed)
	c.armThread = l.thread
}

// recvFloor is the smallest byte limit a recv is armed with: a whole
// buffer, or with incremental consumption a page of one (a recv then
// takes no more than it is allowed).
func (l *loop) recvFloor() int {
	if l.tuning.inc {
		return min(l.tuning.BufferSize, 4096)
	}
	return l.tuning.BufferSize
}

// recvDone handles a multishot recv CQE.
func (l *loop) recvDone(c *conn, cqe *uring.CQE) {
	var p []byte
	// An incrementally consumed buffer that a completion filled nothing of
	// stays at the ring's head for the next one (the kernel consumed
	// nothing); otherwise a buffer a completion carries was taken.
	if cqe.Flags&uring.CQEFBuffer != 0 && (cqe.Res > 0 || !l.bufs.inc) {
		hold := c != nil && cqe.Res > 0 && !c.is(fClosing)
		p = l.bufs.fill(cqe.BufID(), max(cqe.Res, 0), cqe.Flags&uring.CQEFBufMore != 0, hold)
		if !hold {
			p = nil
		}
	}
	if c == nil {
		return
	}
	if cqe.More() {
		l.cancelIfStale(c)
	}
	switch {
	case cqe.Res > 0:
		l.stats.BytesIn.Add(uint64(cqe.Res))
		if p != nil {
			more, copied := c.fd.InputRef(p, &l.bufs.refs[cqe.BufID()], l.bufs.share())
			if copied {
				l.stats.BuffersCopied.Add(1)
			}
			if !more {
				c.set(fPaused)
				if cqe.More() && !c.is(fLimited) {
					// A kernel without recv limits pauses by cancel;
					// this one, if an earlier one missed.
					l.cancelRecv(c)
				}
			}
			l.wakeReader(c)
		}
	case cqe.Res == 0:
		c.set(fEOF)
		c.fd.InputError(io.EOF)
		l.wakeReader(c)
	case cqe.Res == -int32(unix.ENOBUFS):
		l.stats.ENOBUFS.Add(1)
		// The ring ran dry when the kernel posted this, but the loop may
		// have put buffers back since (returned before it reaped this
		// CQE): then no later return would re-arm c, so re-arm it now.
		// If the kernel has taken those too, their CQEs come first and
		// the next ENOBUFS starves c for real.
		// Buffers may also wait on spare: the ring gets more of them.
		if l.bufs.ranDry() {
			break
		}
		// Starved until the next turn gives the ring buffers back:
		// released ones, or those relieve retires.
		l.relieve()
		if !c.is(fStarved) {
			c.set(fStarved)
			l.starved = append(l.starved, c)
			l.starving.Store(true)
		}
	case cqe.Res == -int32(unix.ECANCELED):
		l.countCancel(c)
	case cqe.Res == -int32(unix.EINVAL) && c.is(fLimited) && !l.noRecvLimit:
		// The kernel knows no recv limit: pause by cancelling instead.
		l.noRecvLimit = true
	default:
		c.set(fEOF)
		c.fd.InputError(errno("recv", cqe.Res))
		l.wakeReader(c)
	}
	if cqe.More() {
		return
	}
	c.unset(fRecvArmed | fCanceling | fMoving)
	if l.isTearing(c) {
		l.maybeDetach(c)
		return
	}
	if c.wantsInput() {
		l.stats.Rearms.Add(1)
		l.armRecv(c)
	}
}

// cancelIfStale runs when c's input request completed and goes on. It
// cancels the request if c is being torn down (again, in case teardown's
// cancel missed it) or if the request was armed on another thread than the
// loop's (park.go).
func (l *loop) cancelIfStale(c *conn) {
	if c.is(fCanceling) {
		l.resendCancel(c)
		return
	}
	switch {
	case c.is(fClosing) && l.isTearing(c):
		l.cancelRecv(c)
	case l.armedElsewhere(c):
		c.set(fMoving)
		l.cancelRecv(c)
	}
}

// countCancel counts an input request that a cancel ended: as moved if it
// was cancelled only to be armed anew, else in InputCancels.
func (l *loop) countCancel(c *conn) {
	if c.is(fMoving) && !c.is(fPaused) && !c.is(fClosing) {
		l.stats.InputMoves.Add(1)
		return
	}
	l.stats.InputCancels.Add(1)
}

func (l *loop) wakeReader(c *conn) {
	if !c.is(fNotified) {
		c.set(fNotified)
		l.notify = append(l.notify, c)
	}
}

// resume restarts input after backpressure.
func (l *loop) resume(c *conn) {
	if l.isTearing(c) || c.is(fClosing) {
		return
	}
	c.unset(fPaused)
	if c.is(fPollIn) {
		if c.is(fRecvArmed) && poll.ReadReady(c.fd, false, &l.stats) {
			l.later(task{kind: taskResume, c: c})
		}
		return
	}
	if !c.is(fRecvArmed) && c.wantsInput() {
		l.stats.Rearms.Add(1)
		l.armRecv(c)
	}
}
