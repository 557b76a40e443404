//go:build linux

package uringp

import (
	"sync"
	"sync/atomic"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// bufPool is a loop's provided receive buffers: an mmap arena cut into
// buffers, and the buffer ring (group 0) through which the kernel takes
// them. A buffer a recv filled is linked into the connection's input
// without a copy; when the reader releases it, its release func pushes the
// id on returned, and the loop alone puts it back in the ring (the ring
// has a single producer).
type bufPool struct {
	l        *loop
	arena    *uring.Arena
	ring     *uring.BufRing
	release  []func() // per buffer id, made once so a recv allocates nothing
	returned idStack  // released by readers, not yet back in the ring
}

// idStack is a lock-free stack of buffer ids that any goroutine pushes on
// and the loop empties in one swap. Each id is on it at most once (a
// buffer is released once per recv that filled it). Push-only with a
// take-all consumer has no ABA problem: a push that links to an id the
// loop took and another reader pushed again links to that id's new place.
type idStack struct {
	top  atomic.Uint32 // id+1 of the top entry; 0: empty
	next []uint32      // next[id]: id+1 of the entry under id; written before the push's CAS publishes it
}

func (s *idStack) push(id uint16) {
	for {
		top := s.top.Load()
		s.next[id] = top
		if s.top.CompareAndSwap(top, uint32(id)+1) {
			return
		}
	}
}

// takeAll appends every id on the stack to dst and empties it.
func (s *idStack) takeAll(dst []uint16) []uint16 {
	for e := s.top.Swap(0); e != 0; e = s.next[e-1] {
		dst = append(dst, uint16(e-1))
	}
	return dst
}

func (s *idStack) empty() bool { return s.top.Load() == 0 }

// empty reports whether, as far as the loop has seen, the ring has no
// buffer left for the kernel to take: the loop's BuffersOut counter (recv
// CQEs that carried a buffer, less the buffers replenish put back) is
// written by the loop alone.
func (b *bufPool) empty() bool { return b.l.stats.BuffersOut.Load() >= int64(b.arena.Count()) }

func newBufPool(l *loop, count, size int) (*bufPool, error) {
	arena, err := getArena(count, size)
	if err != nil {
		return nil, err
	}
	ring, err := uring.NewBufRing(l.ring, count, 0)
	if err != nil {
		putArena(arena)
		return nil, err
	}
	b := &bufPool{l: l, arena: arena, ring: ring, release: make([]func(), count)}
	b.returned.next = make([]uint32, count)
	for i := range count {
		bid := uint16(i)
		b.release[i] = func() { b.giveBack(bid) }
		ring.Add(arena.Buf(i), bid, i)
	}
	ring.Advance(count)
	return b, nil
}

// giveBack queues buffer bid for the ring. Safe for concurrent use. It
// wakes the loop only when a connection waits for buffers.
func (b *bufPool) giveBack(bid uint16) {
	b.returned.push(bid)
	if b.l.starving.Load() {
		b.l.wake()
	}
}

// replenish puts returned buffers back in the ring and re-arms the
// connections that ran dry. Loop only.
func (l *loop) replenish() {
	if l.bufs == nil {
		return
	}
	if l.bufs.returned.empty() {
		return
	}
	l.giving = l.bufs.returned.takeAll(l.giving[:0])
	for i, bid := range l.giving {
		l.bufs.ring.Add(l.bufs.arena.Buf(int(bid)), bid, i)
	}
	l.bufs.ring.Advance(len(l.giving))
	l.stats.BuffersOut.Add(-int64(len(l.giving)))
	l.giving = l.giving[:0]
	if len(l.starved) == 0 {
		return
	}
	starved := l.starved
	l.starved = nil
	l.starving.Store(false)
	for _, c := range starved {
		c.starved = false
		if !c.recvArmed && c.wantsInput() && !l.isTearing(c) {
			l.stats.Rearms.Add(1)
			l.armRecv(c)
		}
	}
}

func (b *bufPool) close() {
	b.ring.Close()
	putArena(b.arena)
}

// Arenas are never unmapped: a reader that kept a slice past Release or
// Close must read stale bytes, not fault. A stopped loop's arena waits here
// for the next loop of the same shape.
var arenas struct {
	sync.Mutex
	free []*uring.Arena
}

func getArena(count, size int) (*uring.Arena, error) {
	arenas.Lock()
	defer arenas.Unlock()
	for i, a := range arenas.free {
		if a.Count() == count && a.Size() == size {
			arenas.free = append(arenas.free[:i], arenas.free[i+1:]...)
			return a, nil
		}
	}
	return uring.NewArena(count, size)
}

func putArena(a *uring.Arena) {
	arenas.Lock()
	arenas.free = append(arenas.free, a)
	arenas.Unlock()
}
