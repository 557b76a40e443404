//go:build linux

package uring

import (
	"errors"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestKeepPWaitLetsTheWorldStop checks what EnterRaw promises: a thread
// asleep in io_uring_enter that kept its P (RawSyscall6, invisible to the
// scheduler) still lets a garbage collection stop the world, because the
// runtime's preemption signal ends the wait with EINTR rather than
// restarting it. Were the wait restarted, each runtime.GC below would hang
// until the wait's timeout, which the waiter would count.
//
// A collection ends a wait with EINTR only if it finds the waiter inside
// the syscall (not between two waits), so the test goes on collecting
// until one wait has ended that way, for up to gcBound: a waiter that never
// sees the signal fails it, a slow machine only takes more collections.
func TestKeepPWaitLetsTheWorldStop(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // a P for us beside the waiter's
	// No SINGLE_ISSUER: the test goroutine submits the wake-up.
	r, err := NewRing(8, &Params{})
	if err != nil {
		if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EPERM) {
			t.Skipf("io_uring unavailable: %v", err)
		}
		t.Fatal(err)
	}
	defer r.Close()
	if r.Params.Features&FeatExtArg == 0 {
		t.Skip("kernel lacks EXT_ARG (5.11): no timed wait")
	}

	const timeout = 30 * time.Second
	var waits, eintr, etime atomic.Int32
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for r.CQReady() == 0 {
			waits.Add(1)
			arg, size := r.TimeoutArg(timeout)
			_, err := r.EnterRaw(0, 1, EnterGetEvents|EnterExtArg, arg, size)
			switch {
			case errors.Is(err, syscall.EINTR):
				eintr.Add(1)
			case errors.Is(err, syscall.ETIME):
				etime.Add(1)
			case err != nil:
				done <- err
				return
			}
		}
		done <- nil
	}()

	for waits.Load() == 0 {
		runtime.Gosched()
	}
	// At least 20 collections, and more until one found the waiter in
	// its syscall.
	const minGCs, gcBound = 20, 20 * time.Second
	gcs := 0
	for deadline := time.Now().Add(gcBound); (gcs < minGCs || eintr.Load() == 0) && etime.Load() == 0 && time.Now().Before(deadline); gcs++ {
		runtime.GC()
	}
	// Wake the waiter with a NOP completion.
	sqe := r.GetSQE()
	sqe.Opcode = OpNop
	sqe.UserData = 1
	if _, err := r.Enter(r.Flush(), 0, 0, nil, 0); err != nil {
		t.Fatalf("submit NOP: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if n := etime.Load(); n != 0 {
		t.Fatalf("%d waits ran into their %v timeout: a stop-the-world waited for them", n, timeout)
	}
	if eintr.Load() == 0 {
		t.Fatalf("no wait ended with EINTR in %d waits and %d garbage collections over %v: the preemption signal did not reach the waiter",
			waits.Load(), gcs, gcBound)
	}
	t.Logf("%d waits, %d ended by a signal, %d garbage collections", waits.Load(), eintr.Load(), gcs)
}
