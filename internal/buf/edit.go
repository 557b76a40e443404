package buf

// Edits of a buffer's readable bytes from the producer's side, for a
// writer that builds a message before sending it (netpoll's MallocAck,
// WriteDirect and Append). They change nodes before the tail and the tail
// itself, so, like Discard, they run while no producer writes without the
// mutex: in practice on a buffer one goroutine owns, such as a Writer's.

// Truncate keeps the first n readable bytes and drops the rest, freeing
// the nodes wholly past them. The node the cut falls in keeps its memory,
// and the cut bytes become free area again, unless the node references
// memory it does not own (AppendRef, or a view that Share or InsertRef
// made): that is never written. It panics unless n is in [0, Len()].
// Slices from Peek of dropped bytes are no longer valid; slices from Next
// stay valid. It cancels an outstanding WriteSpace.
func (b *LinkBuffer) Truncate(n int) {
	if n < 0 || n > b.length {
		panicRange("Truncate", n, b.length)
	}
	b.dropSpace()
	if n == b.length {
		return
	}
	cut := b.front()
	for n > cut.w-cut.r {
		n -= cut.w - cut.r
		cut = cut.next
	}
	// The cut lies at or after cut.r, and so after cut.off: only readable
	// bytes go, never consumed ones that a Next slice may show.
	drop := cut.w - (cut.r + n)
	cut.w -= drop
	b.length -= drop
	b.held -= drop
	if cut.class == classRef {
		cut.buf = cut.buf[:cut.w:cut.w]
	}
	for x := cut.next; x != nil; {
		next := x.next
		b.length -= x.w - x.r
		b.held -= x.w - x.off
		x.next = nil
		b.free(x)
		x = next
	}
	cut.next = nil
	b.tail = cut
}

// InsertRef links p into the buffer without copying, before its last
// remain readable bytes, so that the readable bytes become the first
// Len()-remain of them, then p, then the last remain. When the insertion
// point falls inside a node, that node is split in two views of its
// memory (see Share), so a writer may still fill the part after p through
// a slice it got from WriteSpace before. p's owner (which may be nil)
// hears of it as with AppendRef, and the caller must not modify p until
// then; an empty p is not linked and is released at once. It panics
// unless remain is in [0, Len()]. It cancels an outstanding WriteSpace.
func (b *LinkBuffer) InsertRef(p []byte, remain int, owner Owner) {
	if remain < 0 || remain > b.length {
		panicRange("InsertRef", remain, b.length)
	}
	if remain == 0 || len(p) == 0 {
		b.AppendRef(p, owner) // at the end, or nothing to link
		return
	}
	b.dropSpace()
	// Find the node n holding the first of the last remain bytes, the
	// node before it, and the offset of that byte in n's readable bytes.
	// Nodes before the read node are drained, so the walk passes them.
	pos := b.length - remain
	var prev *node
	n := b.head
	for pos >= n.w-n.r {
		pos -= n.w - n.r
		prev, n = n, n.next
	}
	ins := b.refNode(p, owner)
	ins.next = n
	if ins.told() {
		b.owned++
	}
	first := ins
	if pos > 0 {
		// n's readable bytes before the point move to a view of their
		// own, ahead of ins; n keeps the rest. n's held bytes fall by as
		// many as the view holds (off moves up with r), so Held does not
		// change.
		k := n.r + pos
		a, _ := view(n, n.r, k)
		a.next = ins
		if a.told() {
			b.owned++
		}
		first = a
		n.off += k - n.r
		n.r = k
	}
	if prev == nil {
		b.head = first
	} else {
		prev.next = first
	}
	if b.read == n {
		b.read = first
	}
	b.length += len(p)
	b.held += len(p)
}

// Concat moves every node of src that holds unread bytes to the end of b,
// as they are: nothing is copied, references stay references (their
// owners hear of them when b frees them), and committed bytes that a
// writer still fills through the slice WriteSpace gave it land in b.
// src's drained nodes are freed, and src is left empty and usable, its
// earlier Next and Peek slices no longer valid (as after Discard). Bytes
// of src consumed but not released move with their node and count in b's
// Held until b releases the node. It cancels an outstanding WriteSpace on
// both buffers; the free area of b's old tail goes unused.
func (b *LinkBuffer) Concat(src *LinkBuffer) {
	if src == b {
		panic("buf: Concat of a buffer onto itself")
	}
	b.dropSpace()
	src.dropSpace()
	for n := src.head; n != nil; {
		next := n.next
		n.next = nil
		if n.r == n.w {
			src.free(n)
		} else {
			b.link(n)
		}
		n = next
	}
	src.head, src.read, src.tail = nil, nil, nil
	src.length, src.held, src.owned = 0, 0, 0
}
