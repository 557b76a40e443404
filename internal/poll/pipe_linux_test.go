package poll

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestPipePool: an empty pipe given back is handed out again; one that
// still holds bytes is closed, never reused; the idle list stops at
// maxIdlePipes, the pipes past it closed; CloseIdlePipes closes the rest.
func TestPipePool(t *testing.T) {
	CloseIdlePipes()
	defer CloseIdlePipes()
	open := func(fd int) bool {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		return err == nil
	}
	p, err := GetPipe()
	if err != nil {
		t.Fatal(err)
	}
	PutPipe(p, 0)
	if q, err := GetPipe(); err != nil || q != p {
		t.Fatalf("GetPipe after an empty one came back: %p, %v; want the same pipe %p", q, err, p)
	}
	if _, err := unix.Write(p.W, []byte("left over")); err != nil {
		t.Fatal(err)
	}
	PutPipe(p, 9)
	if open(p.R) || open(p.W) {
		t.Errorf("a pipe given back with bytes in it is still open")
	}
	if q, err := GetPipe(); err != nil || q == p {
		t.Fatalf("GetPipe handed out the pipe that held bytes (%v)", err)
	} else {
		PutPipe(q, 0)
	}
	CloseIdlePipes()

	var ps []*Pipe
	for range maxIdlePipes + 3 {
		p, err := GetPipe()
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		PutPipe(p, 0)
	}
	if n := len(pipes.idle); n != maxIdlePipes {
		t.Errorf("%d idle pipes, want %d", n, maxIdlePipes)
	}
	for _, p := range ps[maxIdlePipes:] {
		if open(p.R) {
			t.Errorf("a pipe past the idle bound is still open")
		}
	}
	CloseIdlePipes()
	for _, p := range ps[:maxIdlePipes] {
		if open(p.R) || open(p.W) {
			t.Errorf("CloseIdlePipes left a pipe open")
		}
	}
}
