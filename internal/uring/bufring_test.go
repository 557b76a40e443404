//go:build linux

package uring

import "testing"

// TestArenaReplace: after Replace, Buf returns new memory of the same size,
// and writes to it leave the memory handed out before untouched, through
// several replacements of the same buffer.
func TestArenaReplace(t *testing.T) {
	a, err := NewArena(4, 512)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	var old [][]byte
	for round := range 3 {
		b := a.Buf(1)
		for i := range b {
			b[i] = byte('a' + round)
		}
		old = append(old, b)
		a.Replace(1)
		nb := a.Buf(1)
		if len(nb) != 512 || cap(nb) != 512 {
			t.Fatalf("round %d: replacement has len %d cap %d, want 512", round, len(nb), cap(nb))
		}
		if &nb[0] == &b[0] {
			t.Fatalf("round %d: Replace kept the same memory", round)
		}
		for i := range nb {
			nb[i] = 'z'
		}
		for r, o := range old {
			if o[0] != byte('a'+r) || o[511] != byte('a'+r) {
				t.Fatalf("round %d: memory handed out in round %d changed to %q", round, r, o[0])
			}
		}
	}
	if b := a.Buf(2); &b[0] != &a.mem[2*512] {
		t.Error("Replace(1) moved buffer 2")
	}
}
