// Package gopool provides a goroutine pool for running connection handlers.
//
// A Pool keeps worker goroutines alive for a short idle period after they
// finish a task, so that a burst of short-lived handlers reuses a few
// goroutines (and their already-grown stacks) instead of starting a fresh
// goroutine for every task. Handlers may block for a long time (for example
// on a read), so the number of workers is not capped: when no worker is idle,
// Go simply starts another one.
//
// Handing a task to an idle worker costs one uncontended lock and one
// channel send to a goroutine parked on a channel of its own: no timer is
// touched per task. Idle workers are kept on a stack, so the most recently
// used one (its stack warm in the cache) runs the next task, and those at the
// bottom, idle longest, are the ones a periodic sweep lets go.
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
	idle time.Duration

	// closed mirrors "Close was called" so that Go can check it with one
	// atomic load. It is written only with mu held.
	closed atomic.Bool

	mu sync.Mutex
	// parked holds the idle workers, each blocked receiving on its task
	// channel (or about to), in the order they parked: their park epochs
	// never decrease from the bottom up.
	parked []*worker
	// epoch counts sweeps; a worker parked in an earlier epoch than the
	// current one has been idle for at least one sweep period.
	epoch uint64
	// sweep lets go of the workers idle for a whole period; it is
	// scheduled while workers are parked (sweeping).
	sweep    *time.Timer
	sweeping bool
	// n is the number of live worker goroutines.
	n int
	// zero is non-nil while n > 0; it is closed (and reset to nil) when
	// n drops back to 0, which is what Wait blocks on.
	zero chan struct{}
}

// worker is one goroutine of the pool.
type worker struct {
	// task passes the next task to the parked worker, or nil to make it
	// exit. Its capacity of one lets the sender go on whether or not the
	// worker is blocked on it yet.
	task  chan func()
	epoch uint64 // the pool's epoch when the worker parked
}

// New returns a Pool whose idle workers wait between idle and twice idle
// for a new task before exiting. A non-positive idle means one second.
func New(idle time.Duration) *Pool {
	if idle <= 0 {
		idle = defaultIdle
	}
	p := &Pool{idle: idle}
	p.sweep = time.AfterFunc(time.Hour, p.sweepIdle)
	p.sweep.Stop()
	return p
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

// tryGo hands f to an idle worker if one is parked and reports whether it
// did. It never blocks and does not allocate.
func (p *Pool) tryGo(f func()) bool {
	p.mu.Lock()
	n := len(p.parked)
	if n == 0 {
		p.mu.Unlock()
		return false
	}
	w := p.parked[n-1]
	p.parked[n-1] = nil
	p.parked = p.parked[:n-1]
	p.mu.Unlock()
	w.task <- f
	return true
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
	go p.work(&worker{task: make(chan func(), 1)}, f)
}

// work runs f and then further tasks handed to w until it is told to exit.
func (p *Pool) work(w *worker, f func()) {
	// No defer/recover: a panicking task must crash like a plain goroutine.
	for f != nil {
		f()
		f = nil // do not keep the finished task's closure reachable while idle
		f = p.park(w)
	}
	p.exit()
}

// park puts w on the idle stack and waits for its next task; nil means
// exit.
func (p *Pool) park(w *worker) func() {
	p.mu.Lock()
	if p.closed.Load() {
		// A busy worker that finishes after Close exits here.
		p.mu.Unlock()
		return nil
	}
	w.epoch = p.epoch
	p.parked = append(p.parked, w)
	if !p.sweeping {
		p.sweeping = true
		p.sweep.Reset(p.idle)
	}
	p.mu.Unlock()
	return <-w.task
}

// sweepIdle runs every idle period while workers are parked: it lets go of
// those parked since before the last sweep.
func (p *Pool) sweepIdle() {
	p.mu.Lock()
	old := 0
	for old < len(p.parked) && p.parked[old].epoch < p.epoch {
		old++
	}
	stale := make([]*worker, old)
	copy(stale, p.parked[:old])
	p.parked = append(p.parked[:0], p.parked[old:]...)
	clear(p.parked[len(p.parked) : len(p.parked)+old])
	p.epoch++
	p.sweeping = len(p.parked) > 0 && !p.closed.Load()
	if p.sweeping {
		p.sweep.Reset(p.idle)
	}
	p.mu.Unlock()
	for _, w := range stale {
		w.task <- nil
	}
}

// exit records that a worker goroutine is about to return.
func (p *Pool) exit() {
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
	p.closed.Store(true)
	idle := p.parked
	p.parked = nil
	p.sweep.Stop()
	p.sweeping = false
	p.mu.Unlock()
	for _, w := range idle {
		w.task <- nil
	}
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
