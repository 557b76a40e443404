package buf

import (
	"runtime/debug"
	"strings"
	"testing"
)

// commitNodes fills b through WriteSpace/Commit so that each string lands in
// a fresh pooled node (by asking for more than the tail has left).
func commitNodes(b *LinkBuffer, parts ...string) {
	for _, s := range parts {
		need := 1
		if t := b.tail; t != nil {
			need = cap(t.buf) - t.w + 1
		}
		sp := b.WriteSpace(need)
		b.Commit(copy(sp, s))
	}
}

func TestReleaseKeepsTail(t *testing.T) {
	tests := []struct {
		name      string
		parts     []string
		consume   int
		wantHeld  int // after Release
		wantRead  int // Held after ReleaseRead
		wantNodes int // linked nodes after either
	}{
		{"nothing consumed", []string{"abc", "def", "ghi"}, 0, 9, 9, 3},
		// ReleaseRead releases a kept node's consumed start too.
		{"partial head kept", []string{"abc", "def", "ghi"}, 2, 9, 7, 3},
		{"head freed", []string{"abc", "def", "ghi"}, 3, 6, 6, 2},
		{"two freed", []string{"abc", "def", "ghi"}, 7, 3, 2, 1},
		// A drained tail stays linked but counts as released.
		{"tail kept when drained", []string{"abc", "def", "ghi"}, 9, 0, 0, 1},
		{"single drained tail", []string{"abc"}, 3, 0, 0, 1},
	}
	for _, tc := range tests {
		for _, read := range []bool{false, true} {
			name, release, wantHeld := tc.name, (*LinkBuffer).Release, tc.wantHeld
			if read {
				name, release, wantHeld = tc.name+"/ReleaseRead", (*LinkBuffer).ReleaseRead, tc.wantRead
			}
			t.Run(name, func(t *testing.T) {
				b := New()
				commitNodes(b, tc.parts...)
				all := strings.Join(tc.parts, "")
				if b.Held() != len(all) {
					t.Fatalf("Held before = %d, want %d", b.Held(), len(all))
				}
				b.Skip(tc.consume)
				tail, tailW := b.tail, b.tail.w
				release(b)
				if b.Held() != wantHeld || countNodes(b) != tc.wantNodes {
					t.Fatalf("after the release: Held %d nodes %d, want %d %d", b.Held(), countNodes(b), wantHeld, tc.wantNodes)
				}
				if b.tail != tail || tail.w != tailW || b.head == nil {
					t.Fatal("Release moved, freed or rewound the tail")
				}
				// The tail keeps its free area where it was: no reset to 0.
				if sp := b.WriteSpace(1); &sp[0] != &tail.buf[tailW] {
					t.Fatal("WriteSpace after Release is not the tail's old free area")
				}
				b.Commit(0)
				if got := string(b.Next(b.Len())); got != all[tc.consume:] {
					t.Fatalf("remaining = %q, want %q", got, all[tc.consume:])
				}
				release(b)
				if b.Held() != 0 {
					t.Fatalf("Held %d once everything was consumed and released", b.Held())
				}
			})
		}
	}
}

func countNodes(b *LinkBuffer) int {
	n := 0
	for x := b.head; x != nil; x = x.next {
		n++
	}
	return n
}

func TestAppendRefRelease(t *testing.T) {
	tests := []struct {
		name    string
		consume int  // bytes consumed before the first Release
		discard bool // finish with Discard instead of consuming all
		before  int  // release calls expected after the first Release
	}{
		{"not consumed", 0, false, 0},
		{"partly consumed", 5, false, 0},
		{"consumed, tail follows", 8, false, 1},
		{"discard unconsumed", 2, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			b.Append([]byte("head"))
			calls := 0
			b.AppendRef([]byte("ref!"), releaseFunc(func() { calls++ }))
			b.Append([]byte("tail")) // a new node: the ref node is full
			if n := countNodes(b); n != 3 {
				t.Fatalf("nodes = %d, want 3", n)
			}
			b.Skip(tc.consume)
			b.Release()
			if calls != tc.before {
				t.Fatalf("release calls after first Release = %d, want %d", calls, tc.before)
			}
			if tc.discard {
				b.Discard()
			} else {
				b.Skip(b.Len())
				b.Release()
			}
			b.Release()
			b.Discard()
			if calls != 1 {
				t.Fatalf("release called %d times, want exactly 1", calls)
			}
		})
	}
}

