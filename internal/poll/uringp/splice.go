//go:build linux

package uringp

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

// Sending a file range to a connection from its loop's ring. io_uring has
// no sendfile: the loop splices the file into a pipe and the pipe into the
// socket, two SPLICE requests linked with IOSQE_IO_LINK (the second starts
// only when the first moved all it was asked to), page references moving
// and no byte copied. The pipe comes from the process's pool
// (poll.GetPipe), shared with Conn.ReadFrom's socket splices.
//
//	file ──SPLICE(off, chunk)──> pipe ──SPLICE(chunk)──> socket
//
// A chunk is at most the pipe's size, cut so that it ends on a page
// boundary of the file (a page takes a whole pipe slot). The kernel runs
// every splice in a worker thread. A first splice that moves less (the
// end of the file, say) fails the link: the second ends with -ECANCELED,
// and the loop sends what the pipe holds on its own. The socket is
// non-blocking, so a splice into a full one moves what fits and ends, or
// ends with -EAGAIN: the loop then waits for room on the connection's
// POLLOUT poll, as a send does, with what is left in the pipe. The pipe
// is non-blocking too, which makes a splice that would wait for it fail
// with -EAGAIN, and none would: the loop splices the file only into an
// empty pipe (spliceStep sends what the pipe holds first) and out of it
// only what it holds, so a -EAGAIN always means the socket. On SQPOLL
// rings (uring-sqpoll) the two are not linked: an SQ thread shared by
// several rings takes at most 8 entries of one at a time, and a cut chain
// would let the second splice run beside the first; the loop submits the
// second when the first completed instead.
//
// Order: the caller holds the connection's writers' lock from an empty
// output queue on (poll.FD.LockOutput), so the file's bytes follow
// everything written before and precede everything written after.
// Lifetime: the splices are requests on the socket like a send; closing
// the connection cancels them, and the loop lets go of the connection
// only after their final completions (maybeDetach). The caller keeps the
// file's descriptor open until SendFile returns.

// SpliceOp is a file range that a goroutine asks a connection's loop to
// send with SendFile.
type SpliceOp struct {
	File int   // the file's descriptor, open until SendFile returns
	Off  int64 // where the range starts
	N    int64 // its length

	// Results, valid when SendFile returns.
	Sent int64 // bytes that went into the socket
	EOF  bool  // the file ended before N bytes
	Res  int32 // 0, or the -errno that ended the send early (-ECANCELED: stopped or closed)
	// FileErr says Res came from reading the file, not from the socket.
	FileErr bool

	done chan struct{}
	// The loop's state.
	c       *conn
	p       *poll.Pipe
	moved   int64  // bytes spliced out of the file
	held    int64  // bytes in the pipe
	inBusy  bool   // the file-to-pipe splice is in flight
	outBusy bool   // the pipe-to-socket splice is in flight
	waiting bool   // waiting for room in the socket (POLLOUT)
	stopped bool   // the caller stopped it, or the connection closes
	seq     uint32 // c.outSeq when the splice to the socket was issued
}

// SendFile sends op's file range into fd's socket from fd's loop, and
// returns once the loop is done with it: every byte sent, or the file
// ended, or a request failed, or the send was stopped: when stop or
// deadline is closed first, SendFile cancels the splices in flight and
// still waits for their final completions, so the file's descriptor and
// the pipe are free when it returns. The caller holds fd's LockOutput
// and must not be the loop's goroutine (an inline handler): the loop
// would wait for itself.
func SendFile(fd *poll.FD, op *SpliceOp, stop, deadline <-chan struct{}) {
	c := (*conn)(fd.Private)
	op.done = make(chan struct{}, 1)
	op.c = c
	c.l.post(task{kind: taskSplice, s: op})
	select {
	case <-op.done:
		return
	case <-stop:
	case <-deadline:
	}
	c.l.post(task{kind: taskSpliceStop, s: op})
	<-op.done
}

