package buf

import (
	"bytes"
	"testing"
)

// editBuffer builds "head" (pooled), "ref!" (a ref with owner o) and
// "tail" (pooled, with free area) and consumes skip bytes.
func editBuffer(o Owner, skip int) *LinkBuffer {
	b := New()
	commitNodes(b, "head")
	b.AppendRef([]byte("ref!"), o)
	commitNodes(b, "tail")
	b.Skip(skip)
	return b
}

// TestTruncate: Truncate keeps the first n readable bytes; nodes wholly
// past them are freed (a ref's owner released); the node the cut falls in
// gives its cut bytes back as free area if it owns them, and a ref node
// never does.
func TestTruncate(t *testing.T) {
	tests := []struct {
		name     string
		skip     int
		n        int
		want     string
		refGone  bool // the ref node was freed
		reusable bool // the next WriteSpace continues in the cut node
	}{
		{"keep all", 0, 12, "headref!tail", false, true},
		{"inside tail", 0, 10, "headref!ta", false, true},
		{"at the ref's end", 0, 8, "headref!", false, false},
		{"inside the ref", 0, 6, "headre", false, false},
		{"at the ref's start", 0, 4, "head", true, true},
		{"inside head", 0, 2, "he", true, true},
		{"nothing, after a skip", 5, 0, "", false, false},
		{"nothing", 0, 0, "", true, true},
		{"after a skip", 2, 3, "adr", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o retireCounter
			b := editBuffer(&o, tc.skip)
			b.Truncate(tc.n)
			if got := contents(b); got != tc.want || b.Len() != tc.n {
				t.Fatalf("after Truncate(%d): %q Len %d, want %q", tc.n, got, b.Len(), tc.want)
			}
			if want := tc.skip + tc.n; b.Held() != want {
				t.Fatalf("Held %d, want %d (consumed bytes stay held)", b.Held(), want)
			}
			if (o.released == 1) != tc.refGone {
				t.Fatalf("ref owner heard %+v, want freed %v", o, tc.refGone)
			}
			// Writing on continues the kept bytes, in the cut node's free
			// area only if it owns that memory.
			cut := b.tail
			sp := b.WriteSpace(1)
			same := cap(cut.buf) > cut.w && &sp[0] == &cut.buf[:cut.w+1][cut.w]
			if same != tc.reusable || (same && cut.class == classRef) {
				t.Fatalf("WriteSpace in the cut node: %v, want %v", same, tc.reusable)
			}
			b.Commit(copy(sp, "XY"))
			if got := contents(b); got != tc.want+"XY" {
				t.Fatalf("after writing on: %q, want %q", got, tc.want+"XY")
			}
			b.Discard()
			if o.released != 1 {
				t.Fatalf("ref owner released %d times, want once", o.released)
			}
		})
	}
}

// TestInsertRef: InsertRef puts a reference before the last remain bytes,
// at a node boundary or by splitting a node into views; the bytes of p
// are not copied, and a writer filling its old WriteSpace slice after the
// insertion point writes after p.
func TestInsertRef(t *testing.T) {
	tests := []struct {
		name   string
		skip   int
		remain int
		want   string
	}{
		{"at the end", 0, 0, "headref!tail<P>"},
		{"before the tail", 0, 4, "headref!<P>tail"},
		{"inside the tail", 0, 2, "headref!ta<P>il"},
		{"inside the ref", 0, 6, "headre<P>f!tail"},
		{"at the start", 0, 12, "<P>headref!tail"},
		{"inside head", 0, 11, "h<P>eadref!tail"},
		{"at the start after a skip", 3, 9, "<P>dref!tail"},
		{"inside after a skip", 1, 10, "e<P>adref!tail"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o, po retireCounter
			b := editBuffer(&o, tc.skip)
			p := []byte("<P>")
			b.InsertRef(p, tc.remain, &po)
			if got := contents(b); got != tc.want {
				t.Fatalf("after InsertRef: %q, want %q", got, tc.want)
			}
			if b.Len() != len(tc.want) || b.Held() != tc.skip+len(tc.want) {
				t.Fatalf("Len %d Held %d, want %d and %d", b.Len(), b.Held(), len(tc.want), tc.skip+len(tc.want))
			}
			var found bool
			for _, c := range b.Slices(nil, 16) {
				found = found || (string(c) == "<P>" && &c[0] == &p[0])
			}
			if !found {
				t.Fatal("p was copied or split")
			}
			// Consume in two halves, releasing in between: every owner
			// hears once, after its bytes were consumed.
			half := b.Len() / 2
			got := string(b.Next(half))
			b.Release()
			got += string(b.Next(b.Len()))
			b.Release()
			b.Shrink()
			if got != tc.want || o.released != 1 || po.released != 1 || b.Held() != 0 {
				t.Fatalf("read %q, owners %+v %+v, Held %d", got, o, po, b.Held())
			}
		})
	}
}

