package buf

import (
	"strings"
	"testing"
)

// poolReuse takes and fills pooled nodes of every class, so that a node
// wrongly given back to its pool while a view still shows it is
// overwritten.
func poolReuse() {
	for range 64 {
		x := New()
		for _, size := range classSizes {
			p := x.WriteSpace(size)
			for i := range p {
				p[i] = 'z'
			}
			x.Commit(len(p))
		}
		x.Discard()
	}
}

// TestShare: Share moves bytes into another buffer as views of the same
// memory, across node boundaries, from pooled and ref nodes; the source
// reads on where the shared bytes ended; a ref's owner hears exactly once,
// and only after both buffers freed their nodes, in either order.
func TestShare(t *testing.T) {
	tests := []struct {
		name     string
		skip     int  // consumed from the source first
		n        int  // shared
		dstFirst bool // the destination frees first
	}{
		// Source: "ref1" (ref), "pooled" (pooled), "ref2" (ref), "tail" (pooled).
		{"inside a ref", 1, 2, false},
		{"whole ref", 0, 4, false},
		{"ref into pooled", 2, 5, true},
		{"across all", 0, 18, false},
		{"across all, view freed first", 0, 18, true},
		{"from pooled to the end", 6, 12, true},
		{"nothing", 3, 0, false},
	}
	const all = "ref1pooledref2tail"
	overlaps := func(from, to, lo, hi int) bool { return from < to && from < hi && to > lo }
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			var o1, o2 retireCounter
			b.AppendRef([]byte("ref1"), &o1)
			commitNodes(b, "pooled")
			b.AppendRef([]byte("ref2"), &o2)
			commitNodes(b, "tail")
			b.Skip(tc.skip)
			dst := New()
			owned := b.Share(dst, tc.n)
			from, to := tc.skip, tc.skip+tc.n
			want := all[from:to]
			shown := 0 // refs the view shows
			for _, r := range [][2]int{{0, 4}, {10, 14}} {
				if overlaps(from, to, r[0], r[1]) {
					shown++
				}
			}
			if got := contents(dst); got != want || owned != (shown > 0) {
				t.Fatalf("dst holds %q owned %v, want %q owned %v", got, owned, want, shown > 0)
			}
			if dst.Len() != tc.n || dst.Held() != tc.n {
				t.Fatalf("dst Len %d Held %d, want %d", dst.Len(), dst.Held(), tc.n)
			}
			if got := contents(b); got != all[to:] {
				t.Fatalf("source reads %q, want %q", got, all[to:])
			}
			// Views show the source's memory: no copy.
			for _, p := range dst.Slices(nil, 8) {
				if !aliasesNodes(p, b) {
					t.Fatalf("dst chunk %q is not a view of the source", p)
				}
			}
			held := dst.Peek(dst.Len())
			first, second := b, dst
			if tc.dstFirst {
				first, second = dst, b
			}
			first.Skip(first.Len())
			first.Release()
			first.Shrink()
			poolReuse()
			// A ref waits for both buffers; one only the source shows
			// goes once the source freed it.
			wantHeard := 0
			if first == b {
				wantHeard = 2 - shown
				if string(held) != want {
					t.Fatalf("the view's bytes changed to %q once the source freed them", held)
				}
			}
			if heard := o1.released + o2.released; heard != wantHeard {
				t.Fatalf("owners released %d times after one side freed, want %d", heard, wantHeard)
			}
			second.Discard()
			first.Discard()
			if o1 != (retireCounter{released: 1}) || o2 != (retireCounter{released: 1}) {
				t.Fatalf("owners heard %+v and %+v, want one Release each", o1, o2)
			}
		})
	}
}

// aliasesNodes reports whether p points into memory of a node that b
// links now or linked when the test built it (b's nodes may be freed by
// then, so the test keeps b intact until it checks).
func aliasesNodes(p []byte, b *LinkBuffer) bool {
	var mem [][]byte
	for n := b.head; n != nil; n = n.next {
		mem = append(mem, n.buf[:cap(n.buf)])
	}
	return aliases(p, mem)
}

// TestShareAbandon: a view outlives its source being abandoned (a closed
// connection) and the other way round; the memory is then retired, never
// reused: a ref's owner hears Retire once, and a pooled node is not given
// back to its pool.
func TestShareAbandon(t *testing.T) {
	for _, abandonDst := range []bool{false, true} {
		name := "source abandoned"
		if abandonDst {
			name = "view abandoned"
		}
		t.Run(name, func(t *testing.T) {
			b := New()
			var o retireCounter
			b.AppendRef([]byte("refbytes"), &o)
			commitNodes(b, "pooled")
			dst := New()
			b.Share(dst, 11) // all of the ref, "poo" of the pooled node
			got := dst.Next(11)
			if abandonDst {
				dst.Abandon()
				b.Skip(b.Len())
				b.Release()
				b.Shrink()
			} else {
				b.Abandon()
				dst.Release()
			}
			if o != (retireCounter{retired: 1}) {
				t.Fatalf("owner heard %+v, want one Retire", o)
			}
			poolReuse()
			if string(got) != "refbytespoo" {
				t.Fatalf("a slice of abandoned shared memory reads %q", got)
			}
		})
	}
}

