// Package gopool provides a goroutine pool for running connection handlers.
//
// Tasks wait in one queue, and the pool's worker goroutines take them in
// order. A worker runs one task after another for as long as the queue has
// any, on its one stack, so a burst of short tasks costs one goroutine
// wake-up, not one each. Tasks may block for a long time (for example on a
// read), so no task may wait behind another: a worker that takes a task
// while more are queued first makes sure another worker is on its way (a
// parked one woken, or a new one started), which takes the next task if
// the first worker is still busy with its own. The number of workers is
// thus not capped; it grows to the number of tasks blocked at once, plus
// one.
//
// Idle workers park on a stack, so the most recently used one (its stack
// warm in the cache) is woken next. The pool keeps up to KeepIdle of them
// for good; while more are parked, a periodic sweep lets go of those at
// the bottom that stayed idle for a whole period. So a pool whose work
// needs at most KeepIdle idle workers arms no timer: a timer on the
// scheduler's heap makes every pass through the scheduler read the clock,
// and every sleep of the idle program in Go's poller a timed one, which
// at a fixed rate of requests (a sleep between most of them) costs CPU
// on every request; and it would wake an idle program every period.
//
// A Pool does not recover panics. A task that panics crashes the program
// exactly as it would if it had been started with a plain go statement; a
// task that must not, recovers in its own Run (as a ringpoll Server does
// around its handler).
package gopool

import (
	"sync"
	"sync/atomic"
	"time"
)

// defaultIdle is the idle timeout used when New is given a non-positive one.
const defaultIdle = time.Second

// KeepIdle is how many idle workers a pool keeps without a timeout; only
// those beyond them exit after the idle period.
const KeepIdle = 4

// Pool is a pool of worker goroutines. Create one with New; the zero value
// is not usable. All methods are safe for concurrent use by multiple
// goroutines.
type Pool struct {
	idle time.Duration

	// closed mirrors "Close was called" so that Go can check it with one
	// atomic load. It is written only with mu held.
	closed atomic.Bool

	mu sync.Mutex
	// tasks[head:] are the queued tasks, oldest first.
	tasks []Task
	head  int
	// helper is set while a worker has been woken or started to take
	// queued tasks and has not looked at the queue yet: Go and busy
	// workers need not wake another.
	helper bool
	// parked holds the idle workers, each blocked on its wake channel
	// (or about to), in the order they parked: their park epochs never
	// decrease from the bottom up.
	parked []*worker
	// epoch counts sweeps; a worker parked in an earlier epoch than the
	// current one has been idle for at least one sweep period.
	epoch uint64
	// sweep lets go of the workers idle for a whole period, beyond the
	// KeepIdle most recently parked; it is scheduled while more than
	// KeepIdle are parked (sweeping).
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
	// wake tells the parked worker to take tasks (true) or to exit
	// (false). Its capacity of one lets the sender go on whether or not
	// the worker is blocked on it yet.
	wake  chan bool
	epoch uint64 // the pool's epoch when the worker parked
}

// New returns a Pool whose idle workers, beyond the KeepIdle most
// recently used, wait between idle and twice idle for a new task before
// exiting. A non-positive idle means one second.
func New(idle time.Duration) *Pool {
	if idle <= 0 {
		idle = defaultIdle
	}
	p := &Pool{idle: idle}
	p.sweep = time.AfterFunc(time.Hour, p.sweepIdle)
	p.sweep.Stop()
	return p
}

// Task is work for the pool: Run is called once per submission, on a worker
// goroutine. A type whose values already exist (a connection) can be a
// Task without a closure made for it.
type Task interface{ Run() }

// Func is a func as a Task.
type Func func()

// Run calls f.
func (f Func) Run() { f() }

// Go runs f on a worker goroutine of the pool, as Submit(Func(f)) does.
func (p *Pool) Go(f func()) { p.Submit(Func(f)) }

