//go:build linux

package uringp

import "time"

// Cancelling a connection's input request (to pause input where the kernel
// has no recv byte limit, to close, or to arm it anew from another thread)
// can be lost: the cancel finds the request and reports success, yet the
// request goes on, and ends only with the next EOF, error or buffer
// shortage. That happens to a multishot recv that data keeps
// busy, often on rings without DEFER_TASKRUN (TestUringRearmAfterThreadMove
// and TestUringPauseByCancel lose many of their cancels without a retry):
// the cancel's mark on a request queued to retry seems to be dropped when
// the request arms its poll again. Input paused by a lost cancel would run
// past its high-water mark, and an idle connection whose close lost its
// cancel would never let go. So a cancel is sent again, and submitted at
// once, when its request completes again after the loop entered the kernel
// since the cancel was prepared (resendCancel); and every cancelTick while
// any input cancel is in flight, the loop sends again those prepared two
// ticks of its cancel clock ago or more, and those that missed their
// request and are still wanted (retryCancels). The clock ticks with every
// io_uring_enter and every cancelTick.

// cancelTick is how often the loop looks at the input cancels in flight.
const cancelTick = time.Millisecond

// cancelRecv cancels c's input request if it has one and no cancel is in
// flight already.
func (l *loop) cancelRecv(c *conn) {
	if !c.is(fRecvArmed) || c.is(fCanceling) {
		return
	}
	c.set(fCanceling)
	c.cancelTick = l.cancelClock
	k := kindRecv
	if c.is(fPollIn) {
		k = kindPoll
	}
	l.cancelAs(userData(k, c.gen, c.slot), userData(kindCancelInput, c.gen, c.slot))
	if !c.is(fRetrying) {
		c.set(fRetrying)
		l.cancels = append(l.cancels, c)
	}
	if l.cancelAt.IsZero() {
		l.cancelAt = time.Now().Add(cancelTick)
	}
}

// cancelInputMissed handles a cancel of c's input request that did not
// find it: the request was running (EALREADY) or had ended (ENOENT). If it
// is still armed and still to be cancelled, the next cancel tick cancels
// it again, as may its next completion (recvDone, pollDone).
func (l *loop) cancelInputMissed(c *conn) {
	if c != nil && c.is(fRecvArmed) && c.is(fCanceling) {
		c.unset(fCanceling)
	}
}

// resendCancel runs when c's input request completed and goes on while a
// cancel of it is in flight. If the loop entered the kernel since the
// cancel was prepared, the cancel was submitted and, going by this
// completion, lost (or this completion came first): it is sent again at
// once, so that a request data keeps busy runs past its cancel by one
// enter's worth of completions at most.
func (l *loop) resendCancel(c *conn) {
	if c.cancelTick == l.cancelClock {
		return // not submitted yet
	}
	l.stats.CancelRetries.Add(1)
	c.unset(fCanceling)
	l.cancelRecv(c)
	l.submit(0)
	c.cancelTick = l.cancelClock
}

// retryCancel cancels c's input request again if the cancel in flight was
// prepared two ticks of the cancel clock ago or more.
func (l *loop) retryCancel(c *conn) {
	if c.is(fCanceling) && l.cancelClock-c.cancelTick >= 2 {
		l.stats.CancelRetries.Add(1)
		c.unset(fCanceling)
		l.cancelRecv(c)
	}
}

// retryCancels runs once a cancelTick while input cancels are in flight:
// it forgets the requests that ended and retries the lost cancels.
func (l *loop) retryCancels(now time.Time) {
	l.cancelClock++
	kept := l.cancels[:0]
	for _, c := range l.cancels {
		switch {
		case !c.is(fRecvArmed):
			c.unset(fRetrying)
			continue
		case c.is(fCanceling):
			l.retryCancel(c)
		case l.isTearing(c) || c.is(fPaused) && !c.is(fLimited) || c.is(fMoving):
			l.cancelRecv(c) // missed (cancelInputMissed), and still wanted
		default:
			c.unset(fRetrying)
			continue
		}
		kept = append(kept, c)
	}
	clear(l.cancels[len(kept):])
	l.cancels = kept
	l.cancelAt = time.Time{}
	if len(l.cancels) > 0 {
		l.cancelAt = now.Add(cancelTick)
	}
}
