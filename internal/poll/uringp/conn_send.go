//go:build linux

package uringp

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

// flush starts sending c's queued output if no send is in flight.
func (l *loop) flush(c *conn) {
	if l.mode == ModeReactor {
		l.reactorFlush(c)
		return
	}
	c.lockSend()
	defer c.unlockSend()
	if !c.sendIs(sAttached) || c.sendIs(sTearing) || c.sendIs(sSendBusy) {
		return
	}
	if l.send != nil {
		m := c.mode
		if m.iov = c.fd.OutputSlices(m.iov[:0], poll.MaxIov); len(m.iov) > 0 {
			l.send.submit(c)
		}
		return
	}
	l.iov = c.fd.OutputSlices(l.iov[:0], poll.MaxIov)
	if len(l.iov) > 0 {
		l.prepSend(l.getSQE(), c, l.iov)
	}
	clear(l.iov)
}

// prepSend fills sqe with a send of iov, c's output, with the send fields locked
// (lockSend). A small payload goes out of a copy in a staging buffer
// (stage.go); otherwise it stays referenced by the FD's output queue until
// OutputSent, and pinned until the CQE.
func (l *loop) prepSend(sqe *uring.SQE, c *conn, iov [][]byte) {
	// MSG_DONTWAIT: a send that finds the socket full ends with EAGAIN
	// and the loop waits for POLLOUT itself (armPollOut). Left to wait
	// inside the kernel, sends on full AF_UNIX sockets can end with EAGAIN
	// anyway, or never complete on SQPOLL rings while the socket polls
	// writable (the suite's unix cases on uring-sqpoll).
	const flags = unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT
	if l.stage != nil {
		if p, ref, ok := l.stage.stage(iov); ok {
			c.staged = uint8(ref)
			sqe.PrepSend(c.fd.Sysfd, p, flags)
			l.sendPrepped(sqe, c)
			return
		}
	}
	for _, p := range iov {
		c.pin.Pin(unsafe.SliceData(p))
	}
	if len(iov) == 1 {
		sqe.PrepSend(c.fd.Sysfd, iov[0], flags)
	} else {
		if c.gather == nil {
			c.gather = new(sendGather)
		}
		g := c.gather
		for i, p := range iov {
			g.vecs[i] = uring.Iovec{Base: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p)))), Len: uint64(len(p))}
		}
		g.msg = uring.Msghdr{Iov: uint64(uintptr(unsafe.Pointer(&g.vecs[0]))), Iovlen: uint64(len(iov))}
		sqe.PrepSendmsg(c.fd.Sysfd, &g.msg, flags)
	}
	l.sendPrepped(sqe, c)
}

// sendPrepped completes a send's SQE and marks it in flight.
func (l *loop) sendPrepped(sqe *uring.SQE, c *conn) {
	c.useFixed(sqe)
	sqe.UserData = userData(kindSend, c.gen, c.slot)
	c.sendSet(sSendBusy)
	c.sendSeq = c.outSeq.Load()
}

// sendDone handles a send CQE: account the bytes and send the rest.
func (l *loop) sendDone(c *conn, cqe *uring.CQE) {
	if c == nil {
		return
	}
	c.lockSend()
	roomSince := c.sendSeq != c.outSeq.Load()
	c.sendUnset(sSendBusy)
	if c.staged != 0 {
		l.stage.unstage(uint16(c.staged))
		c.staged = 0
	} else {
		c.pin.Unpin()
	}
	if c.mode != nil {
		clear(c.mode.iov)
	}
	c.unlockSend()
	empty := true
	switch {
	case cqe.Res >= 0:
		l.stats.BytesOut.Add(uint64(cqe.Res))
		empty = c.fd.OutputSent(int(cqe.Res))
	case cqe.Res == -int32(unix.ECANCELED):
		c.fd.OutputError(poll.ErrClosed)
	case cqe.Res == -int32(unix.EAGAIN) || cqe.Res == -int32(unix.EINTR):
		// The socket is full (MSG_DONTWAIT): wait for POLLOUT, then
		// send again.
		if !l.isTearing(c) {
			if roomSince {
				l.flush(c) // POLLOUT came after this send was issued
			} else {
				l.armPollOut(c)
			}
			return
		}
	default:
		err := errno("sendmsg", cqe.Res)
		c.fd.OutputError(err)
		if cqe.Res == -int32(unix.ECONNRESET) || cqe.Res == -int32(unix.EPIPE) {
			// The peer reset the connection: input is over too. The
			// multishot receive should end with the same error, but it
			// can miss that wake-up after input was paused and resumed,
			// leaving readers waiting for ever (cmd/ringsoak
			// TestReproLostReset).
			c.fd.InputError(err)
			c.fd.InputReady()
		}
	}
	if l.isTearing(c) {
		l.maybeDetach(c)
		return
	}
	if !empty {
		l.flush(c)
		return
	}
	l.stopPollOut(c)
	if c.is(fClosing) {
		l.teardown(c)
	}
}

func (l *loop) cancelSend(c *conn) {
	if l.send != nil {
		l.send.cancel(c)
		return
	}
	l.cancel(userData(kindSend, c.gen, c.slot))
}
