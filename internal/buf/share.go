package buf

import (
	"sync/atomic"
	"unsafe"
)

// shared is the owner of memory that several nodes show: a node whose
// bytes Share or InsertRef made views of, and those views. Each of these
// nodes holds one reference. When the last is freed the memory goes back
// where it came from: a pooled node to its pool, a ref node's memory to
// its own owner. If any of them was abandoned (Abandon: a reader may
// still see it), the memory is retired instead, never reused.
//
// The views may sit in other buffers than the node they show, freed by
// other goroutines (a connection's input and a Reader that Slice made),
// so the count is atomic. Whoever drops the last reference sees every
// other holder's writes, since each dropped its reference with an atomic
// add after its last use of the node.
type shared struct {
	refs    atomic.Int32
	retired atomic.Bool
	node    *node // the pooled or oversized node whose memory this is; nil for a ref node's
	inner   Owner // the owner of a ref node's memory, or nil
}

// Release drops one reference.
func (s *shared) Release() { s.drop() }

// Shared implements Sharer: memory of a pooled or oversized node stays as
// it is until the last reference is dropped, so a view of it may move from
// buffer to buffer (Splice). A ref node's memory is its own owner's, which
// may not promise that.
func (s *shared) Shared() bool { return s.node != nil }

// Retire drops one reference and marks the memory as never to be reused.
func (s *shared) Retire() {
	s.retired.Store(true)
	s.drop()
}

func (s *shared) drop() {
	if s.refs.Add(-1) != 0 {
		return
	}
	retired := s.retired.Load()
	if n := s.node; n != nil {
		n.owner = nil
		if !retired {
			freeNode(n)
		}
		// Retired: the node and its memory go to the garbage collector.
		return
	}
	switch {
	case s.inner == nil:
	case retired:
		s.inner.Retire()
	default:
		s.inner.Release()
	}
}

// view returns a new full node that shows n.buf[from:to] without copying
// and holds a reference to n's memory, making that memory shared first if
// it is not yet. It reports whether the memory has an owner that must hear
// back (a ref node's, such as an io_uring provided buffer): pooled memory
// left unreleased is merely garbage collected, an owner's is lost to it.
//
// n's owner field is consumer-side state: view may run while a producer
// writes into n's free area without the mutex (see LinkBuffer), since it
// touches neither n.buf nor n.w.
func view(n *node, from, to int) (v *node, owned bool) {
	p := n.buf[from:to]
	if n.class == classRef && n.owner == nil {
		return newRefNode(p, nil), false // caller memory nobody is told about
	}
	s := share(n)
	return newRefNode(p, s), s.inner != nil
}

// share makes n's memory shared if it is not yet and takes a reference
// to it for the caller.
func share(n *node) *shared {
	s, ok := n.owner.(*shared)
	if !ok {
		s = &shared{}
		if n.class == classRef {
			s.inner = n.owner
		} else {
			s.node = n
		}
		s.refs.Store(1) // n's own
		n.owner = s
	}
	s.refs.Add(1)
	return s
}

// AdoptRefs looks, for each readable node of b of at least min bytes that
// AppendRef linked with no owner (a Writer's WriteBinary of a slice),
// for the node of src whose memory it shows: one that src's reader has
// reached (a node before src's read position, such as Next's copy across
// nodes, or the read node itself) and whose memory src owns (pooled or
// oversized). The node of b then holds a reference to that memory, as
// Share's views do: the memory stays until both buffers freed it, and a
// later Splice moves the node instead of copying it. A reply written from
// the request's own bytes so goes out without a copy.
//
// AdoptRefs is a consumer method of src (under src's mutex); it may run
// while src's producer writes into its tail's free area.
func (b *LinkBuffer) AdoptRefs(src *LinkBuffer, min int) {
	for n := b.read; n != nil; n = n.next {
		if n.class != classRef || n.owner != nil || n.r != 0 || n.w < min {
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(n.buf)))
		hi := lo + uintptr(n.w)
		for m := src.head; m != nil; m = m.next {
			if m.class != classRef && cap(m.buf) > 0 {
				base := uintptr(unsafe.Pointer(unsafe.SliceData(m.buf)))
				if lo >= base && hi <= base+uintptr(cap(m.buf)) {
					n.owner = share(m)
					b.owned++
					break
				}
			}
			if m == src.read {
				break
			}
		}
	}
}

// Share consumes n bytes of b and links them to the end of dst without
// copying: dst gets nodes that show b's memory. That memory is freed (to
// its pool, or to its owner) only once every buffer showing it has freed
// it, so b may Release, Discard or Abandon its part and dst read and
// release its own independently, on different goroutines (each buffer
// under its own mutex). It panics unless n is in [0, Len()]. It cancels
// an outstanding WriteSpace on dst, and reports whether dst now shows
// memory whose owner must hear back (see view): such a dst must be
// Released, Discarded or Abandoned, not dropped.
//
// Share is a consumer method of b: it may run while b's producer writes
// into the tail's free area (see LinkBuffer).
func (b *LinkBuffer) Share(dst *LinkBuffer, n int) (owned bool) {
	if n < 0 || n > b.length {
		panicRange("Share", n, b.length)
	}
	if dst == b {
		panic("buf: Share into the buffer itself")
	}
	dst.dropSpace()
	b.length -= n
	for n > 0 {
		f := b.front()
		c := min(n, f.w-f.r)
		v, o := view(f, f.r, f.r+c)
		owned = owned || o
		dst.link(v)
		f.r += c
		n -= c
	}
	return owned
}
