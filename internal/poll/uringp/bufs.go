//go:build linux

package uringp

import (
	"sync"
	"sync/atomic"

	"github.com/ringpoll/ringpoll/internal/buf"
	"github.com/ringpoll/ringpoll/internal/uring"
)

// bufPool is a loop's provided receive buffers: an mmap arena cut into
// buffers, and the buffer ring (group 0) through which the kernel takes
// them. A buffer a recv filled is linked into the connection's input
// without a copy; when the reader releases it, its owner (a bufRef)
// pushes the id on returned, and the loop alone puts it back in the ring
// (the ring has a single producer). A buffer whose connection was
// destroyed while a reader still held slices of it is retired instead:
// its id gets new memory before it goes back in the ring, and the old
// memory is never handed out again.
type bufPool struct {
	l        *loop
	arena    *uring.Arena
	ring     *uring.BufRing
	refs     []bufRef // per buffer id, so a recv allocates nothing
	returned idStack  // released by readers, not yet back in the ring
	retired  idStack  // retired, not yet given new memory
	// taken counts the buffers out of the ring as the loop sees it: taken
	// by the kernel (recv CQEs that carried one) and not yet put back by
	// replenish. Loop only. The stat BuffersOut differs: a buffer leaves
	// it when its reader releases it, whether or not the loop, which may
	// sleep, has put it back yet.
	taken int
	// down is set when the loop closed the pool; freed once its arena went
	// back for the next loop, which happens only when no reader holds any
	// of its buffers (freeArena).
	down, freed atomic.Bool
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

// pushAll pushes ids (not empty) with one compare-and-swap: they are
// linked first, then the chain is published.
func (s *idStack) pushAll(ids []uint16) {
	for i, id := range ids[:len(ids)-1] {
		s.next[id] = uint32(ids[i+1]) + 1
	}
	last := ids[len(ids)-1]
	for {
		top := s.top.Load()
		s.next[last] = top
		if s.top.CompareAndSwap(top, uint32(ids[0])+1) {
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

var _ buf.Owner = (*bufRef)(nil)

// empty reports whether, as far as the loop has seen, the ring has no
// buffer left for the kernel to take.
func (b *bufPool) empty() bool { return b.taken >= b.arena.Count() }

// took records that the kernel filled a buffer (a recv CQE carried it).
// Loop only.
func (b *bufPool) took() {
	b.taken++
	b.l.stats.BuffersOut.Add(1)
}

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
	b := &bufPool{l: l, arena: arena, ring: ring, refs: make([]bufRef, count)}
	b.returned.next = make([]uint32, count)
	b.retired.next = make([]uint32, count)
	for i := range count {
		b.refs[i] = bufRef{b, uint16(i)}
		ring.Add(arena.Buf(i), uint16(i), i)
	}
	ring.Advance(count)
	return b, nil
}

// bufRef is the owner (buf.Owner) of one provided buffer while a
// connection's input links it.
type bufRef struct {
	b   *bufPool
	bid uint16
}

// Release gives the buffer back to the ring. Safe for concurrent use.
func (r *bufRef) Release() { r.b.giveBack(r.bid) }

// Retire takes the buffer's memory out of use for good. Safe for
// concurrent use.
func (r *bufRef) Retire() {
	r.b.retired.push(r.bid)
	r.b.l.stats.BuffersRetired.Add(1)
	r.b.returnedOne()
}

// giveBack queues buffer bid for the ring. Safe for concurrent use, also
// after the pool closed.
func (b *bufPool) giveBack(bid uint16) {
	b.returned.push(bid)
	b.returnedOne()
}

// anyBack reports whether buffers wait to go back in the ring, released
// or retired.
func (b *bufPool) anyBack() bool { return !b.returned.empty() || !b.retired.empty() }

// returnedOne counts a buffer back from its reader. It wakes the loop only
// when a connection waits for buffers (never after the loop ended: it no
// longer sleeps then). The last buffer back to a closed pool sends its
// arena on to the next loop.
func (b *bufPool) returnedOne() {
	if b.l.stats.BuffersOut.Add(-1) == 0 && b.down.Load() {
		b.freeArena()
	}
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
	if !l.bufs.anyBack() {
		return
	}
	l.giving = l.bufs.returned.takeAll(l.giving[:0])
	if !l.bufs.retired.empty() {
		n := len(l.giving)
		l.giving = l.bufs.retired.takeAll(l.giving)
		for _, bid := range l.giving[n:] {
			l.bufs.arena.Replace(int(bid))
		}
	}
	for i, bid := range l.giving {
		l.bufs.ring.Add(l.bufs.arena.Buf(int(bid)), bid, i)
	}
	l.bufs.ring.Advance(len(l.giving))
	l.bufs.taken -= len(l.giving)
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

// close ends the pool with its loop. Its arena goes back for the next
// loop of the same shape once no reader holds a buffer of it: at once, or
// when the last one comes back. A reader can hold one past its
// connection's end and the engine's (a Reader from Slice), and the next
// loop hands every buffer to the kernel. Loop only, once.
func (b *bufPool) close() {
	b.ring.Close()
	// Either this load sees the last buffer back, or that buffer's
	// returnedOne sees down (sequentially consistent atomics); freed
	// makes sure only one of them sends the arena on.
	b.down.Store(true)
	if b.l.stats.BuffersOut.Load() == 0 {
		b.freeArena()
	}
}

// freeArena gives the arena, every buffer back from its readers, to the
// next loop: a buffer retired and not yet given new memory gets it first,
// since its reader may still see the old.
func (b *bufPool) freeArena() {
	if !b.freed.CompareAndSwap(false, true) {
		return
	}
	for _, bid := range b.retired.takeAll(nil) {
		b.arena.Replace(int(bid))
	}
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