func TestAppendRefEdgeCases(t *testing.T) {
	b := New()
	calls := 0
	b.AppendRef(nil, releaseFunc(func() { calls++ }))
	if calls != 1 || b.Len() != 0 || b.head != nil {
		t.Fatalf("empty AppendRef: calls %d len %d", calls, b.Len())
	}
	// A drained ref node is released even as the tail: it has no free area
	// a producer could be writing into, and the memory it references (an
	// io_uring provided buffer) must go home while the connection idles.
	b.AppendRef([]byte("ab"), releaseFunc(func() { calls++ }))
	b.AppendRef(nil, nil)
	sp := b.WriteSpace(1) // outstanding: lands in a new, unlinked node
	b.Skip(2)
	b.Release()
	if calls != 2 {
		t.Fatalf("drained tail ref node not released: calls %d", calls)
	}
	if b.head != nil || b.tail != nil || b.Held() != 0 {
		t.Fatalf("after releasing the only node: head %v tail %v held %d", b.head, b.tail, b.Held())
	}
	if len(sp) != 4<<10 {
		t.Fatalf("WriteSpace after AppendRef = %d bytes, want a new 4 KiB node", len(sp))
	}
	sp[0] = 'c'
	b.Commit(1) // the space stays valid and commits after the release
	if got := string(b.Next(1)); got != "c" || b.Held() != 1 {
		t.Fatalf("after Commit: %q held %d", got, b.Held())
	}
	b.Release()
}

func TestDiscardReuse(t *testing.T) {
	b := New()
	commitNodes(b, "abc", "def")
	sp := b.WriteSpace(100000) // an unlinked pending node is freed too
	_ = sp
	b.Discard()
	if b.Len() != 0 || b.Held() != 0 || b.head != nil || b.tail != nil {
		t.Fatalf("after Discard: Len %d Held %d", b.Len(), b.Held())
	}
	b.Append([]byte("again"))
	if got := string(b.Next(5)); got != "again" {
		t.Fatalf("after reuse Next = %q", got)
	}
}

