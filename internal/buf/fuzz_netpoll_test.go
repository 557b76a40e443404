package buf

import (
	"bytes"
	"testing"
)

// The operations FuzzLinkBuffer runs for netpoll's API: Share into slice
// buffers read and freed on their own, Truncate, InsertRef and Concat.

// fuzzSlice is a buffer Share filled: its readable bytes and the Next
// results it must keep intact until its Release.
type fuzzSlice struct {
	b     *LinkBuffer
	data  []byte
	nexts [][2][]byte
}

// share moves up to n bytes of b into a new slice buffer (at most four
// are outstanding) and checks that they are the model's.
func (m *fuzzModel) share(r *opReader) {
	n := r.u24() % (len(m.data) + 1)
	if len(m.slices) >= 4 {
		return
	}
	dst := New()
	m.b.Share(dst, n)
	want := bytes.Clone(m.consume(n))
	if dst.Len() != n || !bytes.Equal(dst.Peek(n), want) {
		m.t.Fatalf("Share(%d) mismatch", n)
	}
	m.slices = append(m.slices, &fuzzSlice{b: dst, data: want})
}

// sliceStep reads, releases or drops one of the slice buffers.
func (m *fuzzModel) sliceStep(r *opReader) {
	op, pick, n := r.byte(), r.byte(), r.u24()
	if len(m.slices) == 0 {
		return
	}
	i := pick % len(m.slices)
	s := m.slices[i]
	switch op % 4 {
	case 0: // Next
		n %= len(s.data) + 1
		got, want := s.b.Next(n), s.data[:n]
		if !bytes.Equal(got, want) {
			m.t.Fatalf("slice %d: Next(%d) mismatch", i, n)
		}
		s.nexts = append(s.nexts, [2][]byte{got, want})
		s.data = s.data[n:]
	case 1: // Release
		s.checkNexts(m.t)
		s.b.Release()
		s.nexts = s.nexts[:0]
	case 2, 3: // Discard or Abandon, then forget it
		s.checkNexts(m.t)
		if op%4 == 2 {
			s.b.Discard()
		} else {
			s.b.Abandon()
		}
		m.slices = append(m.slices[:i], m.slices[i+1:]...)
	}
}

func (s *fuzzSlice) checkNexts(t *testing.T) {
	for j, x := range s.nexts {
		if !bytes.Equal(x[0], x[1]) {
			t.Fatalf("a slice buffer's Next result %d changed before its Release", j)
		}
	}
}

// dropSlices discards every slice buffer, checking their Next results
// first.
func (m *fuzzModel) dropSlices() {
	for _, s := range m.slices {
		s.checkNexts(m.t)
		s.b.Discard()
	}
	m.slices = nil
}

// truncate keeps the first n readable bytes. The stream goes on from the
// cut, and referenced blocks past it are cut short or wholly.
func (m *fuzzModel) truncate(n int) {
	m.data = m.data[:n]
	m.written = m.consumed + n
	for id, rs := range m.refs {
		var kept [][2]int
		for _, x := range rs {
			if x[1] = min(x[1], m.written); x[0] < x[1] {
				kept = append(kept, x)
			}
		}
		m.refs[id] = kept
	}
	m.b.Truncate(n) // after the model: it frees the blocks it cuts
}

// insertRef inserts a referenced block before the last remain readable
// bytes, shifting the blocks after the point.
func (m *fuzzModel) insertRef(r *opReader) {
	n, remain := r.u16()%20000, r.u24()%(len(m.data)+1)
	at := m.consumed + len(m.data) - remain
	for id, rs := range m.refs {
		var moved [][2]int
		for _, x := range rs {
			switch {
			case x[1] <= at:
				moved = append(moved, x)
			case x[0] >= at:
				moved = append(moved, [2]int{x[0] + n, x[1] + n})
			default: // split around the inserted block
				moved = append(moved, [2]int{x[0], at}, [2]int{at + n, x[1] + n})
			}
		}
		m.refs[id] = moved
	}
	p := pattern(m.written+7, n) // any content: the model holds it
	m.written += n
	k := len(m.data) - remain
	m.data = append(m.data[:k:k], append(bytes.Clone(p), m.data[k:]...)...)
	m.b.InsertRef(p, remain, m.newRef(at, n))
}

// concat fills a second buffer as splice does, but with owners the model
// tracks, and moves it onto b with Concat: references stay linked, and
// their owners hear only once b's reader consumed them.
func (m *fuzzModel) concat(r *opReader) {
	var sizes, kinds []int
	total := 0
	for k := r.byte() % 5; k >= 0; k-- {
		sizes = append(sizes, r.u16()%9000)
		kinds = append(kinds, r.byte()%3)
		total += sizes[len(sizes)-1]
	}
	skip := 0
	if r.byte()%2 == 0 {
		skip = r.u16() % (total + 1)
	}
	base := m.written // stream offset of all[skip]
	all := append(bytes.Repeat([]byte{0xCD}, skip), m.produce(total-skip)...)
	src := New()
	off := 0
	for i, n := range sizes {
		p := all[off : off+n]
		switch kinds[i] {
		case 0:
			src.Append(p)
		case 1:
			// The stream holds only the part past the skipped prefix.
			start := max(off, skip)
			o := m.newRef(base+start-skip, max(0, off+n-start))
			o.n = n
			src.AppendRef(bytes.Clone(p), o)
		case 2:
			copy(src.WriteSpace(n), p)
			src.Commit(n)
		}
		off += n
	}
	src.Skip(skip)
	m.b.Concat(src)
	if src.Len() != 0 || src.Held() != 0 {
		m.t.Fatalf("after Concat: src Len %d Held %d", src.Len(), src.Held())
	}
	if !bytes.Equal(m.b.Peek(m.b.Len()), m.data) {
		m.t.Fatal("Concat: contents differ from the model")
	}
}
