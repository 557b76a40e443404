//go:build linux

package uringp

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestIDStack pushes every id from several goroutines, one at a time or
// in chains, while the consumer takes batches, and checks that each id
// comes out exactly once.
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
			var chain []uint16
			for id := p; id < ids; id += pushers {
				if p%2 == 0 {
					s.push(uint16(id))
					continue
				}
				if chain = append(chain, uint16(id)); len(chain) == 3 {
					s.pushAll(chain)
					chain = chain[:0]
				}
			}
			if len(chain) > 0 {
				s.pushAll(chain)
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
	// A chain keeps its order and sits on top of what was there.
	s.push(4)
	s.pushAll([]uint16{1, 2, 3})
	s.push(5)
	if got := s.takeAll(nil); !slices.Equal(got, []uint16{5, 1, 2, 3, 4}) {
		t.Fatalf("takeAll after pushAll = %v, want [5 1 2 3 4]", got)
	}
}

// TestTuningIncremental: the default ring is 256 buffers of 64 KiB consumed
// incrementally where the kernel can, else 4096 of 4 KiB taken whole; an
// explicit ring is consumed incrementally from IncMinSize up, where the
// kernel can.
func TestTuningIncremental(t *testing.T) {
	inc := incWorks()
	t.Logf("the kernel consumes provided buffers incrementally: %v", inc)
	def := Tuning{}.withDefaults()
	wantN, wantSize := 4096, 4096
	if inc {
		wantN, wantSize = 256, 64<<10
	}
	if def.Buffers != wantN || def.BufferSize != wantSize || def.inc != inc {
		t.Errorf("default ring: %d x %d incremental %v, want %d x %d incremental %v",
			def.Buffers, def.BufferSize, def.inc, wantN, wantSize, inc)
	}
	for _, tc := range []struct {
		n, size int
		inc     bool
	}{
		{4, 512, false},
		{4096, 4096, false},
		{8, IncMinSize - 1, false},
		{8, IncMinSize, inc},
		{1024, 1 << 20, inc},
	} {
		got := Tuning{Buffers: tc.n, BufferSize: tc.size}.withDefaults()
		if got.Buffers != tc.n || got.BufferSize != tc.size || got.inc != tc.inc {
			t.Errorf("%d x %d: got %d x %d incremental %v, want incremental %v", tc.n, tc.size, got.Buffers, got.BufferSize, got.inc, tc.inc)
		}
	}
}