func TestMisusePanics(t *testing.T) {
	tests := []struct {
		name string
		f    func(b *LinkBuffer)
	}{
		{"Next beyond Len", func(b *LinkBuffer) { b.Next(4) }},
		{"Next negative", func(b *LinkBuffer) { b.Next(-1) }},
		{"Peek beyond Len", func(b *LinkBuffer) { b.Peek(4) }},
		{"Skip beyond Len", func(b *LinkBuffer) { b.Skip(4) }},
		{"Commit without WriteSpace", func(b *LinkBuffer) { b.Commit(1) }},
		{"Commit beyond space", func(b *LinkBuffer) { b.Commit(len(b.WriteSpace(1)) + 1) }},
		{"Commit twice", func(b *LinkBuffer) { b.WriteSpace(1); b.Commit(1); b.Commit(1) }},
		{"Commit after Append", func(b *LinkBuffer) { b.WriteSpace(1); b.Append([]byte("x")); b.Commit(1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			b.Append([]byte("abc"))
			defer func() {
				r := recover()
				msg, ok := r.(string)
				if !ok || !strings.HasPrefix(msg, "buf: ") {
					t.Fatalf("recovered %v, want a buf: panic", r)
				}
			}()
			tc.f(b)
		})
	}
}

func TestZeroAllocSteadyState(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	// sync.Pool is emptied by GC; keep GC off so the pools stay warm.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	b := New()
	msg := make([]byte, 1024)
	cycle := func() {
		sp := b.WriteSpace(len(msg))
		b.Commit(copy(sp, msg))
		if p := b.Peek(len(msg)); len(p) != len(msg) {
			t.Fatal("short Peek")
		}
		b.Next(len(msg))
		b.Skip(0)
		b.Release()
	}
	// AllocsPerRun truncates its average to an integer, so each run does
	// many cycles: one allocation in 1000 cycles would still show up.
	const perRun = 1000
	cycles := func() {
		for range perRun {
			cycle()
		}
	}
	cycles()
	if avg := testing.AllocsPerRun(20, cycles); avg != 0 {
		t.Fatalf("steady state allocates %.0f times per %d cycles, want 0", avg, perRun)
	}
	b.Discard()
}

// TestShrink: Shrink frees a drained, released tail, so an idle buffer
// holds no node; it keeps a tail with unread or unreleased bytes, and one
// whose free area a WriteSpace handed out; after it the buffer works as
// before.
func TestShrink(t *testing.T) {
	b := New()
	b.Append([]byte("hello"))
	b.Shrink()
	if b.tail == nil || b.Len() != 5 {
		t.Fatal("Shrink freed a tail with unread bytes")
	}
	b.Next(5)
	b.Shrink()
	if b.tail == nil {
		t.Fatal("Shrink freed a tail whose bytes a Next slice may still use")
	}
	b.Release()
	b.Shrink()
	if b.head != nil || b.tail != nil || b.read != nil || b.Held() != 0 {
		t.Fatal("a drained, released tail was kept")
	}
	// Outstanding space in the tail: kept.
	b.Append([]byte("ab"))
	b.Next(2)
	b.Release()
	sp := b.WriteSpace(10)
	b.Shrink()
	if b.tail == nil {
		t.Fatal("Shrink freed the tail under an outstanding WriteSpace")
	}
	copy(sp, "0123456789")
	b.Commit(10)
	if got := b.Next(10); string(got) != "0123456789" {
		t.Fatalf("after a kept tail: %q", got)
	}
	b.Release()
	// Outstanding space in a new, unlinked node: the drained tail goes,
	// and Commit links the new node as the only one.
	b.Append([]byte("xy"))
	b.Next(2)
	b.Release()
	sp = b.WriteSpace(1 << 20)
	b.Shrink()
	if b.tail != nil {
		t.Fatal("the drained tail was kept though the space is in another node")
	}
	copy(sp, "zz")
	b.Commit(2)
	if got := b.Next(2); string(got) != "zz" || b.Len() != 0 {
		t.Fatalf("after Commit into a fresh node: %q, Len %d", got, b.Len())
	}
}

// TestSplice: an owned node moves over without a copy when b has no room
// for it; bytes that fit b's tail, references and partly consumed nodes
// are copied; src ends empty and usable.
func TestSplice(t *testing.T) {
	// Into an empty buffer, an owned node moves: same memory.
	dst, src := New(), New()
	commitNodes(src, "hello ")
	moved := &src.head.buf[0]
	dst.Splice(src)
	if contents(dst) != "hello " || &dst.head.buf[0] != moved {
		t.Fatalf("owned node into an empty buffer: %q, moved %v", contents(dst), &dst.head.buf[0] == moved)
	}
	if src.Len() != 0 || src.Held() != 0 || src.head != nil {
		t.Fatalf("src after Splice: Len %d Held %d", src.Len(), src.Held())
	}

	// Small bytes go into dst's tail's free area instead of a node each.
	commitNodes(src, "world")
	dst.Splice(src)
	if contents(dst) != "hello world" || dst.head != dst.tail {
		t.Fatalf("small splice into a tail with room: %q, one node %v", contents(dst), dst.head == dst.tail)
	}

	// A reference is copied and released at once; a partly consumed
	// node is copied from its unread part.
	released := 0
	ref := []byte("!ref")
	src.AppendRef(ref, releaseFunc(func() { released++ }))
	commitNodes(src, "xxtail")
	src.Next(4)   // the reference
	src.Release() // frees the consumed ref node
	src.Skip(2)   // part of the owned node
	if released != 1 {
		t.Fatalf("the consumed ref was released %d times, want 1", released)
	}
	src.AppendRef(ref, releaseFunc(func() { released++ }))
	dst.Splice(src)
	copy(ref, "????") // the caller may reuse it once Splice returned
	if got := contents(dst); got != "hello worldtail!ref" {
		t.Fatalf("after copies: %q", got)
	}
	if released != 2 {
		t.Fatalf("released %d times, want 2", released)
	}

	// src is usable after, and dst consumes and releases as usual.
	commitNodes(src, "again")
	dst.Splice(src)
	if got := string(dst.Next(dst.Len())); got != "hello worldtail!refagain" {
		t.Fatalf("final contents %q", got)
	}
	dst.Release()
	dst.Shrink()
	if dst.Held() != 0 || dst.head != nil {
		t.Fatalf("dst after Release and Shrink: Held %d", dst.Held())
	}
}

// contents returns b's readable bytes without consuming them.
func contents(b *LinkBuffer) string {
	return strings.Join(func() []string {
		var parts []string
		for _, p := range b.Slices(nil, 1<<20) {
			parts = append(parts, string(p))
		}
		return parts
	}(), "")
}

// TestRefSpare: a ref node Release frees leaves its struct as the buffer's
// spare, and the next AppendRef reuses it; every release func still runs
// exactly once, when its bytes are released, and a reused node exposes no
// free area of the new memory.
func TestRefSpare(t *testing.T) {
	b := New()
	calls := map[string]int{}
	ref := func(s string) {
		b.AppendRef([]byte(s), releaseFunc(func() { calls[s]++ }))
	}
	ref("first")
	first := b.head
	if got := string(b.Next(5)); got != "first" {
		t.Fatalf("Next = %q", got)
	}
	b.Release()
	if calls["first"] != 1 || b.spare != first || b.head != nil {
		t.Fatalf("after Release: calls %v, spare %p (want %p), head %p", calls, b.spare, first, b.head)
	}
	ref("second!")
	if b.head != first || b.spare != nil {
		t.Fatal("AppendRef did not reuse the spare node")
	}
	if sp := b.WriteSpace(1); &sp[0] == &first.buf[0] {
		t.Fatal("WriteSpace handed out the referenced memory")
	}
	b.Commit(copy(b.WriteSpace(1), "x"))
	ref("third")
	if got := string(b.Next(b.Len())); got != "second!xthird" {
		t.Fatalf("Next = %q, want %q", got, "second!xthird")
	}
	b.Release()
	if calls["second!"] != 1 || calls["third"] != 1 || calls["first"] != 1 {
		t.Fatalf("release calls %v, want each once", calls)
	}
	if b.spare == nil {
		t.Fatal("no spare kept after releasing ref nodes")
	}
	ref("fourth")
	b.Discard()
	if calls["fourth"] != 1 {
		t.Fatalf("Discard: release calls %v, want fourth once", calls)
	}
}

// releaseFunc is an Owner that calls itself on Release and must never be
// retired.
type releaseFunc func()

func (f releaseFunc) Release() { f() }
func (f releaseFunc) Retire()  { panic("buf: a released-only owner was retired") }

// retireCounter is an Owner that counts what it heard.
type retireCounter struct{ released, retired int }

func (o *retireCounter) Release() { o.released++ }
func (o *retireCounter) Retire()  { o.retired++ }

// TestAbandon: Abandon retires every ref node, consumed or not, and puts
// no pooled node back in its pool: a slice handed out before keeps its
// bytes however the pool is used afterwards.
func TestAbandon(t *testing.T) {
	b := New()
	var o1, o2 retireCounter
	b.AppendRef([]byte("ref1"), &o1)
	commitNodes(b, "pooled")
	b.AppendRef([]byte("ref2"), &o2)
	held := b.Next(4) // ref1, consumed and not released
	pooled := b.Next(6)
	b.Abandon()
	if b.Len() != 0 || b.Held() != 0 || b.head != nil || b.tail != nil {
		t.Fatalf("after Abandon: len %d held %d", b.Len(), b.Held())
	}
	if o1 != (retireCounter{retired: 1}) || o2 != (retireCounter{retired: 1}) {
		t.Fatalf("owners heard %+v and %+v, want one Retire each", o1, o2)
	}
	// Take and fill pooled nodes of every class: none may be the one the
	// held slice points into.
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
	if string(held) != "ref1" || string(pooled) != "pooled" {
		t.Fatalf("held slices read %q and %q after Abandon and pool reuse", held, pooled)
	}
	// The buffer is usable after.
	commitNodes(b, "again")
	if got := contents(b); got != "again" {
		t.Fatalf("after Abandon, contents %q", got)
	}
}

// TestScratchCopies: a Next or Peek across nodes of smallScratch bytes or
// more copies into a pooled node that the next Release frees and Abandon
// never reuses; below smallScratch and above maxScratch the copy is a heap
// slice. The copy never counts as held input.
func TestScratchCopies(t *testing.T) {
	const half = 3 << 10 // two nodes of 3 KiB: reads of up to 6 KiB span them
	tests := []struct {
		name   string
		n      int
		peek   bool
		pooled bool
	}{
		{"small next", smallScratch - 1, false, false},
		{"next", 4 << 10, false, true},
		{"peek", 4 << 10, true, true},
		{"whole", 2 * half, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			a, c := strings.Repeat("a", half), strings.Repeat("c", half)
			commitNodes(b, a, c)
			b.Skip(half - tc.n/2) // the read straddles the two nodes
			want := (a + c)[half-tc.n/2:][:tc.n]
			var p []byte
			if tc.peek {
				p = b.Peek(tc.n)
			} else {
				p = b.Next(tc.n)
			}
			if string(p) != want || cap(p) != len(p) {
				t.Fatalf("read %d bytes (cap %d), content ok %v", len(p), cap(p), string(p) == want)
			}
			scratch := b.head != nil && b.head.r == b.head.w && b.head.w == tc.n && &b.head.buf[0] == &p[0]
			if scratch != tc.pooled {
				t.Fatalf("copy in a pooled node at head: %v, want %v", scratch, tc.pooled)
			}
			if b.Held() != 2*half {
				t.Fatalf("Held %d after the copy, want %d", b.Held(), 2*half)
			}
			if tc.pooled {
				s := b.head
				b.Release()
				if b.head == s {
					t.Fatal("Release kept the scratch node")
				}
			}
			b.Discard()
		})
	}
	t.Run("above maxClass", func(t *testing.T) {
		// Pooled up to maxScratch, in the smallest scratch class that
		// holds it; a heap slice above.
		for _, n := range []int{maxClass + 1, 256 << 10, maxScratch, maxScratch + 1} {
			b := New()
			big := []byte(strings.Repeat("x", n))
			b.Append(big)
			b.Append(big)
			b.Skip(1)
			head := b.head
			p := b.Next(n)
			if len(p) != n || cap(p) != n {
				t.Fatalf("Next(%d): %d bytes, cap %d", n, len(p), cap(p))
			}
			pooled := b.head != head
			if want := n <= maxScratch; pooled != want {
				t.Fatalf("Next(%d): copy in a pooled node %v, want %v", n, pooled, want)
			}
			if pooled {
				if c := cap(b.head.buf); c < n || c >= 2*n {
					t.Fatalf("Next(%d): scratch node of %d bytes, want the smallest class that holds it", n, c)
				}
				s := b.head
				b.Release()
				if b.head == s {
					t.Fatalf("Next(%d): Release kept the scratch node", n)
				}
			}
			b.Discard()
		}
	})
	t.Run("abandoned", func(t *testing.T) {
		b := New()
		commitNodes(b, strings.Repeat("a", half), strings.Repeat("b", half))
		b.Skip(half - 1000)
		p := b.Next(2000)
		want := string(p)
		b.Abandon()
		for range 64 { // fill fresh pooled nodes: none may be p's
			x := New()
			sp := x.WriteSpace(4 << 10)
			for i := range sp {
				sp[i] = 'z'
			}
			x.Commit(len(sp))
			x.Discard()
		}
		if string(p) != want {
			t.Fatal("a scratch copy was reused after Abandon")
		}
	})
}

