package poll

import (
	"runtime"
	"time"
)

// Awake keeps a loop goroutine from holding its P for long while work never
// lets up. A loop under a load that always has more for it (a socket never
// empty, completions always ready) never waits in a call the scheduler
// sees: its reads and enters go through RawSyscall, and the runtime's
// preemption signal, which lands mostly inside those calls, where it
// cannot stop the goroutine, rarely takes. With one P, timers, signal
// handlers and every other goroutine of the program then wait as long as
// the load lasts. So a loop calls Turn once a turn, and Slept after each
// wait the scheduler saw; once it has been awake for maxAwake, Turn yields.
// A loop that sleeps between bursts never yields: it costs a clock read a
// turn, or, with Every set, every few turns.
type Awake struct {
	since time.Duration // when the loop woke, as time.Since(clock); 0: it just slept
	turns uint32
	// Every is how many turns pass between two looks at the clock; 0 or
	// 1: every turn. An event loop, whose turns are short and many, sets
	// it (AwakeEvery); a reader whose turn is a whole batch of work
	// leaves it, so that it yields in time however long its turns.
	Every uint32
}

// maxAwake is how long a loop runs without letting others have its P.
const maxAwake = 2 * time.Millisecond

// AwakeEvery is Awake.Every for an event loop: a turn is bounded by the
// completions or events one batch holds.
const AwakeEvery = 4

// Slept records that the loop has just waited where the scheduler saw it
// (parked in Go's poller, or in a system call that gave its P up).
func (a *Awake) Slept() { a.since = 0 }

// Turn ends a loop turn: it yields the P, and reports true, once the loop
// has been awake for maxAwake since it last slept or yielded.
func (a *Awake) Turn() bool {
	if a.turns++; a.Every > 1 && a.turns%a.Every != 0 {
		return false
	}
	now := time.Since(clock)
	if a.since == 0 {
		a.since = now
		return false
	}
	if now-a.since < maxAwake {
		return false
	}
	hook(HookLoopYielded, nil)
	runtime.Gosched()
	a.since = time.Since(clock)
	return true
}
