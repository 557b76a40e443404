//go:build linux

package uringp

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

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
	vecs [poll.MaxIov]uring.Iovec
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
	l.stopPollOut(c)
	l.maybeDetach(c)
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
	if c.recvArmed || busy || c.outArmed {
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