// TestShareAgain: a view can be shared again (a Slice of a Slice), and the
// memory waits for all three buffers.
func TestShareAgain(t *testing.T) {
	b := New()
	var o retireCounter
	b.AppendRef([]byte("0123456789"), &o)
	mid, last := New(), New()
	b.Share(mid, 8)
	b.Release()
	mid.Skip(2)
	if !mid.Share(last, 4) {
		t.Fatal("sharing a view of a ref did not report an owner")
	}
	mid.Release()
	if got := contents(last); got != "2345" {
		t.Fatalf("second share holds %q", got)
	}
	for i, x := range []*LinkBuffer{b, mid, last} {
		if o.released != 0 {
			t.Fatalf("owner released before buffer %d freed", i)
		}
		x.Skip(x.Len())
		x.Release()
		x.Shrink()
	}
	if o != (retireCounter{released: 1}) {
		t.Fatalf("owner heard %+v, want one Release", o)
	}
}

// TestShareTail: sharing bytes of the tail node leaves its free area to
// the producer, and the producer's later bytes are the source's, not the
// view's.
func TestShareTail(t *testing.T) {
	b := New()
	sp := b.WriteSpace(1)
	b.Commit(copy(sp, "abcdef"))
	dst := New()
	b.Share(dst, 4)
	b.Commit(copy(b.WriteSpace(1), "gh"))
	if got, rest := contents(dst), contents(b); got != "abcd" || rest != "efgh" {
		t.Fatalf("view %q, source %q; want abcd and efgh", got, rest)
	}
	if b.head != b.tail || &b.tail.buf[0] != &sp[0] {
		t.Fatal("the producer did not go on in the shared tail node")
	}
	b.Discard()
	if got := strings.Clone(contents(dst)); got != "abcd" {
		t.Fatalf("view after the source's Discard: %q", got)
	}
	dst.Discard()
}

// scratchReuse takes and fills pooled scratch nodes of every size, so that
// one wrongly given back while output still shows it is overwritten.
func scratchReuse() {
	for range 8 {
		for _, size := range scratchSizes {
			n := newScratchNode(size)
			for i := range n.buf {
				n.buf[i] = 'z'
			}
			freeNode(n)
		}
	}
}

// TestAdoptRefs: a Writer's slice of the input's own memory (Next's copy
// across nodes, or a pooled input node) gets a reference to it, so Splice
// moves it without a copy; the memory outlives whichever buffer frees it
// first, also when the input is abandoned. Slices under the minimum, and
// memory the input does not own, are left alone and copied.
func TestAdoptRefs(t *testing.T) {
	const node = 64 << 10
	tests := []struct {
		name      string
		skip, n   int  // consumed first, then taken with Next
		min       int  // AdoptRefs' minimum
		adopted   bool // Splice moves the slice
		outFirst  bool // the output frees first
		abandoned bool // the input is abandoned, not released
	}{
		{name: "copy across nodes", skip: 1000, n: 100 << 10, min: 8 << 10, adopted: true},
		{name: "copy across nodes, output first", skip: 1000, n: 100 << 10, min: 8 << 10, adopted: true, outFirst: true},
		{name: "copy across nodes, abandoned", skip: 1000, n: 100 << 10, min: 8 << 10, adopted: true, abandoned: true},
		{name: "inside a pooled node", skip: 1000, n: 20 << 10, min: 8 << 10, adopted: true},
		{name: "inside a pooled node, output first", skip: 1000, n: 20 << 10, min: 8 << 10, adopted: true, outFirst: true},
		{name: "under the minimum", skip: 1000, n: 4 << 10, min: 8 << 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := New()
			in.Append(pattern(0, 2*node))
			in.Skip(tc.skip)
			p := in.Next(tc.n)
			want := string(pattern(0, 2*node)[tc.skip : tc.skip+tc.n])
			w := New()
			w.AppendRef(p, nil) // as Writer.WriteBinary links it
			w.AdoptRefs(in, tc.min)
			out := New()
			out.Splice(w)
			moved := out.head != nil && &out.head.buf[0] == &p[0]
			if moved != tc.adopted {
				t.Fatalf("Splice moved the slice: %v, want %v", moved, tc.adopted)
			}
			freeIn := func() {
				if tc.abandoned {
					in.Abandon()
				} else {
					in.Release()
					in.Discard()
				}
			}
			if !tc.outFirst {
				freeIn()
				poolReuse()
				scratchReuse()
			}
			if got := string(out.Next(out.Len())); got != want {
				t.Fatalf("output changed after the input freed its memory (first difference at %d)", firstDiff(got, want))
			}
			out.Release()
			if tc.outFirst {
				if got := string(p); got != want {
					t.Fatal("the input's slice changed after the output freed its view")
				}
				freeIn()
			}
		})
	}
	t.Run("memory the input does not own", func(t *testing.T) {
		in := New()
		in.Append(pattern(0, node))
		in.Skip(100)
		other := pattern(7, 16<<10)
		w := New()
		w.AppendRef(other, nil)
		w.AdoptRefs(in, 1)
		if w.head.owner != nil {
			t.Fatal("a slice of other memory was adopted")
		}
		w.Discard()
		in.Discard()
	})
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
