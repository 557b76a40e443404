//go:build linux

package uring

import "testing"

// TestUnget: the last entry handed out and not yet published can be taken
// back, and the kernel then never sees it: of three NOPs got, the third
// taken back, two complete, and the slot goes to the next GetSQE. A
// published entry cannot be taken back.
func TestUnget(t *testing.T) {
	h := newHarness(t, 8, 16)
	if h.r.Unpublished() != nil {
		t.Fatal("Unpublished on a fresh ring returned an entry")
	}
	for i := range 3 {
		s := h.sqe()
		s.Opcode = OpNop
		s.UserData = uint64(i + 1)
	}
	last := h.r.Unpublished()
	if last == nil || last.UserData != 3 {
		t.Fatalf("Unpublished = %+v, want the third NOP", last)
	}
	h.r.Unget()
	if got := h.r.SQReady(); got != 2 {
		t.Fatalf("SQReady after Unget = %d, want 2", got)
	}
	if s := h.sqe(); s != last {
		t.Fatal("GetSQE after Unget did not hand out the slot taken back")
	}
	h.r.Unget()
	h.submit()
	if h.r.Unpublished() != nil {
		t.Fatal("Unpublished returned an entry already submitted")
	}
	h.r.Unget() // nothing to take back: a no-op
	if got := h.r.SQReady(); got != 0 {
		t.Fatalf("SQReady after the submit and an Unget = %d, want 0", got)
	}
	cqes := h.reapN(2)
	for _, c := range cqes {
		if c.UserData == 3 {
			t.Fatalf("the NOP taken back completed: %s", fmtCQEs(cqes))
		}
	}
	if len(cqes) != 2 {
		t.Fatalf("got %s, want the two NOPs submitted", fmtCQEs(cqes))
	}
}
