package buf

import (
	"fmt"
	"unsafe"
)

// WriteSpace returns free space at the tail of at least min bytes (min < 1
// is treated as 1): the free area [w, cap) of the tail node if it is large
// enough, otherwise the whole of a new node. A new node is the smallest size
// class that holds both min and the grow hint; a min above 64 KiB gets an
// exact-size heap slice that is not pooled. The producer writes into the
// start of the slice and publishes the bytes with Commit; the slice must not
// be used after Commit.
//
// WriteSpace may run without the consumer's mutex (see LinkBuffer): it
// reads only producer-owned state, and a new node stays unlinked, invisible
// to the consumer, until Commit links it. The exception: a buffer that also
// takes AppendRef nodes must call WriteSpace under the mutex, since Release
// frees a drained ref tail (writing into the slice needs no mutex either
// way).
func (b *LinkBuffer) WriteSpace(min int) []byte {
	if min < 1 {
		min = 1
	}
	if p := b.pending; p != nil {
		// A second WriteSpace before Commit: reuse the unlinked node if
		// it is big enough, else give it back.
		if len(p.buf) >= min {
			b.spaceLen = len(p.buf)
			return p.buf
		}
		b.pending = nil
		freeNode(p)
	}
	if t := b.tail; t != nil && cap(t.buf)-t.w >= min {
		b.spaceLen = cap(t.buf) - t.w
		return t.buf[t.w:cap(t.buf)]
	}
	size := min
	if size <= maxClass {
		size = max(size, b.growHint)
	}
	p := newNode(size)
	b.pending = p
	b.spaceLen = len(p.buf)
	return p.buf
}

// Space returns the length of the slice the last WriteSpace returned, or 0
// once it was committed.
func (b *LinkBuffer) Space() int { return b.spaceLen }

// Commit publishes n bytes that the producer wrote at the start of the
// slice returned by the last WriteSpace, linking the new node WriteSpace
// prepared, if any. It panics if n is negative or exceeds that slice. It
// must be called under the consumer's mutex. After Commit the slice is
// spent: a further Commit needs a new WriteSpace (Commit(0) is a no-op).
func (b *LinkBuffer) Commit(n int) {
	if n < 0 || n > b.spaceLen {
		panic(fmt.Sprintf("buf: Commit(%d) exceeds the %d bytes of the last WriteSpace", n, b.spaceLen))
	}
	if p := b.pending; p != nil {
		b.pending = nil
		b.link(p)
	}
	b.spaceLen = 0
	if n == 0 {
		return
	}
	b.tail.w += n
	b.length += n
	b.held += n
}

// link appends node p as the new tail: its bytes from r count as
// readable, and from off as held.
func (b *LinkBuffer) link(p *node) {
	if b.tail == nil {
		b.head, b.read = p, p
	} else {
		b.tail.next = p
	}
	b.tail = p
	b.length += p.w - p.r
	b.held += p.w - p.off
	if p.told() {
		b.owned++
	}
}

// dropSpace cancels an outstanding WriteSpace: Append and AppendRef change
// the tail, so a slice handed out before them must not be committed.
func (b *LinkBuffer) dropSpace() {
	if p := b.pending; p != nil {
		b.pending = nil
		freeNode(p)
	}
	b.spaceLen = 0
}

// Append copies p into the buffer, filling the tail's free area first and
// then new nodes of at most 64 KiB each. It cancels an outstanding
// WriteSpace.
func (b *LinkBuffer) Append(p []byte) {
	b.dropSpace()
	if len(p) == 0 {
		return
	}
	if t := b.tail; t != nil && t.w < cap(t.buf) {
		c := copy(t.buf[t.w:cap(t.buf)], p)
		t.w += c
		b.length += c
		b.held += c
		p = p[c:]
	}
	for len(p) > 0 {
		n := newNode(max(min(len(p), maxClass), b.growHint))
		n.w = copy(n.buf, p)
		p = p[n.w:]
		b.link(n)
	}
}

// Splice moves every readable byte of src to the end of b and leaves src
// empty, as Append(all of src) then Discard of src would, but without
// copying where it can: a node whose memory the buffer owns moves over
// whole, and so does one that references a Sharer's memory. A node is
// copied instead when it references other caller memory (AppendRef: its
// owner is released once the copy is made, so the caller may reuse the
// memory on return), when part of it was consumed, or when its bytes fit
// the free area of b's tail (moving it would strand that area, and many
// small splices would pin a node each). It cancels an outstanding
// WriteSpace on both buffers. Like Discard, it frees src's tail, so no
// producer may be writing into src.
func (b *LinkBuffer) Splice(src *LinkBuffer) {
	b.dropSpace()
	src.dropSpace()
	for n := src.head; n != nil; {
		next := n.next
		n.next = nil
		if b.movable(n) {
			b.link(n)
		} else {
			b.Append(n.buf[n.r:n.w])
			freeNode(n)
		}
		n = next
	}
	src.head, src.read, src.tail = nil, nil, nil
	src.length, src.held, src.owned = 0, 0, 0
}

// movable reports whether Splice moves n into b rather than copying it.
func (b *LinkBuffer) movable(n *node) bool {
	size := n.w - n.r
	if n.r != 0 || n.off != 0 || size == 0 {
		return false
	}
	if n.class == classRef {
		s, ok := n.owner.(Sharer)
		return ok && s.Shared()
	}
	return b.tail == nil || cap(b.tail.buf)-b.tail.w < size
}