// TestInsertRefMalloc is netpoll's WriteDirect pattern: space for two
// parts taken at once, p inserted between them, the second part filled
// only afterwards through the slice taken before.
func TestInsertRefMalloc(t *testing.T) {
	b := New()
	sp := b.WriteSpace(8)[:8]
	b.Commit(8)
	copy(sp, "AAAA")
	b.InsertRef([]byte("-body-"), 4, nil)
	copy(sp[4:], "BBBB")
	if got := contents(b); got != "AAAA-body-BBBB" {
		t.Fatalf("contents %q, want AAAA-body-BBBB", got)
	}
	// The part after p is the original node, which goes on taking bytes.
	b.Commit(copy(b.WriteSpace(1), "++"))
	if got := string(b.Next(b.Len())); got != "AAAA-body-BBBB++" {
		t.Fatalf("after more writes: %q", got)
	}
	b.Release()
	b.Shrink()
	if b.Held() != 0 || b.head != nil {
		t.Fatalf("after Release and Shrink: Held %d", b.Held())
	}
}

// TestTruncateAfterSplit: cutting a split node's front view frees its
// back, and the memory the view still shows is not given back to the
// pool until the view goes too.
func TestTruncateAfterSplit(t *testing.T) {
	b := New()
	sp := b.WriteSpace(8)[:8]
	b.Commit(8)
	copy(sp, "AAAABBBB")
	b.InsertRef([]byte("p"), 4, nil)
	b.Truncate(2) // inside the front view: p and the back are freed
	got := b.Next(2)
	poolReuse()
	if string(got) != "AA" || b.Len() != 0 {
		t.Fatalf("after Truncate: %q, Len %d", got, b.Len())
	}
	// The front view shows memory it does not own: no free area.
	if p := b.WriteSpace(1); &p[0] == &sp[2] {
		t.Fatal("WriteSpace handed out memory of the cut view")
	}
	b.Commit(0)
	b.Discard()
}

// TestConcat: Concat moves src's nodes as they are, references included
// (their owners hear once b frees them), frees src's drained nodes and
// leaves src empty and usable.
func TestConcat(t *testing.T) {
	dst := New()
	commitNodes(dst, "dst:")
	src := New()
	var drained, ref retireCounter
	src.AppendRef([]byte("gone"), &drained)
	commitNodes(src, "xxkept")
	src.AppendRef([]byte("-ref-"), &ref)
	sp := src.WriteSpace(1)
	src.Commit(copy(sp, "tail"))
	src.Skip(6) // "gone" and "xx"
	kept := src.read
	dst.Concat(src)
	if drained.released != 1 || ref.released != 0 {
		t.Fatalf("after Concat: drained ref heard %+v, linked ref %+v", drained, ref)
	}
	if src.Len() != 0 || src.Held() != 0 || src.head != nil {
		t.Fatalf("src after Concat: Len %d Held %d", src.Len(), src.Held())
	}
	if got := contents(dst); got != "dst:kept-ref-tail" {
		t.Fatalf("dst holds %q", got)
	}
	if dst.head.next != kept || &dst.tail.buf[0] != &sp[0] {
		t.Fatal("Concat copied nodes instead of moving them")
	}
	// The consumed "xx" moved with its node: held until dst frees it.
	if dst.Held() != dst.Len()+2 {
		t.Fatalf("dst Held %d, want Len+2 = %d", dst.Held(), dst.Len()+2)
	}
	// dst writes on in the moved tail.
	dst.Commit(copy(dst.WriteSpace(1), "!"))
	got := string(dst.Next(dst.Len()))
	dst.Release()
	dst.Shrink()
	if got != "dst:kept-ref-tail!" || ref.released != 1 || dst.Held() != 0 {
		t.Fatalf("read %q, ref heard %+v, Held %d", got, ref, dst.Held())
	}
	src.Append([]byte("again"))
	if !bytes.Equal(src.Next(5), []byte("again")) {
		t.Fatal("src unusable after Concat")
	}
}

// TestEditPanics: out-of-range counts panic, as Next's do.
func TestEditPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func(b *LinkBuffer)
	}{
		{"Truncate negative", func(b *LinkBuffer) { b.Truncate(-1) }},
		{"Truncate past Len", func(b *LinkBuffer) { b.Truncate(4) }},
		{"InsertRef negative", func(b *LinkBuffer) { b.InsertRef([]byte("x"), -1, nil) }},
		{"InsertRef past Len", func(b *LinkBuffer) { b.InsertRef([]byte("x"), 4, nil) }},
		{"Share past Len", func(b *LinkBuffer) { b.Share(New(), 4) }},
		{"Share into itself", func(b *LinkBuffer) { b.Share(b, 1) }},
		{"Concat onto itself", func(b *LinkBuffer) { b.Concat(b) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			b.Append([]byte("abc"))
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.f(b)
		})
	}
}