// startSplice takes op on. Loop only.
func (l *loop) startSplice(op *SpliceOp) {
	c := op.c
	if !c.attachedNow() || c.closing || l.isTearing(c) || l.spliceOf(c) != nil {
		op.Res = -int32(unix.ECANCELED)
		op.done <- struct{}{}
		return
	}
	p, err := poll.GetPipe()
	if err != nil {
		op.Res = -int32(unix.EMFILE)
		var e unix.Errno
		if errors.As(err, &e) {
			op.Res = -int32(e)
		}
		op.done <- struct{}{}
		return
	}
	op.p = p
	l.splices[c] = op
	l.spliceStep(c)
}

// spliceOf returns c's file send in progress, or nil. It costs a length
// check while the loop has none. Loop only.
func (l *loop) spliceOf(c *conn) *SpliceOp {
	if len(l.splices) == 0 {
		return nil
	}
	return l.splices[c]
}

// spliceStep issues c's next splice, or ends the send. Loop only.
func (l *loop) spliceStep(c *conn) {
	op := l.splices[c]
	if op.inBusy || op.outBusy || op.waiting {
		return
	}
	switch {
	case op.stopped || op.Res != 0:
		l.endSplice(c)
	case op.held > 0:
		l.spliceOut(c, op.held, op.moved < op.N && !op.EOF)
	case op.moved < op.N && !op.EOF:
		l.spliceIn(c)
	default:
		l.endSplice(c)
	}
}

// spliceIn splices the next chunk of the file into the pipe and, linked,
// out of the pipe into the socket.
func (l *loop) spliceIn(c *conn) {
	op := l.splices[c]
	chunk := min(op.N-op.moved, op.p.Size-op.Off%pageSize, 1<<30)
	if chunk <= 0 {
		chunk = min(op.N-op.moved, op.p.Size) // a pipe smaller than a page
	}
	link := l.mode != ModeSQPoll
	if link {
		for l.ring.SQSpace() < 2 {
			l.submit(0) // both in one submission, or the link is cut
		}
	}
	sqe := l.getSQE()
	sqe.PrepSplice(op.File, op.Off, op.p.W, -1, uint32(chunk), unix.SPLICE_F_MOVE)
	sqe.UserData = userData(kindSpliceIn, c.gen, c.slot)
	op.inBusy = true
	if link {
		sqe.Flags |= uring.SqeIOLink
		l.spliceOut(c, chunk, op.moved+chunk < op.N)
	}
}

// spliceOut splices n bytes out of the pipe into the socket; more says
// that more of the file follows (SPLICE_F_MORE, which corks the socket
// as MSG_MORE does).
func (l *loop) spliceOut(c *conn, n int64, more bool) {
	op := l.splices[c]
	var flags uint32 = unix.SPLICE_F_MOVE
	if more {
		flags |= unix.SPLICE_F_MORE
	}
	sqe := l.getSQE()
	sqe.PrepSplice(op.p.R, -1, c.fd.Sysfd, -1, uint32(n), flags)
	c.useFixed(sqe)
	sqe.UserData = userData(kindSpliceOut, c.gen, c.slot)
	op.outBusy = true
	op.seq = c.outSeq.Load()
}

// pageSize is the unit of a file's page cache: a pipe slot holds at most
// one page of it.
const pageSize = 4096

// spliceInDone handles the completion of a file-to-pipe splice.
func (l *loop) spliceInDone(c *conn, cqe *uring.CQE) {
	if c == nil || l.spliceOf(c) == nil {
		return
	}
	op := l.splices[c]
	op.inBusy = false
	switch {
	case cqe.Res > 0:
		op.held += int64(cqe.Res)
		op.moved += int64(cqe.Res)
		op.Off += int64(cqe.Res)
	case cqe.Res == 0:
		op.EOF = true
	case cqe.Res == -int32(unix.EINTR) && !op.stopped:
		// Interrupted before it moved anything: the next step again.
	default:
		if !op.cancelledBy(cqe.Res) && op.Res == 0 {
			op.FileErr = true
		}
		l.spliceFailed(op, cqe.Res)
	}
	l.spliceNext(c)
}

