//go:build linux

package uringp

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

// The uring-sqpoll mode replays the seed's polling design. The loop's ring
// is an SQPOLL ring: a kernel thread takes its submissions, so buffer
// returns and re-arms cost no syscall. Writers submit their own sends on N
// send rings, each behind a mutex, attached (ATTACH_WQ) to the loop ring so
// all share its one SQ thread. Send completions signal the loop's eventfd,
// on which the loop ring keeps a READ armed, so one blocking wait covers
// every ring. The loop spins a little before it sleeps.
//
// It needs spare cores: the SQ thread spins for SQThreadIdle after each
// submission, a full core while traffic flows, and on a machine whose cores
// are all busy it takes CPU from the application (on 2 vCPUs p99 latency
// went from under a millisecond to several).

// sendPoll bounds a wait while sends are in flight on the send rings.
const sendPoll = time.Millisecond

// spinFor is how long an idle sqpoll loop polls its rings before sleeping.
const spinFor = 50 * time.Microsecond

// newSQPollRing sets up an SQPOLL ring; with attach, it shares attach's SQ
// thread.
func newSQPollRing(t Tuning, attach *uring.Ring) (*uring.Ring, error) {
	p := uring.Params{CQEntries: t.CQEntries, SQThreadIdle: uint32(t.SQThreadIdle / time.Millisecond), Flags: uring.SetupSQPoll}
	if t.SQThreadCPU > 0 {
		p.Flags |= uring.SetupSQAff
		p.SQThreadCPU = uint32(t.SQThreadCPU - 1)
	}
	if attach != nil {
		p.Flags |= uring.SetupAttachWQ
		p.WQFd = uint32(attach.FD())
	}
	return newRing(t.SQEntries, p, []uint32{
		uring.SetupSubmitAll | uring.SetupNoSQArray | uring.SetupCQSize,
		uring.SetupSubmitAll | uring.SetupCQSize,
		uring.SetupCQSize,
	})
}

type sendRing struct {
	mu sync.Mutex // guards the SQ side; the loop alone reaps the CQ
	r  *uring.Ring
}

type sendRings struct {
	l        *loop
	rings    []*sendRing
	inflight atomic.Int64 // sends submitted and not yet reaped
}

