package gopool

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testTimeout bounds every blocking wait in these tests so that a bug shows
// up as a failure instead of a hung test binary.
const testTimeout = 20 * time.Second

// waitDone fails the test if ch is not closed (or sent on) within testTimeout.
func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// waitPool runs p.Wait with a timeout.
func waitPool(t *testing.T, p *Pool) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		p.Wait()
		close(done)
	}()
	waitDone(t, done, "Pool.Wait")
}

// shutdown closes p and waits for its workers, checking none are left.
func shutdown(t *testing.T, p *Pool) {
	t.Helper()
	p.Close()
	waitPool(t, p)
	if n := p.Workers(); n != 0 {
		t.Fatalf("Workers() after Close+Wait = %d, want 0", n)
	}
}

func TestNewIdle(t *testing.T) {
	tests := []struct {
		in, want time.Duration
	}{
		{0, time.Second},
		{-time.Millisecond, time.Second},
		{20 * time.Millisecond, 20 * time.Millisecond},
		{time.Minute, time.Minute},
	}
	for _, tt := range tests {
		p := New(tt.in)
		if p.idle != tt.want {
			t.Errorf("New(%v).idle = %v, want %v", tt.in, p.idle, tt.want)
		}
		shutdown(t, p)
	}
}

func TestAllTasksRun(t *testing.T) {
	tests := []struct {
		name       string
		submitters int
		perSubmit  int
	}{
		{"one", 1, 1},
		{"sequential", 1, 1000},
		{"concurrent", 8, 250},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Long idle: the Workers() check below must not race a
			// worker's idle exit, however long the test stalls.
			p := New(time.Hour)
			var ran atomic.Int64
			var tasks sync.WaitGroup
			tasks.Add(tt.submitters * tt.perSubmit)
			var submit sync.WaitGroup
			for range tt.submitters {
				submit.Add(1)
				go func() {
					defer submit.Done()
					for range tt.perSubmit {
						p.Go(func() {
							ran.Add(1)
							tasks.Done()
						})
					}
				}()
			}
			submit.Wait()
			done := make(chan struct{})
			go func() { tasks.Wait(); close(done) }()
			waitDone(t, done, "all tasks")
			if got, want := ran.Load(), int64(tt.submitters*tt.perSubmit); got != want {
				t.Fatalf("ran %d tasks, want %d", got, want)
			}
			if n := p.Workers(); n < 1 || n > tt.submitters*tt.perSubmit {
				t.Fatalf("Workers() = %d, want between 1 and %d", n, tt.submitters*tt.perSubmit)
			}
			shutdown(t, p)
		})
	}
}

// TestWorkerReused runs tasks one after the other, each submitted only when
// the single worker is parked waiting for work, and checks that the same
// worker runs all of them.
func TestWorkerReused(t *testing.T) {
	p := New(time.Hour) // long idle: the worker must not time out mid-test
	const n = 50
	parked := func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.parked) == 1
	}
	for i := range n {
		if i > 0 {
			waitFor(t, parked, "the worker to park")
		}
		done := make(chan struct{})
		p.Go(func() { close(done) })
		waitDone(t, done, "task")
		if w := p.Workers(); w != 1 {
			t.Fatalf("after task %d: Workers() = %d, want 1", i, w)
		}
	}
	shutdown(t, p)
}

// TestQueuedTasksPassABlockedOne: tasks queued behind one that blocks still
// run, and one worker runs a queue of tasks that do not block.
func TestQueuedTasksPassABlockedOne(t *testing.T) {
	p := New(time.Hour)
	release := make(chan struct{})
	blocked := make(chan struct{})
	p.Go(func() {
		close(blocked)
		<-release
	})
	waitDone(t, blocked, "the blocking task")
	const n = 100
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		p.Go(wg.Done)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitDone(t, done, "the tasks queued behind a blocked one")
	close(release)
	shutdown(t, p)
}

func TestBlockingTasksStartWorkers(t *testing.T) {
	for _, n := range []int{1, 2, 8, 64} {
		p := New(time.Minute)
		release := make(chan struct{})
		var started sync.WaitGroup
		started.Add(n)
		for range n {
			p.Go(func() {
				started.Done()
				<-release
			})
		}
		allStarted := make(chan struct{})
		go func() { started.Wait(); close(allStarted) }()
		waitDone(t, allStarted, "blocking tasks to start")
		// n tasks are blocked at once, so there are at least n workers, and
		// n calls to Go can have started at most n.
		if w := p.Workers(); w != n {
			t.Fatalf("n=%d: Workers() = %d, want %d", n, w, n)
		}
		close(release)
		shutdown(t, p)
	}
}

// TestIdleWorkerExits checks that workers beyond KeepIdle exit by
// themselves after the idle timeout, without Close, that the KeepIdle most
// recently parked stay, and that the sweep's timer is armed only while
// more than KeepIdle are parked.
func TestIdleWorkerExits(t *testing.T) {
	p := New(20 * time.Millisecond)
	const n = KeepIdle + 3
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(n)
	finished.Add(n)
	for range n {
		p.Go(func() {
			started.Done()
			<-release
			finished.Done()
		})
	}
	started.Wait() // n tasks blocked at once: n workers
	if w := p.Workers(); w != n {
		t.Fatalf("Workers() = %d, want %d", w, n)
	}
	close(release)
	finished.Wait()
	waitFor(t, func() bool { return p.Workers() == KeepIdle }, "idle workers beyond KeepIdle to exit")
	p.mu.Lock()
	parked, sweeping := len(p.parked), p.sweeping
	p.mu.Unlock()
	if parked != KeepIdle || sweeping {
		t.Fatalf("after the sweeps: %d parked, sweeping %v; want %d, false", parked, sweeping, KeepIdle)
	}
	// The kept workers take new tasks.
	done := make(chan struct{})
	p.Go(func() { close(done) })
	waitDone(t, done, "task after the sweeps")
	shutdown(t, p)
}

