package poll

import (
	"sync"
	"sync/atomic"
	"time"
)

// deadline is one direction's deadline: a channel that is closed when the
// deadline passes. Waiters select on it next to their wake-up channel, so a
// deadline set while they block takes effect at once, and a deadline moved
// into the future re-opens the channel for the next wait. This is the shape
// of net.Pipe's deadline, which nettest.TestConn exercises.
//
// The channel is made on first use (a wait or a set), so a connection
// that never waits and never sets a deadline carries none.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{} // closed when the deadline has passed; nil until first used
	// used is cancel != nil, written under mu and read without it, so
	// that expired, asked on every read and write, costs one atomic load
	// on a connection that never set a deadline.
	used atomic.Bool
}

// deadlines are an FD's read and write deadlines, in its waitState: made
// when a deadline is first set or a user first blocks, so that a
// connection served by a handler that never blocks does not carry them.
type deadlines struct{ rd, wd deadline }

// deadlines returns fd's deadlines, making them if need be.
func (fd *FD) deadlines() *deadlines {
	w := fd.waits()
	if d := w.dl.Load(); d != nil {
		return d
	}
	w.dl.CompareAndSwap(nil, new(deadlines))
	return w.dl.Load()
}

// setDeadlines returns fd's deadlines if it has any, else nil.
func (fd *FD) setDeadlines() *deadlines {
	if w := fd.wait.Load(); w != nil {
		return w.dl.Load()
	}
	return nil
}

// readExpired and writeExpired report whether the read or write deadline
// has passed.
func (fd *FD) readExpired() bool {
	d := fd.setDeadlines()
	return d != nil && d.rd.expired()
}

func (fd *FD) writeExpired() bool {
	d := fd.setDeadlines()
	return d != nil && d.wd.expired()
}

// await blocks until wake has a token or the read (or with write, the
// write) deadline passes. While that deadline was never set it has no
// channel (nor, with neither set, any deadlines at all), and the waiter
// blocks on wake alone: one goroutine parked on one channel, where a
// select on two costs a second waiting record (sudog) and the deadline's
// own channel, about 200 B per blocked connection. Setting a deadline
// signals the waiters' tokens (SetReadDeadline, SetWriteDeadline), so that
// one blocked on wake alone comes back, sees the deadline and waits on
// both.
func (fd *FD) await(wake <-chan struct{}, write bool) {
	var d *deadline
	if dl := fd.setDeadlines(); dl != nil {
		d = &dl.rd
		if write {
			d = &dl.wd
		}
	}
	if d == nil || !d.used.Load() {
		<-wake
		return
	}
	select {
	case <-wake:
	case <-d.wait():
	}
}

// expiredChan is closed from the start: the cancel channel of a deadline
// set in the past before it ever had one. It is never closed again: set
// closes only channels it made.
var expiredChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// set arms the deadline for t; the zero time disarms it.
// Safe for concurrent use.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	defer func() { d.used.Store(d.cancel != nil) }() // runs before the unlock
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait until it closed the channel
	}
	d.timer = nil

	closed := isClosedChan(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = nil
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed || d.cancel == nil {
			d.cancel = make(chan struct{})
		}
		c := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(c) })
		return
	}
	switch {
	case d.cancel == nil:
		d.cancel = expiredChan
	case !closed:
		close(d.cancel)
	}
}

// wait returns the channel that is closed when the deadline passes. A
// waiter holds on to it, so it is made here if need be: a deadline set in
// the past while the waiter blocks must close this very channel.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil {
		d.cancel = make(chan struct{})
		d.used.Store(true)
	}
	return d.cancel
}

// expired reports whether the deadline has passed.
func (d *deadline) expired() bool {
	if !d.used.Load() {
		return false // never set, or cleared: no channel to look at
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel != nil && isClosedChan(d.cancel)
}

func isClosedChan(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
