//go:build linux

package uringp

import (
	"sync"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// bufPool is a loop's provided receive buffers: an mmap arena cut into
// buffers, and the buffer ring (group 0) through which the kernel takes
// them. A buffer a recv filled is linked into the connection's input
// without a copy; when the reader releases it, its release func queues the
// id on the loop's inbox, and the loop alone puts it back in the ring (the
// ring has a single producer).
type bufPool struct {
	l       *loop
	arena   *uring.Arena
	ring    *uring.BufRing
	release []func() // per buffer id, made once so a recv allocates nothing
}

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
	l := b.l
	l.mu.Lock()
	l.returned = append(l.returned, bid)
	l.mu.Unlock()
	if l.starving.Load() {
		l.wake()
	}
}

// replenish puts returned buffers back in the ring and re-arms the
// connections that ran dry. Loop only.
func (l *loop) replenish() {
	if l.bufs == nil {
		return
	}
	l.mu.Lock()
	l.giving, l.returned = l.returned, l.giving[:0]
	l.mu.Unlock()
	if len(l.giving) == 0 {
		return
	}
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
