//go:build linux

package uringp

import "time"

// nextTimer returns the time to the nearest drain deadline or cancel
// tick.
func (l *loop) nextTimer() (time.Duration, bool) {
	first := l.cancelAt
	for _, t := range l.draining {
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return time.Until(first), true
}

// expire acts on passed deadlines.
func (l *loop) expire() {
	if len(l.draining) == 0 && l.cancelAt.IsZero() {
		return // no deadline: spare the clock read
	}
	now := time.Now()
	if !l.cancelAt.IsZero() && !now.Before(l.cancelAt) {
		l.retryCancels(now)
	}
	for c, t := range l.draining {
		if !now.Before(t) {
			c.fd.ExpireDrain(&l.stats)
			l.teardown(c)
		}
	}
}
