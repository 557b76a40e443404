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
// without a copy; when the reader releases it, its owner (a bufRef)
// pushes the id on returned, and the loop alone puts it back in the ring
// (the ring has a single producer). A buffer whose connection was
// destroyed while a reader still held slices of it is retired instead:
// its id gets new memory before it goes back in the ring, and the old
// memory is never handed out again.
//
// With incremental consumption (inc, uring.PbufRingInc) the buffers are
// large and each recv takes only the bytes it filled from the buffer at
// the ring's head, after those of the recv before: one buffer holds the
// input of many recvs, of any connections of the loop, and a message
// lands whole in it more often than not. Such a buffer goes back in the
// ring once the kernel has moved past it (a completion without
// CQEFBufMore) and every input that links a piece of it has let go: its
// bufRef counts both (refs). If any of those inputs retired its piece,
// the whole buffer is retired when the count reaches zero.
//
// The ring holds only as many buffers as the kernel takes in a few loop
// turns (target); the rest wait on spare, last back on top. The kernel
// takes a ring's buffers in order, so a ring with every buffer in it
// would write each receive into the buffer that was used longest ago
// (16 MiB back with the default ring), long gone from the CPU's caches,
// and the reader, and any copy out of it, would find it cold too. With
// few buffers in the ring and the hottest put back first, the same
// megabyte or two is used over and over (issue 14: 10% less CPU per
// request for pipelined 1 KiB RPC at 100 connections). target grows at
// once when a turn takes more than half of it, or when the ring runs
// dry while buffers wait on spare, and falls back, not below minTarget,
// to twice the most a turn took over a window of turns.
type bufPool struct {
	l        *loop
	arena    *uring.Arena
	ring     *uring.BufRing
	refs     []bufRef // per buffer id, so a recv allocates nothing
	returned idStack  // released by readers, not yet back in the ring
	retired  idStack  // retired, not yet given new memory
	inc      bool     // incremental consumption
	// filled[i] is how many bytes of buffer i the kernel has filled
	// since it was last put in the ring, and inRing[i] whether the kernel
	// may fill it further (inc only). Loop only.
	filled []int32
	inRing []bool
	// outs[i] owns the output pieces of buffer i (Share); shared counts
	// those outstanding, at most maxShared, so that output waiting for a
	// peer that does not read keeps at most a quarter of the ring from
	// the kernel (past it, writers copy).
	outs      []outShare
	shared    atomic.Int32
	maxShared int32
	// inRingN counts the buffers in the ring as the loop sees it: put
	// there and not yet taken by the kernel (recv CQEs that carried one).
	// Loop only. The stat BuffersOut differs: a buffer leaves it when its
	// reader releases it, whether or not the loop, which may sleep, has
	// put it back yet.
	inRingN int
	// spare holds the buffers back from their readers that the ring does
	// not need now, the last back on top; target is how many buffers the
	// loop keeps in the ring, minTarget its floor. used counts the
	// buffers the kernel took since the last replenish, peak the most of
	// any turn in this window of windowTurns turns. Loop only.
	spare                []uint16
	target, minTarget    int
	used, peak, winTurns int
	// down is set when the loop closed the pool; freed once its arena went
	// back for the next loop, which happens only when no reader holds any
	// of its buffers (freeArena).
	down, freed atomic.Bool
}

// empty reports whether, as far as the loop has seen, the ring has no
// buffer left for the kernel to take.
func (b *bufPool) empty() bool { return b.inRingN == 0 }

// took records that the kernel filled a buffer (a recv CQE carried it).
// Loop only.
func (b *bufPool) took() {
	b.inRingN--
	b.used++
	b.l.stats.BuffersOut.Add(1)
}

// warmBytes is what a loop's ring holds at least (minTarget), when the
// ring is that big: about what a CPU's second-level cache keeps.
const warmBytes = 1 << 20

// windowTurns is how many loop turns target keeps up for the busiest.
const windowTurns = 1024

func newBufPool(l *loop, count, size int, inc bool) (*bufPool, error) {
	arena, err := getArena(count, size)
	if err != nil {
		return nil, err
	}
	var flags uint16
	if inc {
		flags = uring.PbufRingInc
	}
	ring, err := uring.NewBufRingFlags(l.ring, count, 0, flags)
	if err != nil {
		putArena(arena)
		return nil, err
	}
	b := &bufPool{l: l, arena: arena, ring: ring, refs: make([]bufRef, count), inc: inc}
	b.minTarget = min(count, max(8, warmBytes/size))
	b.target = b.minTarget
	b.spare = make([]uint16, 0, count)
	b.returned.next = make([]uint32, count)
	b.retired.next = make([]uint32, count)
	if inc {
		b.filled = make([]int32, count)
		b.inRing = make([]bool, count)
		b.outs = make([]outShare, count)
		b.maxShared = int32(max(1, count/4))
	}
	for i := range count {
		b.refs[i] = bufRef{b: b, bid: uint16(i)}
		if inc {
			b.outs[i] = outShare{&b.refs[i]}
		}
	}
	for i := count - 1; i >= 0; i-- {
		b.spare = append(b.spare, uint16(i))
	}
	b.topUp()
	return b, nil
}

