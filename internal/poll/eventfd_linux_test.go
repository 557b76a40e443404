package poll

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestEventFDSignalAfterClose: a Signal after Close writes nothing, even
// when the descriptor's old number names another file by then.
func TestEventFDSignalAfterClose(t *testing.T) {
	e, err := NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	e.Signal()
	var b [16]byte
	if n, err := unix.Read(e.FD(), b[:]); err != nil || n != 8 || b[0] != 1 {
		t.Fatalf("after a Signal the eventfd reads %d bytes %q, %v; want the counter 1", n, b[:n], err)
	}
	// The pipe's descriptors are open before the eventfd's number is
	// free, so neither takes it.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	old := e.FD()
	e.Close()
	if e.FD() != -1 {
		t.Fatalf("FD after Close = %d, want -1", e.FD())
	}
	if err := unix.Dup3(p[1], old, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(old)
	e.Signal()
	e.Close() // a second Close leaves the file that took the number alone
	if n, err := unix.Read(p[0], b[:]); err == nil {
		t.Fatalf("a Signal after Close wrote %q to the file that took the eventfd's number", b[:n])
	}
	if _, err := unix.FcntlInt(uintptr(old), unix.F_GETFD, 0); err != nil {
		t.Fatalf("a second Close closed the file that took the eventfd's number: %v", err)
	}
}
