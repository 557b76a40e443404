//go:build linux

package uringp

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// reap takes every completion and dispatches it. It reports whether it
// woke readers.
func (l *loop) reap() (woke bool) {
	for {
		n := l.ring.PeekCQE(l.cqes[:])
		if l.send != nil {
			n += l.send.reap(l.cqes[n:])
		}
		if n == 0 {
			break
		}
		l.stats.CQEs.Add(uint64(n))
		for i := range l.cqes[:n] {
			l.dispatch(&l.cqes[i])
		}
		if n < len(l.cqes)/2 {
			break
		}
	}
	woke = len(l.notify) > 0
	if woke && l.napping && l.procs > 1 {
		l.noteInput(int64(time.Since(napClock)))
	}
	for i, c := range l.notify {
		c.unset(fNotified)
		c.fd.InputReady()
		l.notify[i] = nil
	}
	l.notify = l.notify[:0]
	return woke
}

func (l *loop) dispatch(cqe *uring.CQE) {
	cqe.Res = userErrno(cqe.Res)
	k, gen, slot := splitUserData(cqe.UserData)
	switch k {
	case kindWake:
		l.armWake()
		return
	case kindCancel:
		return // the target's own final CQE tells what happened
	case kindFile:
		l.fileDone(gen, slot, cqe)
		return
	}
	var c *conn
	if int(slot) < len(l.conns) && l.gens[slot] == gen {
		c = l.conns[slot]
	}
	switch k {
	case kindRecv:
		l.recvDone(c, cqe)
	case kindSend:
		l.sendDone(c, cqe)
	case kindPoll:
		l.pollDone(c, cqe)
	case kindPollOut:
		l.pollOutDone(c, cqe)
	case kindCancelInput:
		if cqe.Res != 0 {
			l.cancelInputMissed(c)
		}
	}
}

// The kernel's restart codes (ERESTARTSYS 512 to ERESTART_RESTARTBLOCK
// 516) are never meant for user space, but a request that io-wq ran and
// a cancellation interrupted can complete with one: io_uring turns them
// into -EINTR for reads, writes and socket requests (io_rw_done in
// io_uring/rw.c, io_uring/net.c), not for an FSYNC, whose result is the
// file system's as vfs_fsync_range returned it (io_fsync in
// io_uring/sync.c). A File's fsync cancelled by its Close or its
// context is such a request. They mean what EINTR means.
const (
	errnoRestartSys   = 512
	errnoRestartBlock = 516
)

// userErrno returns a completion's result with a kernel restart code
// turned into -EINTR.
func userErrno(res int32) int32 {
	if res <= -errnoRestartSys && res >= -errnoRestartBlock {
		return -int32(unix.EINTR)
	}
	return res
}

// errno turns a negative CQE result into an error like the syscall's.
func errno(op string, res int32) error {
	return os.NewSyscallError(op, syscall.Errno(-res))
}
