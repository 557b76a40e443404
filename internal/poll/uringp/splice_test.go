//go:build linux

package uringp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestUserErrno: the kernel's restart codes, which a cancelled io-wq
// request may complete with, reach the handlers as -EINTR; every other
// result passes as it is.
func TestUserErrno(t *testing.T) {
	for res := int32(-516); res <= -512; res++ {
		if got := userErrno(res); got != -int32(unix.EINTR) {
			t.Errorf("userErrno(%d) = %d, want -EINTR", res, got)
		}
	}
	for _, res := range []int32{-517, -511, -int32(unix.EINTR), -int32(unix.ECANCELED), 0, 512, 65536} {
		if got := userErrno(res); got != res {
			t.Errorf("userErrno(%d) = %d, want it unchanged", res, got)
		}
	}
}

// TestSpliceCancelled: a splice of a stopped send that was interrupted
// (the cancel interrupting io-wq's splice) ends the send as a cancel,
// with no error of its own, as -ECANCELED does; a running send records
// a real error, and only the first.
func TestSpliceCancelled(t *testing.T) {
	var l *loop // spliceFailed uses only op
	for _, res := range []int32{-int32(unix.ECANCELED), -int32(unix.EINTR)} {
		op := &SpliceOp{stopped: true}
		l.spliceFailed(op, res)
		if op.Res != 0 || !op.stopped {
			t.Errorf("stopped send, splice result %d: Res %d, stopped %v; want no error, stopped", res, op.Res, op.stopped)
		}
	}
	op := &SpliceOp{}
	l.spliceFailed(op, -int32(unix.ECANCELED))
	if op.Res != 0 || !op.stopped {
		t.Errorf("running send, -ECANCELED: Res %d, stopped %v; want no error, stopped", op.Res, op.stopped)
	}
	op = &SpliceOp{}
	l.spliceFailed(op, -int32(unix.EIO))
	l.spliceFailed(op, -int32(unix.EPIPE))
	if op.Res != -int32(unix.EIO) || op.stopped {
		t.Errorf("running send, -EIO then -EPIPE: Res %d, stopped %v; want -EIO, running", op.Res, op.stopped)
	}
	if (&SpliceOp{}).cancelledBy(-int32(unix.EINTR)) {
		t.Error("a running send's EINTR taken for a cancel")
	}
}
