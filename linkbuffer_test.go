package ringpoll

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestLinkBufferNetpoll: LinkBuffer keeps netpoll's split between written
// (MallocLen) and flushed (Len) bytes, and its writing methods build what
// netpoll's would: Malloc then MallocAck, WriteDirect between the two parts
// of one Malloc, Append of another buffer (flushed and unflushed bytes,
// which leaves it empty), and linked writes.
func TestLinkBufferNetpoll(t *testing.T) {
	big := strings.Repeat("B", 5000) // linked, not copied
	tests := []struct {
		name  string
		build func(t *testing.T, b *LinkBuffer)
		want  string
	}{
		{"Malloc and MallocAck", func(t *testing.T, b *LinkBuffer) {
			p, _ := b.Malloc(8)
			copy(p, "abcde")
			if err := b.MallocAck(5); err != nil {
				t.Fatal(err)
			}
			b.WriteString("!")
		}, "abcde!"},
		{"MallocAck across writes", func(t *testing.T, b *LinkBuffer) {
			b.WriteString("head")
			b.WriteBinary([]byte(big))
			p, _ := b.Malloc(4)
			copy(p, "tail")
			b.MallocAck(4 + 10)
		}, "head" + big[:10]},
		{"WriteDirect between two parts", func(t *testing.T, b *LinkBuffer) {
			p, _ := b.Malloc(6)
			copy(p, "<<<")
			b.WriteDirect([]byte(big), 3)
			copy(p[3:], ">>>") // filled after the insertion
		}, "<<<" + big + ">>>"},
		{"WriteDirect at the end", func(t *testing.T, b *LinkBuffer) {
			b.WriteString("x")
			b.WriteDirect([]byte("yz"), 0)
		}, "xyz"},
		{"Append", func(t *testing.T, b *LinkBuffer) {
			other := NewLinkBuffer()
			other.WriteString("flushed,")
			other.Flush()
			other.WriteString("written")
			b.WriteString("mine,")
			b.Append(other)
			if other.Len() != 0 || other.MallocLen() != 0 {
				t.Fatalf("after Append the other buffer holds %d and %d bytes", other.Len(), other.MallocLen())
			}
			other.WriteString("reused")
			other.Flush()
			if s, _ := other.ReadString(6); s != "reused" {
				t.Fatalf("the appended buffer reads %q after reuse", s)
			}
		}, "mine,flushed,written"},
		{"bytes and binary", func(t *testing.T, b *LinkBuffer) {
			b.WriteByte('[')
			b.WriteBinary([]byte(big))
			b.WriteBinary([]byte("small"))
			b.WriteByte(']')
		}, "[" + big + "small]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := NewLinkBuffer()
			tc.build(t, b)
			if b.MallocLen() != len(tc.want) || b.Len() != 0 {
				t.Fatalf("before Flush: MallocLen %d Len %d, want %d and 0", b.MallocLen(), b.Len(), len(tc.want))
			}
			b.Flush()
			if b.MallocLen() != 0 || b.Len() != len(tc.want) {
				t.Fatalf("after Flush: MallocLen %d Len %d, want 0 and %d", b.MallocLen(), b.Len(), len(tc.want))
			}
			got, err := b.Next(b.Len())
			if err != nil || string(got) != tc.want {
				t.Fatalf("read %.40q (%d bytes), %v; want %.40q (%d bytes)", got, len(got), err, tc.want, len(tc.want))
			}
			b.Release()
			b.Close()
		})
	}
}

// TestLinkBufferRead: the reading methods on a standalone buffer read what
// was flushed, never block, and fail with io.EOF when asked for more;
// Slice hands over bytes without copying, and both sides read on.
func TestLinkBufferRead(t *testing.T) {
	b := NewLinkBuffer()
	b.WriteString("line one\nline two\nrest")
	if _, err := b.Next(1); err != io.EOF {
		t.Fatalf("Next before Flush: %v, want io.EOF", err)
	}
	b.Flush()
	steps := []struct {
		name string
		do   func() (string, error)
		want string
		err  error
	}{
		{"Until", func() (string, error) { p, err := b.Until('\n'); return string(p), err }, "line one\n", nil},
		{"Peek", func() (string, error) { p, err := b.Peek(4); return string(p), err }, "line", nil},
		{"Skip", func() (string, error) { return "", b.Skip(5) }, "", nil},
		{"ReadByte", func() (string, error) { c, err := b.ReadByte(); return string(c), err }, "t", nil},
		{"ReadString", func() (string, error) { return b.ReadString(3) }, "wo\n", nil},
		{"Slice", func() (string, error) {
			s, err := b.Slice(2)
			if err != nil {
				return "", err
			}
			p, err := s.Next(2)
			if _, eof := s.ReadByte(); eof != io.EOF {
				t.Errorf("reading past a Slice: %v, want io.EOF", eof)
			}
			s.Release()
			return string(p), err
		}, "re", nil},
		{"Until without delim", func() (string, error) { p, err := b.Until('\n'); return string(p), err }, "", io.EOF},
		{"Next past the end", func() (string, error) { p, err := b.Next(3); return string(p), err }, "", io.EOF},
		{"ReadBinary", func() (string, error) { p, err := b.ReadBinary(2); return string(p), err }, "st", nil},
		{"ReadByte at the end", func() (string, error) { _, err := b.ReadByte(); return "", err }, "", io.EOF},
	}
	for _, s := range steps {
		got, err := s.do()
		if got != s.want || err != s.err {
			t.Fatalf("%s: %q, %v; want %q, %v", s.name, got, err, s.want, s.err)
		}
	}
	b.Release()
	if b.Len() != 0 {
		t.Fatalf("Len %d at the end", b.Len())
	}
}

// TestSliceOfLinkBuffer: a Slice keeps its bytes after its source released
// and reused its memory, and slices of slices too.
func TestSliceOfLinkBuffer(t *testing.T) {
	b := NewLinkBuffer()
	want := bytes.Repeat([]byte("0123456789"), 1000)
	b.WriteBinary(want)
	b.Flush()
	s1, _ := b.Slice(6000)
	s2, _ := s1.Slice(3000)
	b.Release()
	b.Close()
	for range 10 { // take and fill the same pooled memory again
		x := NewLinkBuffer()
		p, _ := x.Malloc(16 << 10)
		for i := range p {
			p[i] = 'z'
		}
		x.Close()
	}
	got1, _ := s1.Next(s1.Len())
	got2, _ := s2.Next(s2.Len())
	if !bytes.Equal(got1, want[3000:6000]) || !bytes.Equal(got2, want[:3000]) {
		t.Fatal("a Slice's bytes changed once its source was released")
	}
	s1.Release()
	s2.Release()
}
