package buf

import (
	"bytes"
	"testing"
)

// opReader decodes fuzz input; it yields zeros once the input runs out.
type opReader struct{ data []byte }

func (r *opReader) byte() int {
	if len(r.data) == 0 {
		return 0
	}
	c := r.data[0]
	r.data = r.data[1:]
	return int(c)
}

func (r *opReader) u16() int { return r.byte() | r.byte()<<8 }
func (r *opReader) u24() int { return r.u16() | r.byte()<<16 }

// fuzzModel holds the reference state a LinkBuffer is checked against.
type fuzzModel struct {
	t        *testing.T
	b        *LinkBuffer
	data     []byte // readable bytes
	written  int    // stream offset of the next byte written (drives content)
	consumed int    // stream offset of the next byte read
	// nexts are Next results with their expected content: they must stay
	// intact until Release, even while the producer writes new data.
	nexts [][2][]byte
	// refs holds, per referenced block (by id), the stream offset ranges
	// its bytes span: its owner may hear only once the model consumed up
	// to the end of the last one. InsertRef shifts the ranges after its
	// point and splits the one it falls in; Truncate cuts them (a block
	// with no range left may go at once).
	refs     [][][2]int
	released []int // release calls per referenced block
	retired  []int // retire calls per referenced block
	discard  bool  // inside Discard: releasing unconsumed refs is allowed
	// kept are Next results from before an Abandon: they must stay intact
	// for ever, whatever the buffer does afterwards.
	kept [][2][]byte
	// slices are buffers that Share filled from b, read and released on
	// their own.
	slices []*fuzzSlice
}

// fuzzOps is the number of operations step chooses from.
const fuzzOps = 23

// fuzzOwner is the owner of the model's id'th AppendRef'd block.
type fuzzOwner struct {
	m  *fuzzModel
	id int
	n  int
}

func (o fuzzOwner) Release() {
	m, id := o.m, o.id
	m.released[id]++
	if m.released[id]+m.retired[id] > 1 {
		m.t.Fatalf("ref %d released after its owner already heard of it", id)
	}
	// An empty block is released at once; others only once consumed (or
	// discarded).
	if o.n > 0 && !m.discard && m.consumed < m.refLimit(id) {
		m.t.Fatalf("ref %d released before being consumed", id)
	}
}

func (o fuzzOwner) Retire() {
	o.m.retired[o.id]++
	if o.m.released[o.id]+o.m.retired[o.id] > 1 {
		o.m.t.Fatalf("ref %d retired after its owner already heard of it", o.id)
	}
}

// maxModel bounds the readable data so a long input cannot exhaust memory.
const maxModel = 1 << 20

func (m *fuzzModel) produce(n int) []byte {
	p := pattern(m.written, n)
	m.written += n
	m.data = append(m.data, p...)
	return p
}

func (m *fuzzModel) consume(n int) []byte {
	p := m.data[:n]
	m.data = m.data[n:]
	m.consumed += n
	return p
}