// TestNoSweepTimerForFewIdle checks that a pool whose workers never
// outnumber KeepIdle arms no timer: one worker running tasks one after
// another parks with the sweep off.
func TestNoSweepTimerForFewIdle(t *testing.T) {
	p := New(time.Millisecond)
	for i := range 100 {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		waitDone(t, done, fmt.Sprint("task ", i))
		waitFor(t, func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.parked) == p.n // every worker idle
		}, "the worker to park")
		p.mu.Lock()
		sweeping, n := p.sweeping, p.n
		p.mu.Unlock()
		if sweeping || n > KeepIdle {
			t.Fatalf("after task %d: sweeping %v with %d workers, want no sweep and at most %d", i, sweeping, n, KeepIdle)
		}
	}
	shutdown(t, p)
}

// TestCloseWait checks that Close makes idle workers exit promptly (the idle
// timeout is far longer than the test timeout), that busy workers exit when
// their task returns, that Close does not wait for them, and that no
// goroutine is left behind.
func TestCloseWait(t *testing.T) {
	baseline := runtime.NumGoroutine()

	p := New(time.Hour)
	const busy, idle = 4, 4
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(busy + idle)
	var finished sync.WaitGroup
	finished.Add(idle)
	for range idle {
		p.Go(func() {
			started.Done()
			<-release
			finished.Done() // these become idle workers once released
		})
	}
	blockBusy := make(chan struct{})
	for range busy {
		p.Go(func() {
			started.Done()
			<-blockBusy
		})
	}
	started.Wait()
	close(release)
	finished.Wait()
	if w := p.Workers(); w != busy+idle {
		t.Fatalf("Workers() = %d, want %d", w, busy+idle)
	}

	p.Close() // must not wait for the busy workers
	p.Close() // idempotent

	// Idle workers leave promptly; busy ones stay until released.
	waitFor(t, func() bool { return p.Workers() == busy }, "idle workers to exit")
	close(blockBusy)
	waitPool(t, p)
	if w := p.Workers(); w != 0 {
		t.Fatalf("Workers() after Close+Wait = %d, want 0", w)
	}
	// Wait returns once the last worker has said it is leaving; its
	// goroutine may need a moment to finish returning.
	waitFor(t, func() bool { return runtime.NumGoroutine() <= baseline },
		"goroutine count to return to baseline")
}

// waitFor polls cond, yielding the processor between polls, until it holds
// or testTimeout passes. It is for conditions no channel can signal.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

func TestGoAfterClose(t *testing.T) {
	p := New(time.Minute)
	p.Close()
	waitPool(t, p)

	release := make(chan struct{})
	started := make(chan struct{})
	p.Go(func() {
		close(started)
		<-release
	})
	waitDone(t, started, "task submitted after Close")
	if w := p.Workers(); w != 0 {
		t.Fatalf("Workers() with a late task running = %d, want 0", w)
	}
	// The late task runs on a plain goroutine: Wait does not wait for it.
	waitPool(t, p)
	close(release)
}

func TestWaitWithoutWorkers(t *testing.T) {
	p := New(time.Second)
	waitPool(t, p) // never had a worker: returns at once
	shutdown(t, p)
}

// TestConcurrentClose races Go against Close: every task must still run.
func TestConcurrentClose(t *testing.T) {
	for range 20 {
		p := New(time.Minute)
		const n = 200
		var tasks sync.WaitGroup
		tasks.Add(n)
		start := make(chan struct{})
		var submit sync.WaitGroup
		submit.Add(2)
		go func() {
			defer submit.Done()
			<-start
			for range n {
				p.Go(tasks.Done)
			}
		}()
		go func() {
			defer submit.Done()
			<-start
			p.Close()
		}()
		close(start)
		submit.Wait()
		done := make(chan struct{})
		go func() { tasks.Wait(); close(done) }()
		waitDone(t, done, "all tasks")
		waitPool(t, p)
		if w := p.Workers(); w != 0 {
			t.Fatalf("Workers() = %d, want 0", w)
		}
	}
}

// BenchmarkGo compares Pool.Go with a plain go statement, both with a burst
// of tasks in flight ("burst") and with one task at a time, each waited for
// before the next ("serial", where the pool's idle worker is reused).
func BenchmarkGo(b *testing.B) {
	runners := []struct {
		name string
		run  func(p *Pool, f func())
	}{
		{"pool", func(p *Pool, f func()) { p.Go(f) }},
		{"go", func(_ *Pool, f func()) { go f() }},
	}
	for _, r := range runners {
		b.Run(r.name+"/burst", func(b *testing.B) {
			p := New(time.Second)
			defer func() { p.Close(); p.Wait() }()
			var wg sync.WaitGroup
			task := wg.Done
			b.ReportAllocs()
			for b.Loop() {
				wg.Add(1)
				r.run(p, task)
			}
			wg.Wait()
		})
		b.Run(r.name+"/serial", func(b *testing.B) {
			p := New(time.Second)
			defer func() { p.Close(); p.Wait() }()
			done := make(chan struct{})
			task := func() { done <- struct{}{} }
			b.ReportAllocs()
			for b.Loop() {
				r.run(p, task)
				<-done
			}
		})
	}
}