// topUp moves buffers from the top of spare into the ring until it holds
// target. Loop only.
func (b *bufPool) topUp() {
	n := min(b.target-b.inRingN, len(b.spare))
	if n <= 0 {
		return
	}
	top := len(b.spare) - 1
	for i := range n {
		b.add(b.spare[top-i], i)
	}
	b.spare = b.spare[:top+1-n]
	b.ring.Advance(n)
}

// ranDry runs when the kernel found the ring empty (ENOBUFS). If the ring
// is still empty as the loop sees it and buffers wait on spare, target
// doubles and the ring is topped up from spare at once. It reports
// whether the ring has buffers again. Loop only.
func (b *bufPool) ranDry() bool {
	if b.empty() && len(b.spare) > 0 {
		b.target = min(b.arena.Count(), 2*b.target)
		b.topUp()
	}
	return !b.empty()
}

// turn adjusts target to the buffers the kernel took since the last call
// (one loop turn). Loop only.
func (b *bufPool) turn() {
	count := b.arena.Count()
	if b.used*2 > b.target {
		b.target = min(count, b.used*2)
	}
	b.peak = max(b.peak, b.used)
	b.used = 0
	if b.winTurns++; b.winTurns == windowTurns {
		b.target = min(count, max(b.minTarget, 2*b.peak))
		b.peak, b.winTurns = 0, 0
	}
}

// add puts buffer bid in the ring at offset places past its tail (to be
// published by Advance). Loop only.
func (b *bufPool) add(bid uint16, offset int) {
	b.inRingN++
	if b.inc {
		b.filled[bid] = 0
		b.inRing[bid] = true
		b.refs[bid].n.Store(1) // the kernel's, until it moves past the buffer
	}
	b.ring.Add(b.arena.Buf(int(bid)), bid, offset)
}

// fill records that a recv completion filled n bytes of buffer bid, and
// returns them; more is the completion's CQEFBufMore. Loop only. With
// hold set, a connection's input is to link the bytes (buf.Owner: the
// buffer's bufRef).
func (b *bufPool) fill(bid uint16, n int32, more, hold bool) []byte {
	if !b.inc {
		b.took()
		p := b.arena.Buf(int(bid))[:n]
		if !hold {
			b.giveBack(bid) // stale, or nobody will read it
		}
		return p
	}
	from := b.filled[bid]
	b.filled[bid] = from + n
	r := &b.refs[bid]
	if hold {
		r.n.Add(1)
	}
	if !more {
		b.inRing[bid] = false
		b.took()
		r.drop() // the kernel's reference: it will not fill the buffer again
	}
	return b.arena.Buf(int(bid))[from : from+n]
}

// share is how many pieces of the ring one connection's input may pin
// (poll.FD.InputRef): a quarter of the buffers, or, once three quarters
// are out of the ring, two, so that under pressure a connection holding
// input copies it and its buffers go back. Loop only.
func (b *bufPool) share() int {
	count := b.arena.Count()
	if b.l.stats.BuffersOut.Load() >= int64(count-count/4) {
		return 2
	}
	return max(1, count/4)
}

// relieve runs when the ring ran dry with no buffer on its way back: the
// loop's connections hold every one, each within its share. Those whose
// readers wait for more input (holding what they read without releasing
// it, or buffering for a Next of more) cannot let go before that input
// comes, and none can come while they hold the ring: so their input lets
// go of its buffers without a copy. Each is retired
// (poll.FD.RetireWaitingInput) and goes back to the ring with new memory
// at the next turn, its readers keeping the old. Readers that are busy
// with their input are left to release it. Loop only.
func (l *loop) relieve() {
	if l.bufs.anyBack() {
		return // released buffers come back at the next turn
	}
	for _, c := range l.conns {
		if c != nil {
			c.fd.RetireWaitingInput()
		}
	}
}

// replenish puts returned buffers on spare, tops the ring up from it and
// re-arms the connections that ran dry. Loop only, once a turn.
func (l *loop) replenish() {
	b := l.bufs
	if b == nil {
		return
	}
	b.turn()
	if b.anyBack() {
		l.giving = b.returned.takeAll(l.giving[:0])
		if !b.retired.empty() {
			n := len(l.giving)
			l.giving = b.retired.takeAll(l.giving)
			for _, bid := range l.giving[n:] {
				b.arena.Replace(int(bid))
			}
		}
		// takeAll gives the last released first: it goes on top.
		for i := len(l.giving) - 1; i >= 0; i-- {
			b.spare = append(b.spare, l.giving[i])
		}
		l.giving = l.giving[:0]
	}
	b.topUp()
	if len(l.starved) == 0 || b.empty() {
		return
	}
	starved := l.starved
	l.starved = nil
	l.starving.Store(false)
	for _, c := range starved {
		c.unset(fStarved)
		if !c.is(fRecvArmed) && c.wantsInput() && !l.isTearing(c) {
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
	// The kernel is done with every buffer now, those it had filled part
	// of included, whose pieces readers may still hold.
	for bid, in := range b.inRing {
		if in {
			b.inRing[bid] = false
			b.took()
			b.refs[bid].drop()
		}
	}
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