// countingOwner is a Counter and a Sharer that counts references: it
// starts with refs held by its creator.
type countingOwner struct{ refs, released, retired int }

func (o *countingOwner) Release()     { o.refs--; o.released++ }
func (o *countingOwner) Retire()      { o.refs--; o.retired++ }
func (o *countingOwner) Counts() bool { return true }
func (o *countingOwner) Shared() bool { return true }

// TestExtendRef: AppendRef of memory that continues the tail's, for the
// same counting owner, extends the tail and releases the new reference at
// once; other memory, another owner, an owner that does not count, or a
// drained tail get a node of their own.
func TestExtendRef(t *testing.T) {
	mem := []byte("abcdefghij")
	tests := []struct {
		name  string
		parts [][2]int // [from, to) of mem, appended in order
		other bool     // the second part has another owner
		plain bool     // the owner does not count
		drain bool     // the first part is consumed before the second
		nodes int
	}{
		{"adjacent", [][2]int{{0, 3}, {3, 7}, {7, 10}}, false, false, false, 1},
		{"gap", [][2]int{{0, 3}, {4, 7}}, false, false, false, 2},
		{"another owner", [][2]int{{0, 3}, {3, 7}}, true, false, false, 2},
		{"plain owner", [][2]int{{0, 3}, {3, 7}}, false, true, false, 2},
		{"drained tail", [][2]int{{0, 3}, {3, 7}}, false, false, true, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			o, other := &countingOwner{}, &countingOwner{}
			want := ""
			for i, p := range tc.parts {
				var owner Owner = o
				switch {
				case tc.plain:
					owner = &retireCounter{}
				case tc.other && i == 1:
					owner = other
				}
				if c, ok := owner.(*countingOwner); ok {
					c.refs++
				}
				b.AppendRef(mem[p[0]:p[1]], owner)
				if tc.drain && i == 0 {
					b.Next(b.Len())
				} else {
					want += string(mem[p[0]:p[1]])
				}
			}
			if got := countNodes(b); got != tc.nodes {
				t.Errorf("%d nodes, want %d", got, tc.nodes)
			}
			if b.tail != nil && cap(b.tail.buf) != len(b.tail.buf) {
				t.Error("the extended tail exposes a free area")
			}
			if got := string(b.Next(b.Len())); got != want {
				t.Errorf("read %q, want %q", got, want)
			}
			b.Release()
			if o.refs != 0 || other.refs != 0 || o.retired != 0 {
				t.Errorf("owners left with refs %d and %d (retired %d), want 0", o.refs, other.refs, o.retired)
			}
		})
	}
}