// spliceOutDone handles the completion of a pipe-to-socket splice.
func (l *loop) spliceOutDone(c *conn, cqe *uring.CQE) {
	if c == nil || l.spliceOf(c) == nil {
		return
	}
	op := l.splices[c]
	op.outBusy = false
	switch {
	case cqe.Res > 0:
		op.held -= int64(cqe.Res)
		op.Sent += int64(cqe.Res)
		l.stats.BytesOut.Add(uint64(cqe.Res))
		c.fd.Touch()
	case cqe.Res == -int32(unix.ECANCELED) && !op.stopped:
		// The file splice before it moved less than the chunk and cut
		// the link (or the connection closes: stopped is set then).
	case cqe.Res == -int32(unix.EAGAIN) || cqe.Res == -int32(unix.EINTR):
		if op.stopped || l.isTearing(c) {
			break
		}
		if c.outSeq.Load() != op.seq {
			break // room came after the splice was issued: go again
		}
		op.waiting = true
		l.armPollOut(c)
	default:
		l.spliceFailed(op, cqe.Res)
	}
	l.spliceNext(c)
}

// cancelledBy reports whether a splice that completed with res was
// cancelled: -ECANCELED, or, once op was stopped, the interruption the
// cancel caused in a splice that io-wq was running.
func (op *SpliceOp) cancelledBy(res int32) bool {
	return res == -int32(unix.ECANCELED) || op.stopped && res == -int32(unix.EINTR)
}

// spliceFailed records the first error that ends op (a cancel is not one:
// stopped says it).
func (l *loop) spliceFailed(op *SpliceOp, res int32) {
	if op.cancelledBy(res) {
		op.stopped = true
		return
	}
	if op.Res == 0 {
		op.Res = res
	}
}

// spliceNext goes on after a completion: the next step, or, when the
// connection is being torn down, the end and the detach.
func (l *loop) spliceNext(c *conn) {
	op := l.splices[c]
	if l.isTearing(c) {
		op.stopped = true
		if !op.inBusy && !op.outBusy {
			l.endSplice(c)
			l.maybeDetach(c)
		}
		return
	}
	l.spliceStep(c)
}

// spliceRoom runs when the socket has room again (POLLOUT) for a send
// that waits for it.
func (l *loop) spliceRoom(c *conn) {
	if op := l.splices[c]; op != nil && op.waiting {
		op.waiting = false
		l.spliceStep(c)
	}
}

// stopSplice cancels op's splices in flight, on the caller's behalf (its
// deadline passed, or the file is closing); op ends with their
// completions, or at once if none is in flight. Loop only.
func (l *loop) stopSplice(op *SpliceOp) {
	c := op.c
	if l.spliceOf(c) != op {
		return // ended already
	}
	l.cancelSplice(c)
	if !op.inBusy && !op.outBusy {
		l.endSplice(c)
	}
}

// cancelSplice cancels c's splices in flight. Loop only.
func (l *loop) cancelSplice(c *conn) {
	op := l.splices[c]
	if op == nil || op.stopped {
		return
	}
	op.stopped = true
	op.waiting = false
	if op.inBusy {
		l.cancel(userData(kindSpliceIn, c.gen, c.slot))
	}
	if op.outBusy {
		l.cancel(userData(kindSpliceOut, c.gen, c.slot))
	}
}

// endSplice ends c's send: the pipe goes back to the pool if it is empty
// (closed otherwise), and the caller wakes. Loop only.
func (l *loop) endSplice(c *conn) {
	op := l.splices[c]
	delete(l.splices, c)
	poll.PutPipe(op.p, op.held)
	op.p = nil
	if op.stopped && op.Res == 0 && (op.moved < op.N && !op.EOF || op.held > 0) {
		op.Res = -int32(unix.ECANCELED)
	}
	// Nothing else waits for room: the caller holds the writers' lock.
	c.needOut = false
	l.stopPollOut(c)
	op.done <- struct{}{}
}