// Submit runs t.Run on a worker goroutine of the pool: it queues t and, unless a
// worker is already on its way to the queue, wakes an idle worker or
// starts a new one. Submit never blocks and there is no limit on the
// number of workers, so t may block for as long as it likes.
//
// Submit called after Close has returned still runs t, on a new plain
// goroutine that is not a worker of the pool: it is not counted by Workers
// and not waited for by Wait. Late tasks are thus never lost.
//
// Panics in t are not recovered: they crash the program as they would in a
// goroutine started with a go statement.
//
// Submit is safe for concurrent use.
func (p *Pool) Submit(t Task) {
	if p.closed.Load() {
		go t.Run()
		return
	}
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		go t.Run()
		return
	}
	p.tasks = append(p.tasks, t)
	p.callHelper()
}

// callHelper, with mu held, makes sure a worker is on its way to the
// queue, and unlocks mu.
func (p *Pool) callHelper() {
	if p.helper {
		p.mu.Unlock()
		return
	}
	p.helper = true
	if n := len(p.parked); n > 0 {
		w := p.parked[n-1]
		p.parked[n-1] = nil
		p.parked = p.parked[:n-1]
		p.mu.Unlock()
		w.wake <- true
		return
	}
	if p.n == 0 {
		p.zero = make(chan struct{})
	}
	p.n++
	p.mu.Unlock()
	go p.work(&worker{wake: make(chan bool, 1)})
}

// work takes and runs queued tasks until it is told to exit. It starts as
// the helper: woken or started to look at the queue.
func (p *Pool) work(w *worker) {
	p.mu.Lock()
	for {
		p.helper = false // this worker is looking now
		for p.head < len(p.tasks) {
			t := p.tasks[p.head]
			p.tasks[p.head] = nil
			p.head++
			if p.head < len(p.tasks) {
				// More are queued and t may block: another worker
				// takes them if this one is still busy.
				p.callHelper()
			} else {
				p.mu.Unlock()
			}
			// No defer/recover: a panicking task must crash like a
			// plain goroutine.
			t.Run()
			p.mu.Lock()
		}
		p.tasks, p.head = p.tasks[:0], 0
		if !p.park(w) {
			break
		}
	}
	p.n--
	if p.n == 0 {
		close(p.zero)
		p.zero = nil
	}
	p.mu.Unlock()
}

// park, with mu held, puts w on the idle stack and waits to be woken; it
// returns with mu held, reporting false if w must exit.
func (p *Pool) park(w *worker) bool {
	if p.closed.Load() {
		return false
	}
	w.epoch = p.epoch
	p.parked = append(p.parked, w)
	if !p.sweeping && len(p.parked) > KeepIdle {
		p.sweeping = true
		p.sweep.Reset(p.idle)
	}
	p.mu.Unlock()
	work := <-w.wake
	p.mu.Lock()
	return work
}

// sweepIdle runs every idle period while more than KeepIdle workers are
// parked: it lets go of those parked since before the last sweep, but for
// the KeepIdle most recently parked.
func (p *Pool) sweepIdle() {
	p.mu.Lock()
	old := 0
	for old < len(p.parked)-KeepIdle && p.parked[old].epoch < p.epoch {
		old++
	}
	stale := make([]*worker, old)
	copy(stale, p.parked[:old])
	p.parked = append(p.parked[:0], p.parked[old:]...)
	clear(p.parked[len(p.parked) : len(p.parked)+old])
	p.epoch++
	p.sweeping = len(p.parked) > KeepIdle && !p.closed.Load()
	if p.sweeping {
		p.sweep.Reset(p.idle)
	}
	p.mu.Unlock()
	for _, w := range stale {
		w.wake <- false
	}
}

// Close shuts the pool down. Idle workers exit promptly; busy workers exit
// once the queue is empty and their current task returns. Close does not
// wait for them: call Wait for that. Tasks queued before Close still run;
// tasks submitted with Go or Submit after Close run on plain goroutines. Calling
// Close more than once is harmless.
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
		w.wake <- false
	}
}

// Wait blocks until the pool has no worker goroutines left. After Close it
// returns once every worker has exited, which makes it suitable for graceful
// shutdown and goroutine-leak checks. Called on an open pool it returns when
// the worker count reaches zero, which, since the pool keeps up to KeepIdle
// idle workers, happens only before the first task; new workers may of
// course be started afterwards by Go. Goroutines started by Go or Submit
// after Close are not pool workers and are not waited for.
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
