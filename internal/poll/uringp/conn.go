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

	flags      connFlags // the loop's; see connFlags
	cancelTick uint8     // l.cancelClock when that cancel was prepared (cancel.go)
	// setup is what is settled before writers may send: uShared, set
	// before the conn is posted to the loop, and uFixed, set before it is
	// attached and cleared after it is detached. Writers read it in
	// uring-sqpoll mode, so it keeps a byte apart from the loop's flags.
	setup     setupFlags
	sendFlags sendFlags // under lockSend; a byte apart from the loop's flags
	staged    uint8     // the send in flight copied c.iov into this staging buffer (index+1; 0: none); under lockSend
	// armThread is l.thread when the input request was armed (park.go).
	// It belongs to the loop goroutine.
	armThread uint16
	outSeq    atomic.Uint32 // POLLOUT CQEs seen
	sendSeq   uint32        // outSeq when the send in flight was issued; under lockSend

	gather *sendGather // made on the first send of more than one slice
	pin    runtime.Pinner
	// mode is the state of the modes other than the default: made by
	// Register for uring-sqpoll, by the first send for uring-reactor.
	mode *modeState
}

// connFlags are a conn's states that only the loop goroutine reads and
// writes, one bit each, so that every idle connection's record stays in
// its size class (TestConnSize).
type connFlags uint16

const (
	fRecvArmed    connFlags = 1 << iota // multishot recv or poll in flight
	fCanceling                          // a cancel of the recv is in flight
	fPaused                             // input backpressure: no re-arm until Resume
	fStarved                            // on l.starved
	fEOF                                // input ended
	fClosing                            // Close seen; output draining
	fNotified                           // on l.notify
	fLimited                            // the recv in flight has a byte limit (SetRecvLimit)
	fPollIn                             // input by POLL_ADD and read(2), not multishot recv
	fOutArmed                           // a multishot POLLOUT is in flight (after a send's EAGAIN)
	fOutCanceling                       // its cancel is in flight
	fNeedOut                            // output waits for POLLOUT
	fMoving                             // the input request is cancelled to be armed anew (park.go)
	fRetrying                           // on l.cancels (cancel.go)
	fWatchOut                           // zero-copy sends watch POLLOUT, for good (WatchWritable)
)

func (c *conn) is(f connFlags) bool { return c.flags&f != 0 }
func (c *conn) set(f connFlags)     { c.flags |= f }
func (c *conn) unset(f connFlags)   { c.flags &^= f }

// put sets f if on, else clears it.
func (c *conn) put(f connFlags, on bool) {
	if on {
		c.set(f)
	} else {
		c.unset(f)
	}
}

// setupFlags are a conn's setup field.
type setupFlags uint8

const (
	// uShared: uring-sqpoll, where writers submit sends too, and mode.mu
	// guards the send fields. In the other modes only the loop touches
	// them, and lockSend takes no lock.
	uShared setupFlags = 1 << iota
	// uFixed: the socket is in the ring's fixed-file table at slot.
	uFixed
)

// sendFlags are the send's states, under lockSend: in uring-sqpoll mode
// writers change them too, so they keep a byte of their own.
type sendFlags uint8

const (
	sAttached sendFlags = 1 << iota // the loop has taken the conn in
	sSendBusy                       // a send is in flight
	sTearing                        // cancelling; no new requests
)

func (c *conn) sendIs(f sendFlags) bool { return c.sendFlags&f != 0 }
func (c *conn) sendSet(f sendFlags)     { c.sendFlags |= f }
func (c *conn) sendUnset(f sendFlags)   { c.sendFlags &^= f }

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
	c.put(fPollIn, l.mode == ModeReactor || isUnixSocket(c.fd.Sysfd))
	if !c.is(fPollIn) && c.slot < l.fixed {
		if l.ring.UpdateFile(c.slot, c.fd.Sysfd) == nil {
			c.setup |= uFixed
		}
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
	c.sendSet(sAttached)
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
	if c.setup&uFixed != 0 {
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
	return !c.is(fPaused) && !c.is(fStarved) && !c.is(fEOF) && !c.is(fClosing)
}

// close starts closing c: drain its output first, bounded by its drain
// timeout.
func (l *loop) close(c *conn) {
	if !c.attachedNow() || c.is(fClosing) {
		return // attach will see Closing
	}
	c.set(fClosing)
	if c.fd.OutputPending() && !c.fd.Aborted() {
		l.draining[c] = time.Now().Add(c.fd.DrainTimeout())
		l.flush(c)
		return
	}
	l.teardown(c)
}

func (c *conn) attachedNow() bool {
	c.lockSend()
	attached := c.sendIs(sAttached)
	c.unlockSend()
	return attached
}

func (l *loop) isTearing(c *conn) bool {
	c.lockSend()
	tearing := c.sendIs(sTearing)
	c.unlockSend()
	return tearing
}

// lockSend locks the send fields against writers that submit sends
// themselves (uring-sqpoll); in the other modes only the loop touches
// them and there is nothing to lock.
func (c *conn) lockSend() {
	if c.setup&uShared != 0 {
		c.mode.mu.Lock()
	}
}

func (c *conn) unlockSend() {
	if c.setup&uShared != 0 {
		c.mode.mu.Unlock()
	}
}

// teardown cancels every request on c; the last final CQE detaches it.
func (l *loop) teardown(c *conn) {
	c.lockSend()
	if c.sendIs(sTearing) {
		c.unlockSend()
		return
	}
	c.sendSet(sTearing)
	busy := c.sendIs(sSendBusy)
	c.unlockSend()
	delete(l.draining, c)
	l.cancelRecv(c)
	if busy {
		l.cancelSend(c)
	}
	if c.is(fWatchOut) {
		// Close wakes a send that waits; wake it anyway.
		c.unset(fWatchOut)
		c.fd.NoteWritable()
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
	busy := c.sendIs(sSendBusy)
	c.unlockSend()
	if c.is(fRecvArmed) || busy || c.is(fOutArmed) {
		return
	}
	if c.is(fStarved) {
		for i, s := range l.starved {
			if s == c {
				l.starved = append(l.starved[:i], l.starved[i+1:]...)
				break
			}
		}
		c.unset(fStarved)
	}
	l.conns[c.slot] = nil
	l.gens[c.slot] = (l.gens[c.slot] + 1) & genMask
	l.freeSlots = append(l.freeSlots, c.slot)
	l.live--
	if !c.fd.NoBlock {
		l.blockers--
	}
	if c.setup&uFixed != 0 {
		// The slot holds the socket open: clear it before the
		// descriptor closes, or the peer would see no FIN.
		if l.ring.UpdateFile(c.slot, -1) != nil {
			// Out of kernel memory, say: end the connection for the
			// peer anyway. The file itself waits in the slot until the
			// next connection there replaces it, or the ring closes.
			unix.Shutdown(c.fd.Sysfd, unix.SHUT_RDWR)
		}
		c.setup &^= uFixed
	}
	c.fd.Detach()
}
