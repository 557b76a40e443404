package poll

import "sync/atomic"

// The channels a connection's waiters block on are made only when somebody
// first waits: an idle connection served by a handler never blocks, and a
// channel is a good part of an idle connection's memory
// (docs/RELIABILITY.md, memory per idle connection).

// token is a wake-up token: a channel of capacity one that a signal fills
// and a waiter drains. Spurious wake-ups are allowed; waiters re-check
// their condition.
//
// Lost wake-ups are avoided by order: a signal sent before the channel
// exists is dropped, so a waiter must get the channel (wait) before its
// last check of the condition, and the signaller must change the condition
// before it signals. Then either the waiter's check sees the change, or the
// signal finds the channel and leaves a token in it.
type token struct {
	c atomic.Pointer[chan struct{}]
}

// wait returns the channel to block on, making it if need be.
func (t *token) wait() <-chan struct{} {
	if p := t.c.Load(); p != nil {
		return *p
	}
	c := make(chan struct{}, 1)
	if t.c.CompareAndSwap(nil, &c) {
		return c
	}
	return *t.c.Load()
}

// signal leaves a token for a waiter, if one ever waited and no token is
// there yet.
func (t *token) signal() {
	if p := t.c.Load(); p != nil {
		select {
		case *p <- struct{}{}:
		default:
		}
	}
}

// event happens once: its channel is closed when it fires. The channel is
// made only for a waiter that comes before the event; after it, every
// waiter gets firedChan.
type event struct {
	c atomic.Pointer[chan struct{}]
}

// firedChan is the channel of every event that fired before anybody
// waited on it. It is closed from the start and never closed again.
var firedChan = expiredChan

// fire makes the event happen. It reports false if it had already.
func (e *event) fire() bool {
	old := e.c.Swap(&firedChan)
	if old == &firedChan {
		return false
	}
	if old != nil {
		close(*old)
	}
	return true
}

// done returns a channel that is closed once the event has happened.
func (e *event) done() <-chan struct{} {
	if p := e.c.Load(); p != nil {
		return *p
	}
	c := make(chan struct{})
	if e.c.CompareAndSwap(nil, &c) {
		return c
	}
	return *e.c.Load() // fired, or another waiter made it
}