func (m *fuzzModel) step(r *opReader) {
	t, b := m.t, m.b
	op := r.byte()
	full := len(m.data) > maxModel
	switch op % fuzzOps {
	case 0: // small Append
		if n := r.byte(); !full {
			b.Append(m.produce(n))
		}
	case 1: // large Append
		if n := r.u24() % 100001; !full {
			b.Append(m.produce(n))
		}
	case 2, 3: // WriteSpace+Commit, case 3 asks twice first
		minSize, n := r.u24()%70001, r.u24()
		if full {
			return
		}
		sp := b.WriteSpace(minSize)
		if op%fuzzOps == 3 {
			minSize = r.u16()
			sp = b.WriteSpace(minSize)
		}
		if len(sp) < max(minSize, 1) {
			t.Fatalf("WriteSpace(%d) returned %d bytes", minSize, len(sp))
		}
		// Scribble over the whole slice: if it overlapped readable or
		// not-yet-released bytes, the checks would catch it.
		for i := range sp {
			sp[i] = 0xEE
		}
		n %= len(sp) + 1
		copy(sp, m.produce(n))
		b.Commit(n)
	case 4: // AppendRef
		n := r.u16() % 20000
		if full {
			return
		}
		b.AppendRef(m.produce(n), m.newRef(m.written-n, n))
	case 5: // Next
		n := r.u24() % (len(m.data) + 1)
		got, want := b.Next(n), m.consume(n)
		if !bytes.Equal(got, want) {
			t.Fatalf("Next(%d) mismatch", n)
		}
		m.nexts = append(m.nexts, [2][]byte{got, bytes.Clone(want)})
	case 6: // Peek
		n := r.u24() % (len(m.data) + 1)
		if !bytes.Equal(b.Peek(n), m.data[:n]) {
			t.Fatalf("Peek(%d) mismatch", n)
		}
	case 7: // Skip
		b.Skip(r.u24() % (len(m.data) + 1))
		m.consume(len(m.data) - b.Len())
	case 8: // IndexByte
		c := byte(r.byte())
		if got, want := b.IndexByte(c), bytes.IndexByte(m.data, c); got != want {
			t.Fatalf("IndexByte(%d) = %d, want %d", c, got, want)
		}
	case 9: // ReadInto
		p := make([]byte, r.u24()%70000)
		n := b.ReadInto(p)
		if want := m.consume(min(len(p), len(m.data))); !bytes.Equal(p[:n], want) {
			t.Fatalf("ReadInto(%d) = %d bytes, mismatch", len(p), n)
		}
	case 10: // Release, or ReleaseRead
		m.checkNexts()
		if r.byte()&1 == 0 {
			b.Release()
		} else {
			held := b.Held()
			b.ReleaseRead()
			if h := b.head; h != nil && h.off != h.r {
				t.Fatalf("ReleaseRead left %d consumed bytes of the read node in Held", h.r-h.off)
			}
			if b.Held() > held {
				t.Fatalf("ReleaseRead raised Held from %d to %d", held, b.Held())
			}
		}
		m.nexts = m.nexts[:0]
		if b.Len() == 0 && b.Held() != 0 {
			t.Fatalf("Release with nothing readable left Held %d", b.Held())
		}
	case 11: // Slices
		limit := r.byte() % 8
		s := b.Slices(nil, limit)
		if len(s) > limit {
			t.Fatalf("Slices(%d) returned %d chunks", limit, len(s))
		}
		joined := bytes.Join(s, nil)
		for _, c := range s {
			if len(c) == 0 {
				t.Fatal("Slices returned an empty chunk")
			}
		}
		if !bytes.HasPrefix(m.data, joined) || (len(s) < limit && len(joined) != len(m.data)) {
			t.Fatalf("Slices(%d) mismatch", limit)
		}
	case 12: // Discard
		m.discardAll()
	case 13:
		b.SetGrowHint(r.u24() % 100000)
	case 14: // WriteSpace then Commit(0)
		b.WriteSpace(r.u16())
		b.Commit(0)
	case 15: // Release, then Shrink
		m.checkNexts()
		b.Release()
		m.nexts = m.nexts[:0]
		b.Shrink()
		if b.Len() == 0 && b.Held() != 0 {
			t.Fatalf("Shrink with nothing readable left Held %d", b.Held())
		}
	case 16:
		if !full {
			m.splice(r)
		}
	case 17: // Abandon
		m.abandonAll()
	case 18:
		m.share(r)
	case 19:
		m.sliceStep(r)
	case 20: // Truncate
		m.truncate(r.u24() % (len(m.data) + 1))
	case 21:
		if !full {
			m.insertRef(r)
		}
	case 22:
		if !full {
			m.concat(r)
		}
	}
	if b.Len() != len(m.data) || b.Held() < b.Len() {
		t.Fatalf("op %d: Len %d Held %d, model %d", op%fuzzOps, b.Len(), b.Held(), len(m.data))
	}
	checkOwned(t, b, op%fuzzOps)
	for _, s := range m.slices {
		checkOwned(t, s.b, op%fuzzOps)
	}
}

// checkOwned fails unless b's Owned is the number of told nodes it links.
func checkOwned(t *testing.T, b *LinkBuffer, op int) {
	t.Helper()
	n := 0
	for x := b.head; x != nil; x = x.next {
		if x.told() {
			n++
		}
	}
	if b.Owned() != n {
		t.Fatalf("op %d: Owned %d, but %d told nodes are linked", op, b.Owned(), n)
	}
}

// refLimit returns the stream offset the model must have consumed before
// block id's owner may hear, or -1 if it may at any time.
func (m *fuzzModel) refLimit(id int) int {
	limit := -1
	for _, x := range m.refs[id] {
		limit = max(limit, x[1])
	}
	return limit
}

// newRef registers a referenced block of n bytes at stream offset start
// and returns its owner.
func (m *fuzzModel) newRef(start, n int) fuzzOwner {
	id := len(m.refs)
	var rs [][2]int
	if n > 0 {
		rs = append(rs, [2]int{start, start + n})
	}
	m.refs = append(m.refs, rs)
	m.released = append(m.released, 0)
	m.retired = append(m.retired, 0)
	return fuzzOwner{m, id, n}
}