func newSendRings(l *loop) (*sendRings, error) {
	s := &sendRings{l: l}
	for range l.tuning.SendRings {
		r, err := newSQPollRing(l.tuning, l.ring)
		if err != nil {
			s.close()
			return nil, err
		}
		s.rings = append(s.rings, &sendRing{r: r})
		if err := r.RegisterEventFD(l.ev.FD()); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *sendRings) pick(slot uint32) *sendRing { return s.rings[int(slot)%len(s.rings)] }

// flush is Loop.Flush from a writer goroutine: it submits the send itself.
// It reports false if c has no slot yet; the loop then sends on attach.
func (s *sendRings) flush(c *conn) bool {
	c.mode.mu.Lock()
	defer c.mode.mu.Unlock()
	if !c.sendIs(sAttached) {
		return false
	}
	if c.sendIs(sTearing) || c.sendIs(sSendBusy) {
		return true
	}
	m := c.mode
	if m.iov = c.fd.OutputSlices(m.iov[:0], poll.MaxIov); len(m.iov) > 0 {
		s.submit(c)
	}
	return true
}

// submit puts a send of c.mode.iov on c's send ring; c.mode.mu is held.
func (s *sendRings) submit(c *conn) {
	sr := c.mode.ring
	sr.mu.Lock()
	s.l.prepSend(s.getSQE(sr), c, c.mode.iov)
	s.inflight.Add(1)
	s.publish(sr)
	sr.mu.Unlock()
}

// cancel cancels c's send on its ring (cancellation works within a ring).
func (s *sendRings) cancel(c *conn) {
	sr := c.mode.ring
	sr.mu.Lock()
	sqe := s.getSQE(sr)
	sqe.PrepCancel64(userData(kindSend, c.gen, c.slot), 0)
	sqe.Flags |= uring.SqeCQESkipSuccess
	sqe.UserData = userData(kindCancel, 0, 0)
	s.publish(sr)
	sr.mu.Unlock()
}

// getSQE returns a free SQE of sr, waiting for the SQ thread to make room.
func (s *sendRings) getSQE(sr *sendRing) *uring.SQE {
	for {
		if sqe := sr.r.GetSQE(); sqe != nil {
			s.l.stats.SQEs.Add(1)
			return sqe
		}
		sr.r.Flush()
		enter(sr.r, 0, 0, uring.EnterSQWait|uring.EnterSQWakeup, nil, 0, false)
	}
}

// publish hands sr's new entries to the SQ thread, waking it if it sleeps.
func (s *sendRings) publish(sr *sendRing) {
	sr.r.Flush()
	// Flush's tail store and this load are sequentially consistent: if
	// the SQ thread went to sleep without seeing our tail, we see its
	// NEED_WAKEUP (liburing puts a full barrier here).
	if sr.r.SQFlags()&uring.SQNeedWakeup != 0 {
		s.l.stats.EnterWakeSQ.Add(1)
		enter(sr.r, 0, 0, uring.EnterSQWakeup, nil, 0, false)
	}
}

// reap copies send completions into dst. Loop only.
func (s *sendRings) reap(dst []uring.CQE) int {
	n := 0
	for _, sr := range s.rings {
		if n == len(dst) {
			break
		}
		if sr.r.SQFlags()&uring.SQCQOverflow != 0 {
			s.l.stats.CQOverflows.Add(1)
			s.l.stats.EnterGetEvents.Add(1)
			enter(sr.r, 0, 0, uring.EnterGetEvents, nil, 0, false)
		}
		k := sr.r.PeekCQE(dst[n:])
		for _, c := range dst[n : n+k] {
			if k, _, _ := splitUserData(c.UserData); k == kindSend {
				s.inflight.Add(-1)
			}
		}
		n += k
	}
	return n
}

func (s *sendRings) ready() bool {
	for _, sr := range s.rings {
		if sr.r.CQReady() > 0 {
			return true
		}
	}
	return false
}

func (s *sendRings) close() {
	for _, sr := range s.rings {
		sr.r.Close()
	}
}

// sqpollSubmit is submit for the loop's SQPOLL ring: publishing the tail
// is the submission; the kernel is entered only to wake the SQ thread, to
// wait, or to flush an overflowed CQ.
func (l *loop) sqpollSubmit(wait uint32) {
	r := l.ring
	pending := r.Flush()
	var flags uint32
	if r.SQFlags()&uring.SQNeedWakeup != 0 {
		flags |= uring.EnterSQWakeup
	}
	if pending >= r.Params.SQEntries {
		flags |= uring.EnterSQWait | uring.EnterSQWakeup
	}
	if wait > 0 {
		if flags != 0 && pending > 0 {
			l.stats.EnterWakeSQ.Add(1)
			l.enter(0, 0, flags)
		}
		l.stats.EnterWait.Add(1)
		var err error
		d, ok := l.nextTimer()
		if l.send.inflight.Load() > 0 && (!ok || d > sendPoll) {
			// Send completions land on other rings and reach this wait
			// through their eventfd; bound the wait anyway, so a send
			// completion can never sit unseen.
			d, ok = sendPoll, true
		}
		if ok {
			_, err = l.enterTimeout(r.Flush(), wait, uring.EnterGetEvents, max(d, time.Microsecond))
		} else {
			_, err = l.enter(0, wait, flags|uring.EnterGetEvents)
		}
		if err != nil && !uring.IsTemporary(err) {
			panic("ringpoll: io_uring_enter: " + err.Error())
		}
		return
	}
	if r.SQFlags()&uring.SQCQOverflow != 0 {
		flags |= uring.EnterGetEvents
	}
	if flags != 0 {
		if flags&uring.EnterSQWakeup != 0 {
			l.stats.EnterWakeSQ.Add(1)
		} else {
			l.stats.EnterGetEvents.Add(1)
		}
		l.enter(0, 0, flags)
	}
}

// spin polls the rings and the inbox for up to spinFor; it reports whether
// work came.
func (l *loop) spin() bool {
	deadline := time.Now().Add(spinFor)
	for i := 0; ; i++ {
		if l.ring.CQReady() > 0 || l.sendReady() || l.pending() {
			return true
		}
		if i%64 == 63 && time.Now().After(deadline) {
			return false
		}
	}
}
