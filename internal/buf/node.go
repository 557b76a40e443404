package buf

import (
	"sync"

	"github.com/ringpoll/ringpoll/internal/poison"
)

// classSizes are the pooled node sizes. They are powers of two from 4 KiB
// (one page, the smallest useful socket read) to 64 KiB (the largest single
// read or write that is worth issuing in one go); anything bigger is either
// split (Append) or given an exact-size heap slice (WriteSpace).
var classSizes = [...]int{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10}

// maxClass is the largest pooled node size.
const maxClass = 64 << 10

// scratchSizes are the pooled sizes, above maxClass, of the copies a
// reader's Next or Peek makes of bytes that span nodes (LinkBuffer.scratch):
// powers of two up to the default input high-water mark. A copy of that
// size from the heap costs a clear of the whole slice and garbage
// collection: with 256 KiB messages, a tenth of an echo server's CPU.
var scratchSizes = [...]int{128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20}

// maxScratch is the largest pooled scratch size.
const maxScratch = 4 << 20

const (
	// classUnpooled marks a node whose memory came from a one-off heap
	// allocation (larger than maxClass); only its struct is pooled.
	classUnpooled = -1
	// classRef marks a node that references caller memory (AppendRef); its
	// memory is never pooled, its owner is told instead.
	classRef = -2
)

// node is one link of a LinkBuffer. Readable bytes are buf[r:w]; the free
// area a producer may fill is buf[w:cap(buf)].
type node struct {
	buf   []byte
	r, w  int
	off   int // bytes of this node already taken out of LinkBuffer.held
	next  *node
	class int   // index into classSizes, classUnpooled or classRef
	owner Owner // for classRef nodes; told exactly once when freed
}

// classPools holds one pool per size class. Each pooled *node keeps its
// buffer, so a steady-state buffer allocates neither structs nor memory.
// The pools of scratchSizes follow, at class len(classSizes)+i.
var classPools [len(classSizes) + len(scratchSizes)]sync.Pool

// structPool recycles node structs whose memory is not pooled (AppendRef
// and oversized nodes), so that linking caller memory does not allocate.
var structPool = sync.Pool{New: func() any { return new(node) }}

func init() {
	for i := range classPools {
		size := classSize(i)
		class := i
		classPools[i].New = func() any {
			return &node{buf: make([]byte, size), class: class}
		}
	}
}

// classSize returns the size of class c's nodes.
func classSize(c int) int {
	if c < len(classSizes) {
		return classSizes[c]
	}
	return scratchSizes[c-len(classSizes)]
}

// newScratchNode returns an empty pooled node of at least size bytes,
// maxClass < size <= maxScratch.
func newScratchNode(size int) *node {
	for i, s := range scratchSizes {
		if size <= s {
			return classPools[len(classSizes)+i].Get().(*node)
		}
	}
	panic("buf: scratch size out of range")
}

// classFor returns the index of the smallest class holding size bytes, or
// -1 when size exceeds maxClass.
func classFor(size int) int {
	for i, s := range classSizes {
		if size <= s {
			return i
		}
	}
	return -1
}

// newNode returns an empty node with at least size bytes of free space.
func newNode(size int) *node {
	c := classFor(size)
	if c < 0 {
		n := structPool.Get().(*node)
		n.buf = make([]byte, size)
		n.class = classUnpooled
		return n
	}
	return classPools[c].Get().(*node)
}

// newRefNode returns a full node that references p without copying.
func newRefNode(p []byte, owner Owner) *node {
	n := structPool.Get().(*node)
	// Cap the slice at its length: the node must expose no free area, or a
	// later WriteSpace/Append would scribble over the caller's memory.
	n.buf = p[:len(p):len(p)]
	n.w = len(p)
	n.class = classRef
	n.owner = owner
	return n
}

// Owner owns memory that a LinkBuffer links without copying (AppendRef)
// and tells it, exactly once, what became of it.
type Owner interface {
	// Release: the buffer no longer needs the memory; it may be reused.
	Release()
	// Retire: the memory must never be reused, since a reader may still
	// see it (LinkBuffer.Abandon).
	Retire()
}

// Sharer is an Owner whose memory stays as it is until the owner hears
// Release or Retire, however long a buffer keeps it, so that a node of it
// may move from one buffer to another (Splice) instead of being copied.
// Shared reports whether that holds of this owner's memory.
type Sharer interface {
	Owner
	Shared() bool
}

// Counter is an Owner that counts references to its memory, so that one
// it was given twice may be told Release twice, in any order: AppendRef
// then extends a node of its memory instead of linking another
// (LinkBuffer.extendRef). Counts reports whether that holds of this owner.
type Counter interface {
	Owner
	Counts() bool
}

// told reports whether n's memory is lent by an owner that hears when n
// is freed (LinkBuffer.Owned counts such nodes).
func (n *node) told() bool { return n.class == classRef && n.owner != nil }

// free frees n, which b linked, as freeNode does, but keeps a ref node's
// struct as the buffer's spare when it has none.
func (b *LinkBuffer) free(n *node) {
	if n.told() {
		b.owned--
	}
	if n.class != classRef || b.spare != nil {
		freeNode(n)
		return
	}
	o := n.owner
	*n = node{class: classRef}
	b.spare = n
	if o != nil {
		o.Release()
	}
}

// freeNode returns n to its pool, releasing its memory to its owner if it
// has one. The caller must have unlinked n and must not touch it
// afterwards. A pooled or oversized node whose memory other nodes show
// (its owner is a shared) only drops its reference: the last holder
// pools it.
func freeNode(n *node) {
	n.r, n.w, n.off, n.next = 0, 0, 0, nil
	if n.owner != nil && n.class != classRef {
		n.owner.Release()
		return
	}
	switch n.class {
	case classRef, classUnpooled:
		o := n.owner
		// Drop the references so the pool does not pin caller or
		// oversized memory.
		n.buf, n.owner = nil, nil
		structPool.Put(n)
		if o != nil {
			o.Release()
		}
	default:
		// Under the ringpoison tag, a slice still read after its node
		// went back shows the pattern at once, not the next user's bytes.
		poison.Fill(n.buf)
		classPools[n.class].Put(n)
	}
}
