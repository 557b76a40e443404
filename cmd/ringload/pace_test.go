//go:build linux

package main

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestPacedSlot walks a slot through its states with the pacer's turns
// made by hand: a ready request goes at its turn; a turn that finds the
// request in flight or not prepared makes it due, and it goes as soon as
// it is ready; a reply to another request ends nothing; a request in
// flight past lostAfter is given up and the next one sent at its turn; a
// failed send leaves the request ready for the next turn.
func TestPacedSlot(t *testing.T) {
	p := &pacer{base: time.Now()}
	var sent []uint64
	var fail error
	s := &pacedSlot{}
	s.send = func() error {
		if fail != nil {
			return fail
		}
		sent = append(sent, s.seq)
		return nil
	}
	lost := 0
	s.lost = func() { lost++ }

	p.visit(s) // not prepared yet
	if len(sent) != 0 || !s.due {
		t.Fatalf("a turn before the request is ready: sent %v, due %v", sent, s.due)
	}
	s.ready(p) // due: goes at once
	if !slices.Equal(sent, []uint64{1}) || s.state != slotInFlight || s.due {
		t.Fatalf("ready while due: sent %v, state %d, due %v", sent, s.state, s.due)
	}
	p.visit(s) // in flight: due again
	if _, ok := s.answered(p, 7, false); ok {
		t.Fatal("a reply to request 7 ended request 1")
	}
	if _, ok := s.answered(p, 1, false); !ok || len(sent) != 1 || s.state != slotWaiting {
		t.Fatalf("answering 1 without next: ok %v, sent %v, state %d", ok, sent, s.state)
	}
	if _, ok := s.answered(p, 1, false); ok {
		t.Fatal("request 1 answered twice")
	}
	s.ready(p) // its turn came while it was in flight
	if !slices.Equal(sent, []uint64{1, 2}) {
		t.Fatalf("ready after a missed turn: sent %v", sent)
	}
	took, ok := s.answered(p, 2, true) // next prepared by send; no turn missed
	if !ok || took < 0 || s.state != slotReady || len(sent) != 2 {
		t.Fatalf("answering 2 with next: ok %v, took %v, state %d, sent %v", ok, took, s.state, sent)
	}
	p.visit(s)
	p.visit(s) // in flight, not lost: lostAfter is 0
	if !slices.Equal(sent, []uint64{1, 2, 3}) || lost != 0 || !s.due {
		t.Fatalf("turns: sent %v, lost %d, due %v", sent, lost, s.due)
	}

	s.lostAfter = time.Second
	p.visit(s) // in flight for less than lostAfter
	if len(sent) != 3 || lost != 0 {
		t.Fatalf("a turn within lostAfter: sent %v, lost %d", sent, lost)
	}
	s.sent -= 2 * time.Second // as if sent two seconds ago
	p.visit(s)
	if !slices.Equal(sent, []uint64{1, 2, 3, 4}) || lost != 1 || s.due {
		t.Fatalf("a turn past lostAfter: sent %v, lost %d, due %v", sent, lost, s.due)
	}
	if _, ok := s.answered(p, 3, true); ok {
		t.Fatal("the reply to a request given up ended the next one")
	}

	fail = errors.New("refused")
	s.sent -= 2 * time.Second
	p.visit(s) // lost again; the new request's send fails
	if s.state != slotReady || s.sendErr() != fail || lost != 2 {
		t.Fatalf("a failed send: state %d, err %v, lost %d", s.state, s.sendErr(), lost)
	}
	fail = nil
	p.visit(s)
	if sent[len(sent)-1] != s.seq || s.state != slotInFlight {
		t.Fatalf("the turn after a failed send: sent %v (seq %d), state %d", sent, s.seq, s.state)
	}
}

// TestPacerNeverAhead: a pacer's k-th send (counting from 0) goes no
// sooner than its k-th turn, k steps after the start, whatever the
// machine's pace; its slots take their turns in order; and GOMAXPROCS,
// raised while it runs, is what it was after.
func TestPacerNeverAhead(t *testing.T) {
	procs := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(procs)
	const n, rate = 3, 20000
	var mu sync.Mutex
	var stamps []time.Duration
	var order []int
	const want = 200 // sends to look at
	enough := make(chan struct{})
	slots := make([]*pacedSlot, n)
	for i := range slots {
		s := &pacedSlot{state: slotReady}
		s.send = func() error {
			mu.Lock()
			stamps = append(stamps, s.sent) // fire's stamp, just taken
			order = append(order, i)
			if len(stamps) == want {
				close(enough)
			}
			mu.Unlock()
			s.state = slotReady // answered at once: every turn sends
			return nil
		}
		slots[i] = s
	}
	p := startPacer(slots, rate)
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("GOMAXPROCS while pacing: %d, want 2", got)
	}
	select {
	case <-enough:
	case <-time.After(10 * time.Second):
		t.Error("fewer than 200 sends in 10 s at 20,000 a second")
	}
	p.end()
	p.end() // a second end does nothing
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS after: %d, want 1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	step := p.step
	turn := 0 // the turn each send took, at least its index; more after skips
	for k, at := range stamps {
		turn = max(turn, k)
		for order[k] != turn%n {
			turn++ // turns skipped (the pacer fell behind by over maxPaceLag)
		}
		if at < time.Duration(turn)*step {
			t.Fatalf("send %d (slot %d) at %v, before its turn %d at %v", k, order[k], at, turn, time.Duration(turn)*step)
		}
		turn++
	}
}
