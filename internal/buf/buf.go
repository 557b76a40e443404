// Package buf implements LinkBuffer, the nocopy linked buffer that backs
// both the input and the output side of a connection.
package buf

import (
	"bytes"
	"fmt"
	"sync"
)

// LinkBuffer is a byte queue stored as a singly linked list of nodes. Each
// node holds a slice with a read offset r and a write offset w; the readable
// bytes are the concatenation of buf[r:w] over the nodes from the read node
// to the tail. Node memory comes from per-size-class pools and goes back to
// them on Release or Discard, so a buffer in steady state does not allocate.
//
// Slices returned by Next stay valid until the next Release (or Discard);
// slices returned by Peek stay valid until the next Release or consuming
// call. The caller must not write to them.
//
// A LinkBuffer is not safe for concurrent use, with one exception that the
// connection code relies on. Call the side that fills the buffer the
// producer and the side that drains it the consumer, and let both share a
// mutex. Then the producer may call WriteSpace (and SetGrowHint) and write
// into the returned slice WITHOUT holding the mutex, while the consumer runs
// any method under the mutex; the producer must then call Commit under the
// mutex to publish the bytes. Every other method, producer-side ones
// included (Commit, Append, AppendRef), must be called under the mutex.
// This is sound because:
//
//   - WriteSpace only reads producer-owned state (the tail pointer, the
//     tail's w and capacity, the grow hint) and, when the tail is too small,
//     prepares a new node that is not linked into the list until Commit, so
//     the consumer never sees it.
//   - The returned slice lies entirely in the free area [w, cap) of the tail
//     node (or of that unlinked node); the consumer only ever touches bytes
//     in [r, w) and never re-slices a node's buf.
//   - No consumer method moves, reuses or resets a tail node with free
//     space: Release frees fully consumed nodes that are not the tail, and
//     a drained tail only if it is a ref node (AppendRef), which has no free
//     area; it never rewinds r and w of a drained tail to 0. WriteSpace
//     after AppendRef therefore always prepares a new node, and Commit
//     links it whether or not the ref node is still there.
//   - The tail pointer is changed only by the producer (Commit, Append,
//     AppendRef) under the mutex, by Discard, and by Release freeing a
//     drained ref tail (so a buffer with ref nodes calls WriteSpace under
//     the mutex).
//
// Discard frees the tail too, so it may only be called once no producer
// runs any more (the connection is closed). Shrink frees a drained tail,
// so it is only for buffers whose producer calls WriteSpace under the
// mutex as well (every buffer of a connection does). Truncate, InsertRef
// and Concat rework nodes up to the tail, so they too need a producer
// that does not write outside the mutex (a writer's own buffer). Share is
// a consumer method: it only moves r and sets the owner of nodes it
// shows, which the producer never reads.
type LinkBuffer struct {
	head *node // oldest node not yet freed
	read *node // node holding the next readable byte (nodes before it are drained)
	tail *node // last linked node; the producer writes into its free area

	length int // readable bytes
	held   int // bytes not yet released: sum of w-off over linked nodes
	// owned counts the linked nodes whose memory an owner lends (told
	// nodes: an io_uring provided buffer, or a view of one), so that a
	// connection can tell how much of its loop's receive memory it pins.
	owned int

	// Producer-only state, touched by WriteSpace without the mutex.
	pending  *node // node prepared by WriteSpace, linked by Commit
	spaceLen int   // length of the last WriteSpace slice, 0 once committed
	growHint int   // minimum size of the next new node

	// spare is the struct of the last ref node Release freed, kept for
	// the next AppendRef: a connection whose input arrives in io_uring
	// provided buffers links and frees one per message. Consumer-side
	// state, like AppendRef and Release. It holds no memory but itself.
	spare *node
}

// New returns an empty buffer. Node memory comes from a package pool of
// size classes.
func New() *LinkBuffer {
	return &LinkBuffer{}
}

// headers recycles buffers that Get handed out and Put took back.
var headers = sync.Pool{New: func() any { return new(LinkBuffer) }}

// Get returns an empty buffer, from a pool of those given back with Put: for
// a buffer that is empty most of its life (a connection's pending replies
// between two flushes), so that it need not be kept while empty.
func Get() *LinkBuffer { return headers.Get().(*LinkBuffer) }

// Put gives b back for Get to reuse, if it is empty: nothing linked, no
// space handed out by WriteSpace. It reports whether it took b; the caller
// must not use b afterwards if so. A spare ref-node struct b kept goes
// with it, for the next AppendRef of whoever gets it: an input buffer
// taken and given back once per message then costs no node struct either.
func Put(b *LinkBuffer) bool {
	if b.head != nil || b.pending != nil || b.spaceLen != 0 {
		return false
	}
	*b = LinkBuffer{spare: b.spare}
	headers.Put(b)
	return true
}

