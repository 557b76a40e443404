package buf

import (
	"bytes"
	"strings"
	"testing"
	"unsafe"
)

// refBuffer builds a buffer whose node boundaries are exactly the given
// chunks, using AppendRef so that nocopy results can be checked by address.
func refBuffer(chunks ...string) (*LinkBuffer, [][]byte) {
	b := New()
	mem := make([][]byte, len(chunks))
	for i, c := range chunks {
		mem[i] = []byte(c)
		b.AppendRef(mem[i], nil)
	}
	return b, mem
}

// aliases reports whether p points into one of mem.
func aliases(p []byte, mem [][]byte) bool {
	if len(p) == 0 {
		return false
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	for _, m := range mem {
		s := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
		if a >= s && a+uintptr(len(p)) <= s+uintptr(len(m)) {
			return true
		}
	}
	return false
}

func TestNextPeek(t *testing.T) {
	chunks := []string{"hello", " wor", "ld!"} // 12 bytes over 3 nodes
	tests := []struct {
		name   string
		skip   int // consumed before the call
		n      int
		want   string
		nocopy bool
	}{
		{"zero", 0, 0, "", false},
		{"within first", 0, 3, "hel", true},
		{"whole first", 0, 5, "hello", true},
		{"first into second", 3, 4, "lo w", false},
		{"after boundary", 5, 4, " wor", true},
		{"three nodes", 2, 9, "llo world", false},
		{"everything", 0, 12, "hello world!", false},
		{"last byte", 11, 1, "!", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, mem := refBuffer(chunks...)
			b.Skip(tc.skip)
			p := b.Peek(tc.n)
			if string(p) != tc.want || aliases(p, mem) != tc.nocopy {
				t.Fatalf("Peek(%d) = %q nocopy=%v, want %q nocopy=%v", tc.n, p, aliases(p, mem), tc.want, tc.nocopy)
			}
			if got := b.Len(); got != 12-tc.skip {
				t.Fatalf("Len after Peek = %d, want %d", got, 12-tc.skip)
			}
			p = b.Next(tc.n)
			if string(p) != tc.want || aliases(p, mem) != tc.nocopy {
				t.Fatalf("Next(%d) = %q nocopy=%v, want %q nocopy=%v", tc.n, p, aliases(p, mem), tc.want, tc.nocopy)
			}
			if cap(p) != len(p) {
				t.Fatalf("Next result has cap %d > len %d", cap(p), len(p))
			}
			rest := strings.Join(chunks, "")[tc.skip+tc.n:]
			if got := string(b.Next(b.Len())); got != rest {
				t.Fatalf("remaining = %q, want %q", got, rest)
			}
		})
	}
}

// TestFront checks Front: the readable bytes of the read node, in place,
// past drained nodes, and nothing once the buffer is empty.
func TestFront(t *testing.T) {
	var none *LinkBuffer
	if p := none.Front(); p != nil {
		t.Fatalf("nil buffer: Front = %q", p)
	}
	b, mem := refBuffer("hello", " wor", "ld!")
	for _, step := range []struct {
		skip int
		want string
	}{{0, "hello"}, {2, "llo"}, {3, " wor"}, {4, "ld!"}, {2, "!"}, {1, ""}} {
		b.Skip(step.skip)
		p := b.Front()
		if string(p) != step.want || (len(p) > 0 && !aliases(p, mem)) || cap(p) != len(p) {
			t.Fatalf("after skipping %d: Front = %q (cap %d), want %q in place", step.skip, p, cap(p), step.want)
		}
	}
	// A producer's bytes appended after Front do not show in it.
	c := New()
	c.Append([]byte("ab"))
	p := c.Front()
	c.Append([]byte("cd"))
	if string(p) != "ab" || c.Len() != 4 {
		t.Fatalf("Front = %q before an append, Len %d after", p, c.Len())
	}
}