// TestSpliceShared: Splice moves a ref node whose owner is a Sharer, whole,
// and its owner hears Release when the destination frees it; ShareRefs
// gives owners to the ref nodes AppendRef linked without one, and leaves a
// node to be copied where share declines.
func TestSpliceShared(t *testing.T) {
	mem := []byte("shared bytes")
	src, dst := New(), New()
	src.AppendRef(mem[:6], nil)
	src.AppendRef(mem[6:], nil)
	o := &countingOwner{}
	src.ShareRefs(func(p []byte) Owner {
		if string(p) == "shared" {
			o.refs++
			return o
		}
		return nil
	})
	dst.Splice(src)
	if got := contents(dst); got != "shared bytes" {
		t.Fatalf("after Splice: %q", got)
	}
	if &dst.head.buf[0] != &mem[0] {
		t.Error("the shared node was copied, not moved")
	}
	if &dst.tail.buf[0] == &mem[6] {
		t.Error("a node share declined was moved, not copied")
	}
	if o.refs != 1 || o.released != 0 {
		t.Fatalf("before the destination freed it: refs %d released %d", o.refs, o.released)
	}
	dst.Next(dst.Len())
	dst.Release()
	if o.refs != 0 || o.released != 1 {
		t.Errorf("after the destination freed it: refs %d released %d, want 0 and 1", o.refs, o.released)
	}
}
