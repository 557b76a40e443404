package epoll

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestPostAfterShutdown: a producer that cleared the loop's sleeping flag
// just before the loop shut down, and writes the wake-up eventfd only
// after the loop closed it, writes nothing: the descriptor's number may
// belong to another file by then (a connection's socket, whose peer would
// read eight stray bytes).
func TestPostAfterShutdown(t *testing.T) {
	l, err := newLoop()
	if err != nil {
		t.Fatal(err)
	}
	// The pipe's descriptors are open before the eventfd's number is free,
	// so neither takes it.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		l.shutdown()
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	old := l.ev.FD()
	l.shutdown()
	// The eventfd's old number now names the pipe, as it would a file
	// opened after the loop closed the eventfd.
	if err := unix.Dup3(p[1], old, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(old)
	l.sleeping.Store(true)
	l.post(task{kind: taskFlush})
	var b [16]byte
	if n, err := unix.Read(p[0], b[:]); err == nil {
		t.Fatalf("a wake-up after the loop shut down wrote %q to the file that took the eventfd's number", b[:n])
	}
}