// Len returns the number of readable bytes. A nil buffer has none: an FD
// holds no queue while it is empty (Put).
func (b *LinkBuffer) Len() int {
	if b == nil {
		return 0
	}
	return b.length
}

// Held returns the number of bytes in nodes not yet freed: the readable
// bytes plus those consumed but not yet released (ReleaseRead releases the
// consumed start of a node kept for its unread bytes without freeing it).
// It counts committed lengths, not node capacities. A nil buffer holds
// none, as for Len.
func (b *LinkBuffer) Held() int {
	if b == nil {
		return 0
	}
	return b.held
}

// Owned returns the number of nodes b links whose memory an owner lent it
// (AppendRef with an owner, and the views Share made of those): each pins
// that memory until b frees it. A nil buffer links none.
func (b *LinkBuffer) Owned() int {
	if b == nil {
		return 0
	}
	return b.owned
}

// panicRange reports a size argument out of range. It is kept out of line so
// that the fmt call does not make the hot paths allocate.
//
//go:noinline
func panicRange(op string, n, length int) {
	panic(fmt.Sprintf("buf: %s(%d) out of range with %d readable bytes", op, n, length))
}

// front advances the read node past drained nodes and returns it. It never
// moves past the tail, and returns nil only for a buffer with no nodes.
func (b *LinkBuffer) front() *node {
	n := b.read
	for n != nil && n.r == n.w && n.next != nil {
		n = n.next
	}
	b.read = n
	return n
}

// Next consumes n bytes and returns them. n must be in [0, Len()], else
// Next panics; callers check Len first. When the bytes lie in one node the
// result aliases that node (no copy), otherwise it is a copy (see scratch).
// The result is valid until the next Release.
func (b *LinkBuffer) Next(n int) []byte {
	if n < 0 || n > b.length {
		panicRange("Next", n, b.length)
	}
	if n == 0 {
		return nil
	}
	if p := b.single(n); p != nil {
		b.read.r += n
		b.length -= n
		return p
	}
	p := b.scratch(n)
	b.copyOut(p, true)
	return p
}

// Peek returns the next n bytes without consuming them, with the same
// nocopy rule and panics as Next. The result is valid until the next
// Release or consuming call.
func (b *LinkBuffer) Peek(n int) []byte {
	if n < 0 || n > b.length {
		panicRange("Peek", n, b.length)
	}
	if n == 0 {
		return nil
	}
	if p := b.single(n); p != nil {
		return p
	}
	p := b.scratch(n)
	b.copyOut(p, false)
	return p
}

// smallScratch is the size under which a copy across nodes goes to the
// heap: a pooled node for a few bytes (a frame header) would hold a page
// until Release.
const smallScratch = 256

// scratch returns n bytes for a copy of readable bytes that span nodes.
// From smallScratch to maxScratch it is a pooled node linked in front of
// head as already consumed and released (r = w = off = n), so the next
// Release returns it to its pool, as netpoll's LinkBuffer frees its copy
// caches on Release, and Abandon leaves it to the garbage collector with
// the reader's slices. A copy per message from the heap would cost a
// clear and garbage collection (16 KiB messages in 4 KiB provided buffers
// spent a fifth of the server's CPU so). Consumer-side, under the mutex:
// it moves head, which the producer never touches.
func (b *LinkBuffer) scratch(n int) []byte {
	if n < smallScratch || n > maxScratch {
		return make([]byte, n)
	}
	var s *node
	if n <= maxClass {
		s = newNode(n)
	} else {
		s = newScratchNode(n)
	}
	s.r, s.w, s.off = n, n, n
	s.next = b.head
	b.head = s
	return s.buf[:n:n]
}

// single returns the next n (> 0, <= Len) bytes as a subslice of the read
// node, or nil if they span nodes.
func (b *LinkBuffer) single(n int) []byte {
	f := b.front()
	if f.w-f.r < n {
		return nil
	}
	// The three-index slice stops an append by the caller from spilling
	// into the free area, which a producer may be writing concurrently.
	return f.buf[f.r : f.r+n : f.r+n]
}

// Front returns the readable bytes of the read node: the longest run of
// the next bytes that lies in one node, nil if none are readable. Like a
// Peek of them, the result aliases the node and is valid until the next
// Release; the bytes a consumer later takes from the buffer are, byte for
// byte, a prefix of it as long as it takes no more than its length. A
// producer may append behind it meanwhile: the result does not grow.
func (b *LinkBuffer) Front() []byte {
	if b == nil || b.length == 0 {
		return nil
	}
	f := b.front()
	return f.buf[f.r:f.w:f.w]
}

