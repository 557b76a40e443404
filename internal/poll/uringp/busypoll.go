//go:build linux

package uringp

import (
	"runtime"
	"time"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// busyLooks is how many looks a polling loop takes between two readings
// of the clock (and, for a loop not locked to its thread, two yields of
// its P).
const busyLooks = 16

// busyPoll polls, for up to Tuning.BusyPoll or until the next timer is
// due, for what would end an idle loop's sleep: completions in the CQ,
// task work the kernel flagged for the ring (watch holds the SQ flags
// that count), output posted to the inbox. It reports whether work came.
//
// A parked loop yields its P between looks, so the handlers and readers
// of the program run while it polls; their output reaches the inbox
// without a wake-up, since the loop is not marked sleeping yet. A locked
// loop does not yield: a yield on a locked thread hands its P to another
// thread and back, the two thread switches a sleep would have cost.
func (l *loop) busyPoll(watch uint32) bool {
	d := l.tuning.BusyPoll
	if next, timed := l.nextTimer(); timed && next < d {
		d = next
	}
	l.stats.BusyPolls.Add(1)
	deadline := time.Now().Add(d)
	for i := 1; ; i++ {
		if l.ring.CQReady() > 0 || l.ring.SQFlags()&watch != 0 || l.pending() {
			l.stats.BusyPollHits.Add(1)
			return true
		}
		if i%busyLooks == 0 {
			if !time.Now().Before(deadline) {
				return false
			}
			if !l.locked {
				runtime.Gosched()
			}
		}
	}
}

// busyWatch is the SQ flags a polling loop looks at: task work to run and
// a CQ overflow to flush, less the task work the last turn found to be
// another thread's (submitOrWait).
func busyWatch(staleTaskrun bool) uint32 {
	if staleTaskrun {
		return uring.SQCQOverflow
	}
	return uring.SQTaskrun | uring.SQCQOverflow
}
