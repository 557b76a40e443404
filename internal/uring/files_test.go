//go:build linux

package uring

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFixedFile: a send through a fixed-file slot reaches the peer even
// after the descriptor was closed (the slot holds the file); clearing the
// slot releases the socket (the peer reads EOF), and a send through the
// empty slot fails with EBADF.
func TestFixedFile(t *testing.T) {
	h := newHarness(t, 8, 16)
	if err := h.r.RegisterFilesSparse(4); err != nil {
		if errors.Is(err, syscall.EINVAL) {
			t.Skipf("no sparse file tables (IORING_REGISTER_FILES2, Linux 5.19): %v", err)
		}
		t.Fatalf("RegisterFilesSparse: %v", err)
	}
	a, b := h.socketpair()
	if err := h.r.UpdateFile(2, a); err != nil {
		t.Fatalf("UpdateFile(2, %d): %v", a, err)
	}
	h.closeFD(a)

	send := func(ud uint64, s string) CQE {
		sqe := h.sqe()
		sqe.PrepSend(2, []byte(s), unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
		sqe.Flags |= SqeFixedFile
		sqe.UserData = ud
		h.submit()
		c, _ := finalOf(h.reapFinal(ud), ud)
		return c
	}
	if c := send(1, "fixed"); c.Res != 5 {
		t.Fatalf("send through slot 2 after close(fd): res %d, want 5", c.Res)
	}
	if got := readWithin(t, b, time.Second); got != "fixed" {
		t.Fatalf("peer read %q, want %q", got, "fixed")
	}

	if err := h.r.UpdateFile(2, -1); err != nil {
		t.Fatalf("UpdateFile(2, -1): %v", err)
	}
	// The slot held the last reference: clearing it closes the socket.
	if got := readWithin(t, b, time.Second); got != "" {
		t.Fatalf("after the slot was cleared the peer read %q, want EOF", got)
	}
	if c := send(2, "gone"); c.Res != errno(syscall.EBADF) {
		t.Fatalf("send through an empty slot: res %d, want EBADF (%d)", c.Res, errno(syscall.EBADF))
	}
}

// readWithin polls fd for up to d and returns what one read gives ("" at
// EOF). It fails the test if nothing comes.
func readWithin(t *testing.T, fd int, d time.Duration) string {
	t.Helper()
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for {
		// poll(2) is never restarted after a signal handler: the Go
		// runtime's preemption signal can end it with EINTR.
		n, err := unix.Poll(pfd, int(time.Until(deadline)/time.Millisecond))
		if err == unix.EINTR && time.Now().Before(deadline) {
			continue
		}
		if err != nil || n == 0 {
			t.Fatalf("poll(%d): n %d, %v: nothing to read within %v", fd, n, err, d)
		}
		break
	}
	p := make([]byte, 64)
	n, err := unix.Read(fd, p)
	if err != nil {
		t.Fatalf("read(%d): %v", fd, err)
	}
	return string(p[:n])
}
