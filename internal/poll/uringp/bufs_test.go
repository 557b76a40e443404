//go:build linux

package uringp

import (
	"slices"
	"sync"
	"testing"
)

// TestIDStack pushes every id from several goroutines while the consumer
// takes batches, and checks that each id comes out exactly once.
func TestIDStack(t *testing.T) {
	const ids, pushers = 4096, 4
	var s idStack
	s.next = make([]uint32, ids)
	if !s.empty() || len(s.takeAll(nil)) != 0 {
		t.Fatal("a new stack is not empty")
	}
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for id := p; id < ids; id += pushers {
				s.push(uint16(id))
			}
		})
	}
	var got []uint16
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		got = s.takeAll(got)
	}
	if !s.empty() {
		t.Fatal("stack not empty after the last takeAll")
	}
	slices.Sort(got)
	if len(got) != ids {
		t.Fatalf("took %d ids, want %d", len(got), ids)
	}
	for i, id := range got {
		if int(id) != i {
			t.Fatalf("ids[%d] = %d: an id was lost or taken twice", i, id)
		}
	}

	// Order is last in, first out, and an id taken can be pushed again.
	s.push(7)
	s.push(9)
	if got := s.takeAll(nil); !slices.Equal(got, []uint16{9, 7}) {
		t.Fatalf("takeAll = %v, want [9 7]", got)
	}
	s.push(9)
	if got := s.takeAll(nil); !slices.Equal(got, []uint16{9}) {
		t.Fatalf("after re-push, takeAll = %v, want [9]", got)
	}
}
