package ringpoll

import (
	"slices"
	"testing"
)

// TestConnSet adds and removes connections across chunk edges, in an order
// that moves the last one into every kind of hole, and checks after each
// step that the set holds exactly the connections added and not removed,
// each at the place it records.
func TestConnSet(t *testing.T) {
	var s connSet
	var want []*Conn
	check := func(step string) {
		t.Helper()
		got := s.appendTo(nil)
		if s.len() != len(want) || len(got) != len(want) {
			t.Fatalf("%s: len %d, listed %d, want %d", step, s.len(), len(got), len(want))
		}
		for i, c := range got {
			if int(c.srvIdx) != i+1 {
				t.Fatalf("%s: connection at %d records place %d", step, i, c.srvIdx-1)
			}
			if !slices.Contains(want, c) {
				t.Fatalf("%s: a connection never added, or removed, is listed", step)
			}
		}
	}
	n := 2*connChunk + 7
	for range n {
		c := new(Conn)
		s.add(c)
		want = append(want, c)
	}
	check("after adding")
	if len(s.chunks) != 3 {
		t.Errorf("%d connections in %d chunks, want 3", n, len(s.chunks))
	}
	// Remove every third: from the middle, the first, the last.
	for i := len(want) - 1; i >= 0; i -= 3 {
		s.remove(want[i])
		if want[i].srvIdx != 0 {
			t.Fatalf("a removed connection records place %d", want[i].srvIdx-1)
		}
		want = slices.Delete(want, i, i+1)
	}
	check("after removing every third")
	stranger := new(Conn)
	s.remove(stranger) // never added: nothing happens
	s.remove(want[0])
	s.remove(want[0]) // twice: the second does nothing
	want = want[1:]
	check("after removing one twice and a stranger")
	for len(want) > 0 {
		s.remove(want[len(want)/2])
		want = slices.Delete(want, len(want)/2, len(want)/2+1)
	}
	check("after removing all")
	if len(s.chunks) > 1 {
		t.Errorf("an empty set keeps %d chunks, want at most 1", len(s.chunks))
	}
}
