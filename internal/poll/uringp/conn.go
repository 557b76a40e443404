//go:build linux

package uringp

import (
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

const maxIov = 64

// conn is the loop's state for one FD. The loop goroutine owns it, except
// the send fields under sendMu in uring-sqpoll mode, where writers submit
// (lockSend).
type conn struct {
	fd   *poll.FD
	l    *loop
	slot uint32
	gen  uint32

	recvArmed    bool          // multishot recv or poll in flight
	canceling    bool          // a cancel of the recv is in flight
	paused       bool          // input backpressure: no re-arm until Resume
	starved      bool          // on l.starved
	eof          bool          // input ended
	closing      bool          // Close seen; output draining
	notified     bool          // on l.notify
	limited      bool          // the recv in flight has a byte limit (SetRecvLimit)
	pollIn       bool          // input by POLL_ADD and read(2), not multishot recv
	fixed        bool          // the socket is in the ring's fixed-file table at slot
	outArmed     bool          // a multishot POLLOUT is in flight (after a send's EAGAIN)
	outCanceling bool          // its cancel is in flight
	needOut      bool          // output waits for POLLOUT
	moving       bool          // the input request is cancelled to be armed anew (park.go)
	cancelTick   uint8         // l.cancelClock when that cancel was prepared (cancel.go)
	retrying     bool          // on l.cancels (cancel.go)
	outSeq       atomic.Uint32 // POLLOUT CQEs seen
	sendSeq      uint32        // outSeq when the send in flight was issued; under lockSend

	// shared is set in uring-sqpoll mode, where writers submit sends too:
	// mode.mu then guards the send fields. In the other modes only the
	// loop touches them, and lockSend takes no lock.
	shared   bool   // set before the conn is posted to the loop
	attached bool   // under lockSend
	sendBusy bool   // a send is in flight; under lockSend
	tearing  bool   // cancelling; no new requests; under lockSend
	staged   uint16 // the send in flight copied c.iov into this staging buffer (index+1; 0: none)
	// armThread is l.thread when the input request was armed (park.go).
	// It belongs to the loop goroutine.
	armThread uint16

	gather *sendGather // made on the first send of more than one slice
	pin    runtime.Pinner
	// mode is the state of the modes other than the default: made by
	// Register for uring-sqpoll, by the first send for uring-reactor.
	mode *modeState
}

// modeState is a conn's state that only uring-sqpoll or uring-reactor
// need, kept apart so that the default mode's idle connections do not
// carry it.
type modeState struct {
	mu   sync.Mutex   // uring-sqpoll: the send fields' lock (lockSend)
	ring *sendRing    // uring-sqpoll: the ring this conn sends on
	vecs *poll.Iovecs // uring-reactor: sendmsg's iovecs
	// iov is the send's slices: uring-sqpoll's writers prepare sends
	// themselves, and uring-reactor's loop sends them itself. The default
	// modes' loop uses a scratch of its own (loop.iov).
	iov [][]byte
}

// sendGather is the scratch of a gathered send (SENDMSG): the message
// header and its iovecs, which the kernel reads while the send is in
// flight. A connection gets one on its first send of more than one slice,
// so idle connections and those whose sends fit one slice do not carry its
// 1 KiB.
type sendGather struct {
	msg  uring.Msghdr
	vecs [maxIov]uring.Iovec
}

// attach gives c a slot and starts its input.
func (l *loop) attach(c *conn) {
	if n := len(l.freeSlots); n > 0 {
		c.slot = l.freeSlots[n-1]
		l.freeSlots = l.freeSlots[:n-1]
	} else {
		c.slot = uint32(len(l.conns))
		l.conns = append(l.conns, nil)
		l.gens = append(l.gens, 0)
	}
	c.gen = l.gens[c.slot]
	c.pollIn = l.mode == ModeReactor || isUnixSocket(c.fd.Sysfd)
	if !c.pollIn && c.slot < l.fixed {
		c.fixed = l.ring.UpdateFile(c.slot, c.fd.Sysfd) == nil
	}
	l.conns[c.slot] = c
	l.live++
	if !c.fd.NoBlock {
		l.blockers++
	}
	if l.send != nil {
		c.mode.ring = l.send.pick(c.slot)
	}
	c.lockSend()
	c.attached = true
	c.unlockSend()
	if c.fd.Closing() {
		l.close(c)
		return
	}
	l.armRecv(c)
	if c.fd.OutputPending() {
		l.flush(c) // a writer queued before the slot existed
	}
}

// armRecv starts the connection's multishot input request.
func (l *loop) armRecv(c *conn) {
	sqe := l.getSQE()
	if c.pollIn {
		sqe.PrepPollMultishot(c.fd.Sysfd, unix.POLLIN|unix.POLLRDHUP)
		sqe.UserData = userData(kindPoll, c.gen, c.slot)
	} else {
		sqe.PrepRecvMultishot(c.fd.Sysfd, 0, l.bufs.ring.Bgid)
		c.useFixed(sqe)
		if !l.noRecvLimit {
			// The kernel stops at the high-water mark by itself: held
			// input never exceeds it by more than one buffer.
			sqe.SetRecvLimit(uint32(max(c.fd.InputRoom(), l.recvFloor())))
			c.limited = true
		}
		sqe.UserData = userData(kindRecv, c.gen, c.slot)
	}
	c.recvArmed = true
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

// useFixed makes sqe name c's fixed-file slot instead of its descriptor,
// if c has one.
func (c *conn) useFixed(sqe *uring.SQE) {
	if c.fixed {
		sqe.Fd = int32(c.slot)
		sqe.Flags |= uring.SqeFixedFile
	}
}

// isUnixSocket reports whether sysfd is an AF_UNIX socket. The io_uring
// engines read those through a multishot POLL_ADD and read(2): a
// multishot recv on an AF_UNIX stream socket can miss the wake-up for its
// last data and EOF, leaving a reader blocked for ever, where TCP does not
// (the suite's unix cases, suite_test.go and stress_test.go, hang with it).
func isUnixSocket(sysfd int) bool {
	d, err := unix.GetsockoptInt(sysfd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	return err == nil && d == unix.AF_UNIX
}

// wantsInput reports whether c's input request should be in flight.
func (c *conn) wantsInput() bool {
	return !c.paused && !c.starved && !c.eof && !c.closing
}

// recvDone handles a multishot recv CQE.
func (l *loop) recvDone(c *conn, cqe *uring.CQE) {
	var p []byte
	// An incrementally consumed buffer that a completion filled nothing of
	// stays at the ring's head for the next one (the kernel consumed
	// nothing); otherwise a buffer a completion carries was taken.
	if cqe.Flags&uring.CQEFBuffer != 0 && (cqe.Res > 0 || !l.bufs.inc) {
		hold := c != nil && cqe.Res > 0 && !c.closing
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
				c.paused = true
				if cqe.More() && !c.limited {
					// A kernel without recv limits pauses by cancel;
					// this one, if an earlier one missed.
					l.cancelRecv(c)
				}
			}
			l.wakeReader(c)
		}
	case cqe.Res == 0:
		c.eof = true
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
		if !c.starved {
			c.starved = true
			l.starved = append(l.starved, c)
			l.starving.Store(true)
		}
	case cqe.Res == -int32(unix.ECANCELED):
		l.countCancel(c)
	case cqe.Res == -int32(unix.EINVAL) && c.limited && !l.noRecvLimit:
		// The kernel knows no recv limit: pause by cancelling instead.
		l.noRecvLimit = true
	default:
		c.eof = true
		c.fd.InputError(errno("recv", cqe.Res))
		l.wakeReader(c)
	}
	if cqe.More() {
		return
	}
	c.recvArmed, c.canceling, c.moving = false, false, false
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
	if c.canceling {
		l.resendCancel(c)
		return
	}
	switch {
	case c.closing && l.isTearing(c):
		l.cancelRecv(c)
	case l.armedElsewhere(c):
		c.moving = true
		l.cancelRecv(c)
	}
}

// countCancel counts an input request that a cancel ended: as moved if it
// was cancelled only to be armed anew, else in InputCancels.
func (l *loop) countCancel(c *conn) {
	if c.moving && !c.paused && !c.closing {
		l.stats.InputMoves.Add(1)
		return
	}
	l.stats.InputCancels.Add(1)
}

func (l *loop) wakeReader(c *conn) {
	if !c.notified {
		c.notified = true
		l.notify = append(l.notify, c)
	}
}

// resume restarts input after backpressure.
func (l *loop) resume(c *conn) {
	if l.isTearing(c) || c.closing {
		return
	}
	c.paused = false
	if c.pollIn {
		if c.recvArmed && poll.ReadReady(c.fd, false, &l.stats) {
			l.later(task{kind: taskResume, c: c})
		}
		return
	}
	if !c.recvArmed && c.wantsInput() {
		l.stats.Rearms.Add(1)
		l.armRecv(c)
	}
}

// flush starts sending c's queued output if no send is in flight.
func (l *loop) flush(c *conn) {
	if l.spliceOf(c) != nil {
		// A file send holds the writers' lock: nothing is queued, and
		// this is the POLLOUT it waits for.
		l.spliceRoom(c)
		return
	}
	if l.mode == ModeReactor {
		l.reactorFlush(c)
		return
	}
	c.lockSend()
	defer c.unlockSend()
	if !c.attached || c.tearing || c.sendBusy {
		return
	}
	if l.send != nil {
		m := c.mode
		if m.iov = c.fd.OutputSlices(m.iov[:0], maxIov); len(m.iov) > 0 {
			l.send.submit(c)
		}
		return
	}
	l.iov = c.fd.OutputSlices(l.iov[:0], maxIov)
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
			c.staged = ref
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
	c.sendBusy = true
	c.sendSeq = c.outSeq.Load()
}

// sendDone handles a send CQE: account the bytes and send the rest.
func (l *loop) sendDone(c *conn, cqe *uring.CQE) {
	if c == nil {
		return
	}
	c.lockSend()
	roomSince := c.sendSeq != c.outSeq.Load()
	c.sendBusy = false
	if c.staged != 0 {
		l.stage.unstage(c.staged)
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
	if c.closing {
		l.teardown(c)
	}
}

// close starts closing c: drain its output first, bounded by its drain
// timeout.
func (l *loop) close(c *conn) {
	if !c.attachedNow() || c.closing {
		return // attach will see Closing
	}
	c.closing = true
	if c.fd.OutputPending() && !c.fd.Aborted() {
		l.draining[c] = time.Now().Add(c.fd.DrainTimeout())
		l.flush(c)
		return
	}
	l.teardown(c)
}

func (c *conn) attachedNow() bool {
	c.lockSend()
	attached := c.attached
	c.unlockSend()
	return attached
}

func (l *loop) isTearing(c *conn) bool {
	c.lockSend()
	tearing := c.tearing
	c.unlockSend()
	return tearing
}

// lockSend locks the send fields against writers that submit sends
// themselves (uring-sqpoll); in the other modes only the loop touches
// them and there is nothing to lock.
func (c *conn) lockSend() {
	if c.shared {
		c.mode.mu.Lock()
	}
}

func (c *conn) unlockSend() {
	if c.shared {
		c.mode.mu.Unlock()
	}
}

// teardown cancels every request on c; the last final CQE detaches it.
func (l *loop) teardown(c *conn) {
	c.lockSend()
	if c.tearing {
		c.unlockSend()
		return
	}
	c.tearing = true
	busy := c.sendBusy
	c.unlockSend()
	delete(l.draining, c)
	l.cancelRecv(c)
	if busy {
		l.cancelSend(c)
	}
	if op := l.spliceOf(c); op != nil {
		l.cancelSplice(c)
		if !op.inBusy && !op.outBusy {
			l.endSplice(c)
		}
	}
	l.stopPollOut(c)
	l.maybeDetach(c)
}

func (l *loop) cancelSend(c *conn) {
	if l.send != nil {
		l.send.cancel(c)
		return
	}
	l.cancel(userData(kindSend, c.gen, c.slot))
}

// maybeDetach lets go of c once no request is in flight on it: it frees
// c's slot for reuse under a new generation and drops the loop's reference
// to the FD, whose last holder then closes the descriptor and recycles its
// buffers (poll's lifetime.go). Buffers a reader still holds stay out of
// the ring until it releases them.
func (l *loop) maybeDetach(c *conn) {
	c.lockSend()
	busy := c.sendBusy
	c.unlockSend()
	if c.recvArmed || busy || c.outArmed || l.spliceOf(c) != nil {
		return
	}
	if c.starved {
		for i, s := range l.starved {
			if s == c {
				l.starved = append(l.starved[:i], l.starved[i+1:]...)
				break
			}
		}
		c.starved = false
	}
	l.conns[c.slot] = nil
	l.gens[c.slot] = (l.gens[c.slot] + 1) & genMask
	l.freeSlots = append(l.freeSlots, c.slot)
	l.live--
	if !c.fd.NoBlock {
		l.blockers--
	}
	if c.fixed {
		// The slot holds the socket open: clear it before the
		// descriptor closes, or the peer would see no FIN.
		if l.ring.UpdateFile(c.slot, -1) != nil {
			// Out of kernel memory, say: end the connection for the
			// peer anyway. The file itself waits in the slot until the
			// next connection there replaces it, or the ring closes.
			unix.Shutdown(c.fd.Sysfd, unix.SHUT_RDWR)
		}
		c.fixed = false
	}
	c.fd.Detach()
}
