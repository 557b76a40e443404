//go:build linux

package main

import (
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A pacer sends the requests of a load with a fixed rate at the instants
// the schedule gives them, from a thread of its own: slot i of n sends
// at base + i*step, slot i again at base + (i+n)*step, and so on, so that
// the requests of all the slots together come evenly spaced, step apart.
//
// Goroutines that wait for their turn with Go's timers cannot keep such a
// schedule: a Go program whose processors are idle sleeps in its network
// poller in whole milliseconds (runtime/netpoll_epoll.go), and every
// timer that fell due meanwhile fires at once when it wakes. At 20,000
// requests a second from 100 clients, that sent 84% of the requests
// within 5 µs of the one before, in bunches of about twenty a
// millisecond, where the schedule spaced them 50 µs apart; the servers
// under test then went idle once a bunch rather than once a request,
// which is a load of another shape than the one asked for. The pacer's
// thread sleeps in clock_nanosleep to an absolute time with a timer slack
// of 1 ns, and writes each request itself.
//
// A slot whose request is still unanswered when its turn comes is marked
// due, and its next request goes as soon as the reply comes; turns missed
// meanwhile are dropped, not saved up, so the rate is a ceiling.
type pacer struct {
	slots []*pacedSlot
	step  time.Duration
	base  time.Time // time.Since(base) stamps the sends
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	procs int // GOMAXPROCS before the pacer raised it, restored when it ends
}

// Slot states.
const (
	slotWaiting  = iota // its owner is reading the last reply or preparing the next request
	slotReady           // the next request is prepared; the pacer sends it at the slot's turn
	slotInFlight        // sent, not answered yet
)

// A pacedSlot is one connection or client under a pacer. Its owner
// prepares a request, calls ready, reads the reply and calls answered;
// the pacer sends the request at the slot's turn. send and lost are
// called with mu held, by the pacer or by the owner.
type pacedSlot struct {
	mu    sync.Mutex
	state int
	due   bool          // the slot's turn came while it was not ready
	seq   uint64        // requests sent so far: the one in flight is number seq
	sent  time.Duration // when the request in flight went, since the pacer's base
	err   error         // the first error send returned

	send func() error // sends the prepared request
	// With lostAfter above 0, a request in flight longer than that when
	// its slot's turn comes is given up: lost is called, and the slot's
	// next request sent at once (by send, which prepares it: for loads
	// whose owner does not call ready).
	lostAfter time.Duration
	lost      func()
}

// maxPaceLag is how far the pacer may fall behind its schedule and catch
// up (sending the late turns back to back); further behind, it skips the
// turns it missed.
const maxPaceLag = 2 * time.Millisecond

// startPacer starts a pacer over slots at rate requests a second (each
// slot sending one request a turn), the first turn at once. A pacer needs
// a Go processor besides the one its thread keeps while it sleeps, so it
// raises GOMAXPROCS to 2 if it is lower, until stop.
func startPacer(slots []*pacedSlot, rate float64) *pacer {
	p := &pacer{
		slots: slots,
		step:  max(time.Duration(1e9/rate), 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
		procs: runtime.GOMAXPROCS(0),
	}
	if p.procs < 2 {
		runtime.GOMAXPROCS(2)
	}
	started := make(chan struct{})
	go p.run(started)
	<-started
	return p
}

// end stops the pacer and waits until its thread has left the schedule.
// Later calls do nothing.
func (p *pacer) end() {
	p.once.Do(func() {
		close(p.stop)
		<-p.done
		if p.procs < 2 {
			runtime.GOMAXPROCS(p.procs)
		}
	})
}

// since is the pacer's clock: time since its base.
func (p *pacer) since() time.Duration { return time.Since(p.base) }

func (p *pacer) run(started chan<- struct{}) {
	defer close(p.done)
	runtime.LockOSThread() // the timer slack is the thread's; the thread dies with the goroutine
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	var mono0 unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono0)
	p.base = time.Now()
	close(started)
	origin := mono0.Nano()
	for turn := int64(0); ; turn++ {
		at := time.Duration(turn) * p.step
		if now := p.since(); now-at > maxPaceLag {
			turn = int64(now / p.step) // skip the turns missed
			at = time.Duration(turn) * p.step
		}
		// Sleep to the turn in pieces of at most 10 ms, to see stop.
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			left := at - p.since()
			if left <= 0 {
				break
			}
			wake := origin + int64(at)
			if left > 10*time.Millisecond {
				wake = origin + int64(p.since()+10*time.Millisecond)
			}
			ts := unix.NsecToTimespec(wake)
			unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
		}
		p.visit(p.slots[turn%int64(len(p.slots))])
	}
}

// visit is a slot's turn.
func (p *pacer) visit(s *pacedSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case slotReady:
		s.fire(p)
	case slotInFlight:
		if s.lostAfter > 0 && p.since()-s.sent > s.lostAfter {
			s.lost()
			s.fire(p)
			return
		}
		s.due = true
	default:
		s.due = true
	}
}

// fire sends the slot's request now; mu is held. A request that send
// could not send stays ready, for the slot's next turn.
func (s *pacedSlot) fire(p *pacer) {
	s.due = false
	s.state = slotInFlight
	s.seq++
	s.sent = p.since()
	if err := s.send(); err != nil {
		s.state = slotReady
		if s.err == nil {
			s.err = err
		}
	}
}

// ready hands the slot's prepared request to the pacer; if its turn came
// while it was not ready, the request goes now.
func (s *pacedSlot) ready(p *pacer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.due {
		s.fire(p)
		return
	}
	s.state = slotReady
}

// answered ends request number seq, if it is the one in flight, and
// returns how long ago it was sent; false if it is not (a reply to a
// request given up). With next, the slot's next request is prepared by
// send: it is sent now if the slot's turn came meanwhile, else at its
// turn.
func (s *pacedSlot) answered(p *pacer, seq uint64, next bool) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != slotInFlight || seq != s.seq {
		return 0, false
	}
	took := p.since() - s.sent
	s.state = slotWaiting
	if next {
		if s.due {
			s.fire(p)
		} else {
			s.state = slotReady
		}
	}
	return took, true
}

// unsent reports whether the slot's request is prepared and not sent:
// once the pacer has ended, one that will never be sent.
func (s *pacedSlot) unsent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == slotReady
}

// sendErr is the first error the slot's sends returned.
func (s *pacedSlot) sendErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