// ShareRefs offers the memory of every readable node that AppendRef linked
// with no owner to share, which returns an owner to keep it (a Sharer) or
// nil; a node that gets one is moved, not copied, by a later Splice.
func (b *LinkBuffer) ShareRefs(share func(p []byte) Owner) {
	for n := b.read; n != nil; n = n.next {
		if n.class == classRef && n.owner == nil && n.r == 0 && n.w > 0 {
			if n.owner = share(n.buf[:n.w]); n.owner != nil {
				b.owned++
			}
		}
	}
}

// AppendRef links p into the buffer as a node of its own, without copying.
// The caller must not modify p until its owner (which may be nil) hears of
// it: exactly once, Release when the node is freed (by Release after p has
// been consumed, or by Discard), or Retire when the buffer is abandoned
// with p in it (Abandon). An empty p is not linked and is released at once.
// The node has no free space, so a following WriteSpace or Append starts a
// new node. AppendRef cancels an outstanding WriteSpace.
func (b *LinkBuffer) AppendRef(p []byte, owner Owner) {
	b.dropSpace()
	if len(p) == 0 {
		if owner != nil {
			owner.Release()
		}
		return
	}
	if b.extendRef(p, owner) {
		return
	}
	b.link(b.refNode(p, owner))
}

// refNode returns a full node that references p, made from the spare
// struct if there is one.
func (b *LinkBuffer) refNode(p []byte, owner Owner) *node {
	n := b.spare
	if n == nil {
		return newRefNode(p, owner)
	}
	b.spare = nil
	n.buf = p[:len(p):len(p)] // as newRefNode: no free area
	n.w = len(p)
	n.owner = owner
	return n
}

// extendRef appends p to the tail instead of linking a node for it, when
// the tail references the memory just before p for the same owner and
// that owner counts its references (a Counter): the node then covers both
// and one reference, so the new one is released at once. Input that
// arrives piece by piece in one incrementally consumed receive buffer so
// reads as one slice.
func (b *LinkBuffer) extendRef(p []byte, owner Owner) bool {
	c, ok := owner.(Counter) // first: owner may be of a type == panics on
	if !ok || !c.Counts() {
		return false
	}
	t := b.tail
	if t == nil || t.class != classRef || t.owner != owner || t.r == t.w {
		return false
	}
	end := unsafe.Add(unsafe.Pointer(unsafe.SliceData(t.buf)), len(t.buf))
	if end != unsafe.Pointer(unsafe.SliceData(p)) {
		return false
	}
	// As newRefNode, capped at its length: no free area.
	t.buf = unsafe.Slice(unsafe.SliceData(t.buf), len(t.buf)+len(p))
	t.w += len(p)
	b.length += len(p)
	b.held += len(p)
	owner.Release()
	return true
}

// RetireOwned lets go of the memory of every node whose owner lent it
// (Owned), without giving it back: each owner hears Retire, so that it
// never reuses that memory, and the nodes stay, their bytes readable and
// the slices of them valid, as memory the garbage collector frees with
// the last of them. It returns how many it retired. A consumer method: the
// owner field is consumer-side state.
func (b *LinkBuffer) RetireOwned() int {
	n := 0
	for x := b.head; x != nil && b.owned > 0; x = x.next {
		if x.told() {
			o := x.owner
			x.owner = nil
			b.owned--
			n++
			o.Retire()
		}
	}
	return n
}

// Discard consumes everything and frees every node, the tail included,
// releasing ref nodes to their owners. It is for a closed connection: no
// producer may be running or hold a WriteSpace slice. The buffer is empty
// and usable after.
func (b *LinkBuffer) Discard() { b.drop(freeNode) }

// Abandon empties the buffer as Discard does, but reuses none of its
// memory, for a closed connection whose reader may still hold slices of
// it: pooled nodes are left to the garbage collector, and ref nodes (and
// nodes whose memory Share or InsertRef shared) are retired to their
// owners, which must never reuse that memory.
func (b *LinkBuffer) Abandon() { b.drop(abandonNode) }

// drop unlinks every node, handing each to free.
func (b *LinkBuffer) drop(free func(*node)) {
	b.dropSpace()
	for n := b.head; n != nil; {
		next := n.next
		free(n)
		n = next
	}
	b.head, b.read, b.tail = nil, nil, nil
	b.length, b.held, b.owned = 0, 0, 0
}

// abandonNode lets go of n without reusing its memory.
func abandonNode(n *node) {
	// The struct and its memory go to the garbage collector with the
	// reader's last slice: putting either back in a pool could hand it to
	// another connection. The fields are cleared before the owner hears:
	// a shared owner may hand n to another goroutine.
	o := n.owner
	n.next, n.owner = nil, nil
	if o != nil {
		o.Retire()
	}
}

// SetGrowHint asks that new nodes be at least n bytes, clamped to 64 KiB;
// n <= 0 clears the hint. The hint stays in force until changed. It lets a
// reader that saw full reads ask for bigger nodes. It is producer state, so
// like WriteSpace it may be called without the consumer's mutex.
func (b *LinkBuffer) SetGrowHint(n int) {
	b.growHint = max(0, min(n, maxClass))
}
