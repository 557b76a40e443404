package poll

import (
	"sync"
	"testing"
	"time"
)

func TestTokenSignalBeforeWaitIsDropped(t *testing.T) {
	var tk token
	tk.signal() // nobody waits: nothing to leave a token in
	if tk.c.Load() != nil {
		t.Fatal("signal made a channel")
	}
	select {
	case <-tk.wait():
		t.Fatal("a signal sent before the channel existed was kept")
	default:
	}
}

func TestTokenHoldsOneSignal(t *testing.T) {
	var tk token
	c := tk.wait()
	if c2 := tk.wait(); c2 != c {
		t.Fatal("wait made a second channel")
	}
	tk.signal()
	tk.signal()
	got := 0
	for {
		select {
		case <-c:
			got++
			continue
		default:
		}
		break
	}
	if got != 1 {
		t.Fatalf("two signals left %d tokens, want 1", got)
	}
}

// TestTokenWakesBlockedWaiter follows the protocol the FD uses: the waiter
// gets the channel, checks the condition, then blocks; the signaller sets
// the condition, then signals. No wake-up may be lost, whatever the
// interleaving.
func TestTokenWakesBlockedWaiter(t *testing.T) {
	for i := 0; i < 2000; i++ {
		var (
			tk  token
			mu  sync.Mutex
			set bool
		)
		done := make(chan struct{})
		go func() {
			defer close(done)
			var wake <-chan struct{}
			for {
				mu.Lock()
				ok := set
				mu.Unlock()
				if ok {
					return
				}
				if wake == nil {
					wake = tk.wait()
					continue
				}
				<-wake
			}
		}()
		mu.Lock()
		set = true
		mu.Unlock()
		tk.signal()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: waiter never woke", i)
		}
	}
}

func TestEventFire(t *testing.T) {
	var e event
	if e.c.Load() == &firedChan {
		t.Fatal("fired before fire")
	}
	before := e.done()
	if isClosedChan(before) {
		t.Fatal("done closed before fire")
	}
	if !e.fire() {
		t.Fatal("first fire reported false")
	}
	if e.fire() {
		t.Fatal("second fire reported true")
	}
	if !(e.c.Load() == &firedChan) || !isClosedChan(before) || !isClosedChan(e.done()) {
		t.Fatal("fire did not close the channels of waiters before and after it")
	}
}

func TestEventFireWithoutWaiters(t *testing.T) {
	var e event
	if !e.fire() {
		t.Fatal("fire reported false")
	}
	if !(e.c.Load() == &firedChan) || !isClosedChan(e.done()) {
		t.Fatal("an event fired with nobody waiting is not done")
	}
}

// TestEventConcurrent races waiters against the one firing; under -race
// this also checks the channel is published safely.
func TestEventConcurrent(t *testing.T) {
	for i := 0; i < 500; i++ {
		var e event
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-e.done()
			}()
		}
		fired := make(chan bool, 2)
		for f := 0; f < 2; f++ {
			go func() { fired <- e.fire() }()
		}
		if a, b := <-fired, <-fired; a == b {
			t.Fatalf("round %d: two fires reported %v and %v, want exactly one true", i, a, b)
		}
		wg.Wait()
	}
}
