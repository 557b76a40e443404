// Package gopool provides a goroutine pool for running connection handlers.
//
// A Pool keeps worker goroutines alive for a short idle period after they
// finish a task, so that a burst of short-lived handlers reuses a few
// goroutines (and their already-grown stacks) instead of starting a fresh
// goroutine for every task. Handlers may block for a long time (for example
// on a read), so the number of workers is not capped: when no worker is idle,
// Go simply starts another one.
//
// A Pool does not recover panics. A task that panics crashes the program
// exactly as it would if it had been started with a plain go statement.
package gopool

import (
	"sync"
	"sync/atomic"
	"time"
)

// defaultIdle is the idle timeout used when New is given a non-positive one.
const defaultIdle = time.Second

// Pool is a pool of worker goroutines. Create one with New; the zero value
// is not usable. All methods are safe for concurrent use by multiple
// goroutines.
type Pool struct {
	// tasks is unbuffered: a send succeeds only when an idle worker is
	// parked receiving on it, which is exactly the hand-off Go wants.
	tasks chan func()
	// done is closed by Close; workers select on it to exit.
	done chan struct{}
	idle time.Duration

	// closed mirrors "done is closed" so that Go can check it with one
	// atomic load. It is written only with mu held.
	closed atomic.Bool

	mu sync.Mutex
	// n is the number of live worker goroutines.
	n int
	// zero is non-nil while n > 0; it is closed (and reset to nil) when
	// n drops back to 0, which is what Wait blocks on.
	zero chan struct{}
}

// New returns a Pool whose idle workers wait up to idle for a new task
// before exiting. A non-positive idle means one second.
func New(idle time.Duration) *Pool {
	if idle <= 0 {
		idle = defaultIdle
	}
	return &Pool{
		tasks: make(chan func()),
		done:  make(chan struct{}),
		idle:  idle,
	}
}

// Go runs f on a worker goroutine of the pool. If a worker is idle, f is
// handed to it; otherwise a new worker goroutine is started for f. Go never
// blocks and there is no limit on the number of workers, so f may block for
// as long as it likes.
//
// Go called after Close has returned still runs f, on a new plain goroutine
// that is not a worker of the pool: it is not counted by Workers and not
// waited for by Wait. Late tasks are thus never lost.
//
// Panics in f are not recovered: they crash the program as they would in a
// goroutine started with a go statement.
//
// Go is safe for concurrent use.
func (p *Pool) Go(f func()) {
	if p.closed.Load() {
		go f()
		return
	}
	if p.tryGo(f) {
		return
	}
	p.spawn(f)
}

// tryGo hands f to an idle worker if one is parked waiting for a task and
// reports whether it did. It never blocks and does not allocate.
func (p *Pool) tryGo(f func()) bool {
	select {
	case p.tasks <- f:
		return true
	default:
		return false
	}
}

// spawn starts a new worker goroutine whose first task is f, or runs f on a
// plain goroutine if the pool has been closed in the meantime.
func (p *Pool) spawn(f func()) {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		go f()
		return
	}
	if p.n == 0 {
		p.zero = make(chan struct{})
	}
	p.n++
	p.mu.Unlock()
	go p.worker(f)
}

// worker runs f and then further tasks received from p.tasks until it has
// been idle for p.idle or the pool is closed.
func (p *Pool) worker(f func()) {
	// No defer/recover: a panicking task must crash like a plain goroutine.
	f()
	timer := time.NewTimer(p.idle)
	for {
		f = nil // do not keep the finished task's closure reachable while idle
		// A busy worker that finishes after Close exits here rather than
		// racing the closed done channel against a new task below.
		select {
		case <-p.done:
			p.exit(timer)
			return
		default:
		}
		// Since Go 1.23, Reset guarantees no stale value is received from
		// timer.C afterwards, even if the timer fired while we were busy.
		timer.Reset(p.idle)
		select {
		case f = <-p.tasks:
		case <-timer.C:
			p.exit(timer)
			return
		case <-p.done:
			p.exit(timer)
			return
		}
		f()
	}
}

// exit records that a worker goroutine is about to return.
func (p *Pool) exit(timer *time.Timer) {
	timer.Stop()
	p.mu.Lock()
	p.n--
	if p.n == 0 {
		close(p.zero)
		p.zero = nil
	}
	p.mu.Unlock()
}

// Close shuts the pool down. Idle workers exit promptly; busy workers exit
// as soon as their current task returns. Close does not wait for them: call
// Wait for that. Tasks submitted with Go after Close run on plain
// goroutines. Calling Close more than once is harmless.
//
// Close is safe for concurrent use.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed.Load() {
		p.closed.Store(true)
		close(p.done)
	}
	p.mu.Unlock()
}

// Wait blocks until the pool has no worker goroutines left. After Close it
// returns once every worker has exited, which makes it suitable for graceful
// shutdown and goroutine-leak checks. Called on an open pool it returns when
// the worker count reaches zero (all workers have gone idle and timed out),
// but new workers may of course be started afterwards by Go. Goroutines
// started by Go after Close are not pool workers and are not waited for.
//
// Wait is safe for concurrent use.
func (p *Pool) Wait() {
	p.mu.Lock()
	ch := p.zero
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// Workers returns the current number of worker goroutines of the pool, busy
// or idle. It is meant for tests and statistics.
//
// Workers is safe for concurrent use.
func (p *Pool) Workers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}