func TestSkipReadInto(t *testing.T) {
	all := "abcdefghijkl"
	tests := []struct {
		name   string
		skip   int
		bufLen int
		want   string
	}{
		{"nothing", 0, 0, ""},
		{"inside node", 1, 2, "bc"},
		{"across two", 2, 4, "cdef"},
		{"across three", 3, 8, "defghijk"},
		{"more than len", 4, 100, "efghijkl"},
		{"after skip all", 12, 5, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := refBuffer("abcd", "efgh", "ijkl")
			b.Skip(tc.skip)
			p := make([]byte, tc.bufLen)
			n := b.ReadInto(p)
			if string(p[:n]) != tc.want {
				t.Fatalf("ReadInto = %q, want %q", p[:n], tc.want)
			}
			if got, want := b.Len(), len(all)-tc.skip-n; got != want {
				t.Fatalf("Len = %d, want %d", got, want)
			}
			if got := string(b.Next(b.Len())); got != all[tc.skip+n:] {
				t.Fatalf("remaining = %q, want %q", got, all[tc.skip+n:])
			}
		})
	}
}

func TestIndexByte(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		skip   int
		c      byte
		want   int
	}{
		{"empty", nil, 0, 'x', -1},
		{"first node", []string{"ab\n", "cd"}, 0, '\n', 2},
		{"second node", []string{"abc", "d\nef"}, 0, '\n', 4},
		{"third node", []string{"abc", "def", "gh\n"}, 0, '\n', 8},
		{"after skip", []string{"a\nc", "def", "g\n"}, 2, '\n', 5},
		{"skip past first", []string{"a\n", "b", "c\n"}, 2, '\n', 2},
		{"missing", []string{"abc", "def", "ghi"}, 0, '\n', -1},
		{"consumed only", []string{"\nab"}, 1, '\n', -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := refBuffer(tc.chunks...)
			b.Skip(tc.skip)
			if got := b.IndexByte(tc.c); got != tc.want {
				t.Fatalf("IndexByte = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSlices(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		skip   int
		max    int
		want   []string
	}{
		{"empty", nil, 0, 4, nil},
		{"all", []string{"ab", "cd", "ef"}, 0, 4, []string{"ab", "cd", "ef"}},
		{"max", []string{"ab", "cd", "ef"}, 0, 2, []string{"ab", "cd"}},
		{"partial head", []string{"ab", "cd", "ef"}, 1, 8, []string{"b", "cd", "ef"}},
		{"drained head", []string{"ab", "cd", "ef"}, 2, 8, []string{"cd", "ef"}},
		{"max zero", []string{"ab"}, 0, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := refBuffer(tc.chunks...)
			b.Skip(tc.skip)
			got := b.Slices(nil, tc.max)
			if len(got) != len(tc.want) {
				t.Fatalf("Slices = %q, want %q", got, tc.want)
			}
			for i := range got {
				if string(got[i]) != tc.want[i] || cap(got[i]) != len(got[i]) {
					t.Fatalf("Slices = %q, want %q (caps must equal lens)", got, tc.want)
				}
			}
			if b.Len() != len(strings.Join(tc.chunks, ""))-tc.skip {
				t.Fatalf("Slices consumed data")
			}
		})
	}
}

func TestWriteSpaceSizes(t *testing.T) {
	tests := []struct {
		name string
		hint int
		min  int
		want int
	}{
		{"smallest", 0, 1, 4 << 10},
		{"zero min", 0, 0, 4 << 10},
		{"class fit", 0, 4 << 10, 4 << 10},
		{"next class", 0, 4<<10 + 1, 8 << 10},
		{"largest class", 0, 64 << 10, 64 << 10},
		{"oversized exact", 0, 70000, 70000},
		{"hint", 20000, 1, 32 << 10},
		{"hint clamped", 1 << 20, 1, 64 << 10},
		{"hint below min", 5000, 10000, 16 << 10},
		{"oversized ignores hint", 1 << 20, 70000, 70000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			b.SetGrowHint(tc.hint)
			sp := b.WriteSpace(tc.min)
			if len(sp) != tc.want {
				t.Fatalf("len(WriteSpace(%d)) = %d, want %d", tc.min, len(sp), tc.want)
			}
			copy(sp, "xyz")
			b.Commit(3)
			if got := string(b.Peek(3)); got != "xyz" || b.Held() != 3 {
				t.Fatalf("after Commit: Peek = %q Held = %d", got, b.Held())
			}
			// The rest of the node is reused while it is large enough.
			sp2 := b.WriteSpace(1)
			if len(sp2) != tc.want-3 || &sp2[0] != &sp[3] {
				t.Fatalf("second WriteSpace: len %d, want %d in the same node", len(sp2), tc.want-3)
			}
			b.Discard()
		})
	}
}

