//go:build linux

package uringp

import (
	"bytes"
	"slices"
	"testing"
	"unsafe"
)

// TestStager: sends up to stageSize are gathered into distinct staging
// buffers, byte for byte; a bigger one, or one when all are in flight, is
// refused (the caller pins instead); a freed buffer is taken again.
func TestStager(t *testing.T) {
	s, err := newStager()
	if err != nil {
		t.Fatalf("newStager: %v", err)
	}
	defer s.close()

	iov := [][]byte{[]byte("head|"), bytes.Repeat([]byte{'x'}, stageSize-10), []byte("|tail")}
	want := bytes.Join(iov, nil)
	refs := map[uint16]bool{}
	var bases []uintptr
	for i := range stageCount {
		p, ref, ok := s.stage(iov)
		if !ok {
			t.Fatalf("stage %d of %d refused", i+1, stageCount)
		}
		if !bytes.Equal(p, want) {
			t.Fatalf("stage %d: staged bytes differ from the iovecs", i+1)
		}
		if ref == 0 || refs[ref] {
			t.Fatalf("stage %d: ref %d is zero or already in flight", i+1, ref)
		}
		refs[ref] = true
		bases = append(bases, uintptr(unsafe.Pointer(unsafe.SliceData(p))))
	}
	// Buffers in flight at once must not overlap.
	slices.Sort(bases)
	for i := 1; i < len(bases); i++ {
		if bases[i]-bases[i-1] < stageSize {
			t.Fatalf("staging buffers %#x and %#x overlap", bases[i-1], bases[i])
		}
	}
	if _, _, ok := s.stage([][]byte{[]byte("x")}); ok {
		t.Fatal("a send was staged with every buffer in flight")
	}
	for ref := range refs {
		s.unstage(ref)
	}
	if _, _, ok := s.stage([][]byte{make([]byte, stageSize+1)}); ok {
		t.Fatalf("a send of %d bytes was staged; the limit is %d", stageSize+1, stageSize)
	}
	p, ref, ok := s.stage([][]byte{[]byte("again")})
	if !ok || string(p) != "again" || ref == 0 {
		t.Fatalf("after unstage: %q, ref %d, ok %v", p, ref, ok)
	}
}