// copyOut copies len(p) (<= Len) readable bytes into p, consuming them if
// consume is set.
func (b *LinkBuffer) copyOut(p []byte, consume bool) {
	done := 0
	for n := b.front(); done < len(p); n = n.next {
		c := copy(p[done:], n.buf[n.r:n.w])
		done += c
		if consume {
			n.r += c
			b.read = n
		}
	}
	if consume {
		b.length -= len(p)
	}
}

// Skip consumes n bytes without returning them. It panics unless n is in
// [0, Len()].
func (b *LinkBuffer) Skip(n int) {
	if n < 0 || n > b.length {
		panicRange("Skip", n, b.length)
	}
	b.length -= n
	for n > 0 {
		f := b.front()
		c := min(n, f.w-f.r)
		f.r += c
		n -= c
	}
}

// IndexByte returns the offset of the first c in the readable bytes, or -1
// if there is none.
func (b *LinkBuffer) IndexByte(c byte) int {
	off := 0
	for n := b.read; n != nil; n = n.next {
		if i := bytes.IndexByte(n.buf[n.r:n.w], c); i >= 0 {
			return off + i
		}
		off += n.w - n.r
	}
	return -1
}

// ReadInto copies min(len(p), Len()) bytes into p, consumes them and
// returns how many were copied.
func (b *LinkBuffer) ReadInto(p []byte) int {
	p = p[:min(len(p), b.length)]
	if len(p) > 0 {
		b.copyOut(p, true)
	}
	return len(p)
}

// Slices appends up to max non-empty readable chunks, one per node, to dst
// and returns it; it is meant for writev/sendmsg. It does not consume. The
// chunks are valid until the next Release or consuming call.
func (b *LinkBuffer) Slices(dst [][]byte, max int) [][]byte {
	for n, k := b.read, 0; n != nil && k < max; n = n.next {
		if n.r < n.w {
			// Capped at w for the same reason as in single.
			dst = append(dst, n.buf[n.r:n.w:n.w])
			k++
		}
	}
	return dst
}

// Shrink frees the tail node once everything in it was consumed and
// released, so an idle buffer holds no memory (the next write takes a node
// from the pool again). Unlike Release it moves the tail, so the producer
// must call WriteSpace under the mutex too; Shrink keeps a tail whose free
// area a WriteSpace handed out and Commit has not yet published.
func (b *LinkBuffer) Shrink() {
	t := b.tail
	if t == nil || b.head != t || t.r != t.w || t.off != t.w {
		return // unread or unreleased bytes
	}
	if b.spaceLen > 0 && b.pending == nil {
		return // the producer may be writing into its free area
	}
	b.head, b.read, b.tail = nil, nil, nil
	if t.told() {
		b.owned--
	}
	freeNode(t)
}

// ReleaseRead is Release, and also releases the consumed start of the node
// it keeps for the unread bytes after it: Held leaves it out, though the
// node's memory stays until the rest is consumed too. Held then counts
// only the bytes the reader holds, so a consumer that waits for the rest
// of a message whose start shares a node with bytes it has released is
// not held at a mark by bytes it gave back; the memory behind Held is
// larger by at most that one node. Slices obtained before the call are no
// longer valid, as for Release.
func (b *LinkBuffer) ReleaseRead() {
	b.Release()
	if h := b.head; h != nil && h.r > h.off {
		b.held -= h.r - h.off
		h.off = h.r
	}
}

// Release frees every node that is fully consumed and is not the tail,
// returning its memory to the pool (or releasing it to its owner). Slices
// obtained from Next or Peek before the call are no longer valid. The tail
// is always kept, and never rewound, because a producer may be writing into
// its free area.
func (b *LinkBuffer) Release() {
	for b.head != nil && b.head != b.tail && b.head.r == b.head.w {
		n := b.head
		if b.read == n {
			b.read = n.next
		}
		b.head = n.next
		b.held -= n.w - n.off
		b.free(n)
	}
	// A drained tail is kept (a producer may be writing its free space),
	// but its bytes are released all the same: Held must fall to zero once
	// everything is, or a connection paused at its high-water mark would
	// never resume. A drained ref tail has no free space and is freed, so
	// the memory it references (an io_uring provided buffer) goes back to
	// its owner while the connection idles.
	if t := b.tail; t != nil && b.head == t && t.r == t.w {
		b.held -= t.w - t.off
		if t.class == classRef {
			b.head, b.read, b.tail = nil, nil, nil
			b.free(t)
			return
		}
		t.off = t.w
	}
}
