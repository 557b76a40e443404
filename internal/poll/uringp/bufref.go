//go:build linux

package uringp

import (
	"sync/atomic"

	"github.com/ringpoll/ringpoll/internal/buf"
	"github.com/ringpoll/ringpoll/internal/poison"
)

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

// bufRef is the owner (buf.Owner) of one provided buffer while a
// connection's input links it.
type bufRef struct {
	b   *bufPool
	bid uint16
	// With incremental consumption: n counts the inputs that link a
	// piece of the buffer, plus one while the kernel may fill it; retired
	// says one of those inputs retired its piece.
	n       atomic.Int32
	retired atomic.Bool
}

// Release gives the buffer back to the ring (with incremental
// consumption: drops a reference). Safe for concurrent use.
func (r *bufRef) Release() {
	if r.b.inc {
		r.drop()
		return
	}
	r.b.giveBack(r.bid)
}

// Retire takes the buffer's memory out of use for good (with incremental
// consumption: once the last reference is dropped). Safe for concurrent
// use.
func (r *bufRef) Retire() {
	if r.b.inc {
		r.retired.Store(true) // before the drop, which orders it for the last one
		r.drop()
		return
	}
	r.b.retire(r.bid)
}

// Counts reports whether the buffer's owner counts references
// (buf.Counter): with incremental consumption, one per piece of input.
func (r *bufRef) Counts() bool { return r.b.inc }

// acquire takes a reference to an incrementally consumed buffer that
// something still holds; it fails for a buffer on its way back to the
// ring. Safe for concurrent use.
func (r *bufRef) acquire() bool {
	for {
		n := r.n.Load()
		if n <= 0 {
			return false
		}
		if r.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Share implements poll.Sharer: a slice of one of the loop's incrementally
// consumed receive buffers, which a reader holds (a piece of its input),
// is kept by a reference of its own, so that output sends straight from it
// (an echo without a copy). Anything else, a buffer nobody holds, and any
// piece past maxShared outstanding get nil: the caller copies.
func (l *loop) Share(p []byte) buf.Owner {
	b := l.bufs
	if b == nil || !b.inc {
		return nil
	}
	i, ok := b.arena.Index(p)
	if !ok {
		return nil
	}
	if b.shared.Add(1) > b.maxShared || !b.refs[i].acquire() {
		b.shared.Add(-1)
		return nil
	}
	l.stats.BuffersShared.Add(1)
	return &b.outs[i]
}

// outShare owns the output pieces of one incrementally consumed buffer
// (buf.Sharer): the buffer stays out of the ring until each is released.
type outShare struct{ r *bufRef }

// Shared reports that the memory stays put until Release or Retire.
func (o *outShare) Shared() bool { return true }

// Release drops an output piece's reference. Safe for concurrent use.
func (o *outShare) Release() {
	o.r.b.shared.Add(-1)
	o.r.drop()
}

// Retire drops an output piece's reference and retires the buffer.
// Output is never read after its connection is gone, so this comes only
// from a buffer abandoned with output in it. Safe for concurrent use.
func (o *outShare) Retire() {
	o.r.b.shared.Add(-1)
	o.r.Retire()
}

// drop drops a reference to an incrementally consumed buffer; the last one
// gives it back, or retires it if a piece of it was retired.
func (r *bufRef) drop() {
	if r.n.Add(-1) != 0 {
		return
	}
	if r.retired.Swap(false) {
		r.b.retire(r.bid)
		return
	}
	r.b.giveBack(r.bid)
}

// retire queues buffer bid for new memory. Safe for concurrent use.
func (b *bufPool) retire(bid uint16) {
	b.retired.push(bid)
	b.l.stats.BuffersRetired.Add(1)
	b.returnedOne()
}

// giveBack queues buffer bid for the ring. Safe for concurrent use, also
// after the pool closed. Nothing holds the buffer any more, neither the
// kernel nor a reader: under the ringpoison tag it is poisoned whole, so
// a slice of it read after its Release shows the pattern. A retired
// buffer never comes here (retire): its reader may still hold it.
func (b *bufPool) giveBack(bid uint16) {
	if poison.Enabled {
		poison.Fill(b.arena.Buf(int(bid)))
	}
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