// splice fills a second buffer (copies, references, WriteSpace, maybe a
// consumed prefix), splices it into b and checks that its bytes, and only
// those, moved: src ends empty, references are released exactly once. The
// bytes that reach b continue the model's stream; the skipped prefix is
// filler outside it.
func (m *fuzzModel) splice(r *opReader) {
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
	all := append(bytes.Repeat([]byte{0xAB}, skip), m.produce(total-skip)...)
	src := New()
	refs, released := 0, 0
	for i, n := range sizes {
		p := all[:n]
		all = all[n:]
		switch kinds[i] {
		case 0:
			src.Append(p)
		case 1:
			refs++
			src.AppendRef(bytes.Clone(p), releaseFunc(func() { released++ }))
		case 2:
			copy(src.WriteSpace(n), p)
			src.Commit(n)
		}
	}
	src.Skip(skip)
	m.b.Splice(src)
	m.b.Splice(src) // src is empty: a no-op
	if src.Len() != 0 || src.Held() != 0 {
		m.t.Fatalf("after Splice: src Len %d Held %d", src.Len(), src.Held())
	}
	if released != refs {
		m.t.Fatalf("Splice released %d of %d references", released, refs)
	}
	if !bytes.Equal(m.b.Peek(m.b.Len()), m.data) {
		m.t.Fatal("Splice: contents differ from the model")
	}
}

func (m *fuzzModel) checkNexts() {
	for i, x := range m.nexts {
		if !bytes.Equal(x[0], x[1]) {
			m.t.Fatalf("Next result %d changed before Release", i)
		}
	}
	for i, x := range m.kept {
		if !bytes.Equal(x[0], x[1]) {
			m.t.Fatalf("Next result %d, held across Abandon, changed", i)
		}
	}
}

// abandonAll abandons the buffer: every ref not yet released is retired,
// and slices held since the last Release stay intact from then on.
func (m *fuzzModel) abandonAll() {
	m.checkNexts()
	m.b.Abandon()
	// Slice buffers go after: what they share with b is retired once
	// they let go.
	m.dropSlices()
	m.consume(len(m.data))
	m.kept = append(m.kept, m.nexts...)
	m.nexts = m.nexts[:0]
	if m.b.Len() != 0 || m.b.Held() != 0 {
		m.t.Fatalf("after Abandon: Len %d Held %d", m.b.Len(), m.b.Held())
	}
	for id := range m.released {
		if m.released[id]+m.retired[id] != 1 {
			m.t.Fatalf("ref %d: released %d and retired %d times after Abandon", id, m.released[id], m.retired[id])
		}
	}
}

func (m *fuzzModel) discardAll() {
	m.checkNexts()
	m.discard = true
	m.b.Discard()
	m.dropSlices()
	m.discard = false
	m.consume(len(m.data))
	m.nexts = m.nexts[:0]
	if m.b.Len() != 0 || m.b.Held() != 0 {
		m.t.Fatalf("after Discard: Len %d Held %d", m.b.Len(), m.b.Held())
	}
	for id := range m.released {
		if m.released[id]+m.retired[id] != 1 {
			m.t.Fatalf("ref %d: released %d and retired %d times after Discard", id, m.released[id], m.retired[id])
		}
	}
}

func FuzzLinkBuffer(f *testing.F) {
	f.Add([]byte{0, 10, 5, 3, 0, 10, 0})
	f.Add([]byte{1, 0xa0, 0x86, 0x01, 8, 'x', 5, 0xff, 0xff, 0x00, 10, 9, 0x10, 0x27, 0})
	f.Add([]byte{2, 1, 0, 0, 0xff, 0x0f, 0, 2, 0x70, 0x11, 0x01, 0x00, 0x00, 0x01, 11, 4, 10, 12})
	f.Add([]byte{4, 0x10, 0x00, 4, 0x20, 0x00, 0, 7, 7, 0x30, 0, 0, 10, 13, 0xff, 0xff, 0, 14, 1, 0, 3, 5, 0, 0, 9, 9, 0, 0, 0})
	f.Add([]byte{13, 0x00, 0x40, 0x00, 2, 1, 0, 0, 0x00, 0x10, 0, 5, 0x00, 0x08, 0, 10, 2, 0x00, 0x30, 0, 0xff, 0xff, 0xff, 7, 0xff, 0xff, 0xff, 10, 12})
	f.Add([]byte{4, 0x10, 0x00, 0, 8, 5, 0x08, 0x00, 0x00, 17, 0, 20, 2, 0x00, 0x10, 0x00, 0xff, 0xff, 0x00, 5, 0x04, 0x00, 0x00, 10})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := &fuzzModel{t: t, b: New()}
		r := &opReader{data: data}
		for len(r.data) > 0 {
			m.step(r)
		}
		m.discardAll()
	})
}