// TestBufPoolArenaWaitsForReaders: a closed pool's arena goes to the next
// loop only once no reader holds one of its buffers (a Reader from Slice
// can outlive its connection and its engine), and a buffer retired before
// then gets new memory first.
func TestBufPoolArenaWaitsForReaders(t *testing.T) {
	if err := Check(); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	const count, size = 8, 3 * 4096 // a shape no other test uses
	var b *bufPool
	err := onLockedThread(func() error {
		r, err := newLoopRing(8, 16)
		if err != nil {
			return err
		}
		defer r.Close()
		if b, err = newBufPool(&loop{ring: r}, count, size, false); err != nil {
			return err
		}
		for range 3 { // the kernel filled buffers 0, 1 and 2
			b.took()
		}
		b.refs[0].Release()
		b.refs[1].Retire() // its reader may see it for ever
		b.close()          // buffer 2 is still held
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	held, retired := b.arena.Buf(2), b.arena.Buf(1)
	inPool := func() bool {
		arenas.Lock()
		defer arenas.Unlock()
		return slices.Contains(arenas.free, b.arena)
	}
	if b.freed.Load() || inPool() {
		t.Fatal("the arena went to the next loop while a reader held a buffer")
	}
	b.refs[2].Release()
	if !b.freed.Load() || !inPool() {
		t.Fatal("the arena did not go to the next loop when its last buffer came back")
	}
	if &b.arena.Buf(1)[0] == &retired[0] {
		t.Fatal("the retired buffer kept its memory for the next loop")
	}
	if &b.arena.Buf(2)[0] != &held[0] {
		t.Fatal("a released buffer was given new memory")
	}
	a, err := getArena(count, size)
	if err != nil || a != b.arena {
		t.Fatalf("getArena: %v, the pool's arena %v", err, a == b.arena)
	}
	putArena(a)
}

// TestBufPoolArenaWaitsForIncrementalPieces: with incremental consumption,
// a buffer the kernel had filled only part of when the loop closed, whose
// piece a reader still holds, keeps the arena from the next loop until
// that piece is released.
func TestBufPoolArenaWaitsForIncrementalPieces(t *testing.T) {
	if err := Check(); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	if !incWorks() {
		t.Skip("the kernel does not consume provided buffers incrementally")
	}
	const count, size = 4, 5 * 4096 // a shape no other test uses
	var b *bufPool
	var piece []byte
	err := onLockedThread(func() error {
		r, err := newLoopRing(8, 16)
		if err != nil {
			return err
		}
		defer r.Close()
		if b, err = newBufPool(&loop{ring: r}, count, size, true); err != nil {
			return err
		}
		piece = b.fill(0, 100, true, true) // part of buffer 0, held
		b.fill(0, 50, true, false)         // more of it, for a closed connection
		b.close()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(piece) != 100 || &piece[0] != &b.arena.Buf(0)[0] {
		t.Fatalf("the piece is %d bytes at another place than buffer 0's start", len(piece))
	}
	if b.freed.Load() {
		t.Fatal("the arena went to the next loop while a reader held a piece of a buffer")
	}
	b.refs[0].Release()
	if !b.freed.Load() {
		t.Fatalf("the arena did not go to the next loop when the last piece came back (%d out)", b.l.stats.BuffersOut.Load())
	}
	a, err := getArena(count, size)
	if err != nil || a != b.arena {
		t.Fatalf("getArena: %v, the pool's arena %v", err, a == b.arena)
	}
	putArena(a)
}

// TestBufPoolKeepsRingWarm: the ring holds only the buffers a few turns
// take (target, from about a megabyte), the rest wait on spare; the last
// buffers back from their readers go in first; target grows when a turn
// takes more than half of it or the ring runs dry, and falls back to its
// floor after a window of quiet turns.
func TestBufPoolKeepsRingWarm(t *testing.T) {
	if err := Check(); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
	const count, size = 64, 64 << 10
	// Failures return an error: t.Fatal must not run off the test's
	// goroutine.
	err := onLockedThread(func() error {
		r, err := newLoopRing(8, 16)
		if err != nil {
			return err
		}
		defer r.Close()
		l := &loop{ring: r}
		b, err := newBufPool(l, count, size, false)
		if err != nil {
			return err
		}
		l.bufs = b
		defer b.close()
		if b.target != 16 || b.inRingN != 16 || len(b.spare) != count-16 {
			return fmt.Errorf("a new pool: target %d, %d in the ring, %d spare; want 16, 16, %d", b.target, b.inRingN, len(b.spare), count-16)
		}
		// The ring's head is buffer 0: the kernel takes 0-3 in order.
		for bid := range uint16(4) {
			b.fill(bid, 100, false, true)
		}
		b.refs[3].Release()
		b.refs[1].Release()
		l.replenish()
		if b.target != 16 || b.inRingN != 16 {
			return fmt.Errorf("after a turn that took 4: target %d, %d in the ring; want 16, 16", b.target, b.inRingN)
		}
		// Back in: 1 and 3, then the two longest unused (16 and 17).
		for _, bid := range []uint16{1, 3, 16, 17} {
			if slices.Contains(b.spare, bid) {
				return fmt.Errorf("buffer %d is on spare, want it in the ring; spare top %v", bid, b.spare[len(b.spare)-4:])
			}
		}
		if len(b.spare) != count-18 {
			return fmt.Errorf("%d spare, want %d", len(b.spare), count-18)
		}
		// A turn that takes 12 (more than half of 16) raises target to 24.
		for range 12 {
			b.took()
		}
		l.replenish()
		if b.target != 24 || b.inRingN != 24 {
			return fmt.Errorf("after a turn that took 12: target %d, %d in the ring; want 24, 24 (topped up from spare)", b.target, b.inRingN)
		}
		// The ring runs dry with buffers on spare: target doubles and the
		// ring is filled at once, as far as spare goes.
		for range 24 {
			b.took()
		}
		spare := len(b.spare)
		if !b.ranDry() || b.target != 48 || b.inRingN != min(48, spare) {
			return fmt.Errorf("ran dry: target %d, %d in the ring, %d spare; want 48 and the ring refilled", b.target, b.inRingN, len(b.spare))
		}
		// Two windows with nothing taken: back to the floor.
		for range 2 * windowTurns {
			l.replenish()
		}
		if b.target != 16 {
			return fmt.Errorf("after two quiet windows: target %d, want 16", b.target)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
