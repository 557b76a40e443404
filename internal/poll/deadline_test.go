package poll

import (
	"testing"
	"time"
)

func TestDeadline(t *testing.T) {
	const wait = 5 * time.Second
	tests := []struct {
		name  string
		steps []time.Duration // relative deadlines set in order; 0 clears
		fires bool            // the channel from wait() after the last step closes
	}{
		{"unset", nil, false},
		{"past", []time.Duration{-time.Second}, true},
		{"future", []time.Duration{20 * time.Millisecond}, true},
		{"cleared", []time.Duration{-time.Second, 0}, false},
		{"past then far future", []time.Duration{-time.Second, time.Hour}, false},
		{"far future then past", []time.Duration{time.Hour, -time.Second}, true},
		{"future then cleared", []time.Duration{20 * time.Millisecond, 0}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := new(deadline)
			for _, rel := range tc.steps {
				if rel == 0 {
					d.set(time.Time{})
				} else {
					d.set(time.Now().Add(rel))
				}
			}
			c := d.wait()
			if !tc.fires {
				// A deadline that must not fire: it is unset or an hour
				// away; check it is open now and stays open for a while.
				select {
				case <-c:
					t.Fatal("deadline channel closed, want open")
				case <-time.After(50 * time.Millisecond):
				}
				if d.expired() {
					t.Fatal("expired() = true")
				}
				return
			}
			select {
			case <-c:
			case <-time.After(wait):
				t.Fatal("deadline did not fire")
			}
			if !d.expired() {
				t.Fatal("expired() = false after the channel closed")
			}
		})
	}
}

// A waiter that took the channel before the deadline was moved into the
// past must be released: this is how SetReadDeadline unblocks a Read.
func TestDeadlineMovedWhileWaiting(t *testing.T) {
	d := new(deadline)
	d.set(time.Now().Add(time.Hour))
	c := d.wait()
	done := make(chan struct{})
	go func() { <-c; close(done) }()
	d.set(time.Now().Add(-time.Second))
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not released when the deadline moved into the past")
	}
}

// TestDeadlineLazy: a deadline never used has no channel and has not
// expired; set in the past, it shares the pre-closed channel; cleared and
// set again, it gets channels of its own, and the shared one stays closed.
// A waiter that took the channel before any deadline was set is woken by a
// deadline set in the past.
func TestDeadlineLazy(t *testing.T) {
	var d deadline
	if d.cancel != nil || d.expired() || d.cancel != nil {
		t.Fatal("a deadline never used has a channel or has expired")
	}
	w := d.wait()
	d.set(time.Now().Add(-time.Second))
	select {
	case <-w:
	default:
		t.Fatal("a waiter from before the first set was not woken by a past deadline")
	}
	d.set(time.Time{})
	d = deadline{}
	d.set(time.Now().Add(-time.Second))
	if !d.expired() || d.wait() != expiredChan {
		t.Fatal("a past deadline on a fresh deadline did not take the pre-closed channel")
	}
	d.set(time.Time{})
	if d.expired() || d.cancel != nil {
		t.Fatal("clearing an expired deadline did not clear it")
	}
	// An hour away, it cannot have expired however slowly the test runs;
	// moved close, the same channel closes when it passes.
	d.set(time.Now().Add(time.Hour))
	c := d.wait()
	if c == nil || c == expiredChan || d.expired() {
		t.Fatal("a future deadline has no channel of its own, or has expired")
	}
	d.set(time.Now().Add(20 * time.Millisecond))
	select {
	case <-c:
	case <-time.After(20 * time.Second):
		t.Fatal("the deadline never fired")
	}
	if !d.expired() {
		t.Fatal("expired() = false after the channel closed")
	}
	d.set(time.Now().Add(-time.Second))
	if !d.expired() || !isClosedChan(expiredChan) {
		t.Fatal("re-expiring failed, or the shared channel reopened")
	}
}