func TestAppendSplits(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int // successive Append lengths
		want  []int // resulting chunk lengths
	}{
		{"small", []int{10}, []int{10}},
		{"fills tail", []int{10, 20}, []int{30}},
		{"large", []int{150000}, []int{65536, 65536, 18928}},
		{"tail then new", []int{4000, 200}, []int{4096, 104}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			var all []byte
			for _, n := range tc.sizes {
				p := pattern(len(all), n)
				all = append(all, p...)
				b.Append(p)
			}
			var lens []int
			for _, s := range b.Slices(nil, 100) {
				lens = append(lens, len(s))
			}
			if len(lens) != len(tc.want) {
				t.Fatalf("chunks %v, want %v", lens, tc.want)
			}
			for i := range lens {
				if lens[i] != tc.want[i] {
					t.Fatalf("chunks %v, want %v", lens, tc.want)
				}
			}
			if !bytes.Equal(b.Next(b.Len()), all) {
				t.Fatal("content mismatch")
			}
		})
	}
}

// pattern returns n bytes of deterministic content for stream offset off.
func pattern(off, n int) []byte {
	p := make([]byte, n)
	fillPattern(p, off)
	return p
}

func fillPattern(p []byte, off int) {
	for i := range p {
		x := off + i
		p[i] = byte(x ^ x>>8 ^ x>>16)
	}
}

func TestWriteSpaceTwice(t *testing.T) {
	tests := []struct {
		name     string
		prefill  int // bytes Appended first
		min1     int
		min2     int
		wantLen2 int
		same     bool // second slice starts where the first did
	}{
		{"tail reused", 10, 100, 200, 4086, true},
		{"pending reused", 4000, 200, 50, 4096, true},
		{"pending replaced", 0, 100, 10000, 16 << 10, false},
		{"tail then bigger", 10, 100, 5000, 8 << 10, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New()
			b.Append(pattern(0, tc.prefill))
			sp1 := b.WriteSpace(tc.min1)
			sp2 := b.WriteSpace(tc.min2)
			if len(sp2) != tc.wantLen2 || (&sp1[0] == &sp2[0]) != tc.same {
				t.Fatalf("second WriteSpace: len %d same %v, want %d %v", len(sp2), &sp1[0] == &sp2[0], tc.wantLen2, tc.same)
			}
			fillPattern(sp2[:3], tc.prefill)
			b.Commit(3)
			if !bytes.Equal(b.Next(b.Len()), pattern(0, tc.prefill+3)) {
				t.Fatal("content mismatch")
			}
			if b.Held() != tc.prefill+3 {
				t.Fatalf("Held = %d, want %d", b.Held(), tc.prefill+3)
			}
		})
	}
}

// TestGetPut: Put takes back only an empty buffer, with nothing linked and
// no space handed out, and a buffer Get returns is empty and usable, even
// one that had a ref node's spare struct and a grow hint.
func TestGetPut(t *testing.T) {
	var none *LinkBuffer // an FD's queue while it holds none
	if none.Len() != 0 || none.Held() != 0 {
		t.Fatalf("a nil buffer has Len %d, Held %d; want 0", none.Len(), none.Held())
	}
	b := Get()
	b.Append([]byte("reply"))
	if Put(b) {
		t.Fatal("Put took a buffer holding 5 bytes")
	}
	b.Skip(5)
	b.Release()
	b.Shrink()
	b.WriteSpace(16)
	if Put(b) {
		t.Fatal("Put took a buffer whose WriteSpace was not committed")
	}
	b.Commit(0)
	b.AppendRef([]byte("referenced"), nil)
	b.Skip(10)
	b.Release() // the ref node's struct stays as the spare
	b.SetGrowHint(1 << 16)
	if !Put(b) {
		t.Fatalf("Put refused an empty buffer: %+v", *b)
	}
	for range 3 {
		g := Get()
		if sp := g.spare; sp != nil && (sp.buf != nil || sp.r|sp.w|sp.off != 0 || sp.next != nil || sp.class != classRef || sp.owner != nil) {
			t.Fatalf("Get returned a buffer whose spare node is in use: %+v", *sp)
		}
		if g.spare = nil; *g != (LinkBuffer{}) {
			t.Fatalf("Get returned a buffer in use: %+v", *g)
		}
		g.Append([]byte("x"))
		if p := g.Next(1); string(p) != "x" {
			t.Fatalf("Next after Get = %q", p)
		}
		g.Release()
		g.Shrink()
		if !Put(g) {
			t.Fatal("Put refused a drained buffer")
		}
	}
}
