//go:build linux

package uringp

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// sendNow is for a parked loop about to sleep whose turn queued a single
// request, a send: rather than enter the ring to submit it, the loop makes
// it itself, sendto(2) or sendmsg(2) with the SQE's arguments and flags
// (MSG_DONTWAIT: it never blocks), and handles the result as that send's
// CQE. The loop enters the kernel once either way; a send made this way
// spares the ring's work for the request: its issue, its CQE, the wake of
// the ring's pollers, which makes Go's poller report the ring's descriptor
// for nothing, and the turn that would reap the CQE. It reports whether
// it sent; the caller then starts a turn rather than sleep, since the
// result may have queued more.
func (l *loop) sendNow() bool {
	if l.send != nil || l.ring.SQReady() != 1 {
		return false // SQPOLL sends go through rings of their own
	}
	sqe := l.ring.Unpublished()
	if sqe == nil || sqe.Flags&^uring.SqeFixedFile != 0 {
		return false
	}
	k, gen, slot := splitUserData(sqe.UserData)
	if k != kindSend || int(slot) >= len(l.conns) || l.gens[slot] != gen || l.conns[slot] == nil {
		return false
	}
	// The send holds the connection (sSendBusy): its descriptor stays open
	// until the send's result is handled.
	fd := uintptr(l.conns[slot].fd.Sysfd)
	var n uintptr
	var errno syscall.Errno
	switch sqe.Opcode {
	case uring.OpSend:
		// The payload stays pinned (or staged) until sendDone, as for
		// the ring's send.
		n, _, errno = syscall.RawSyscall6(unix.SYS_SENDTO, fd, uintptr(sqe.Addr), uintptr(sqe.Len), uintptr(sqe.OpFlags), 0, 0)
	case uring.OpSendmsg:
		n, _, errno = syscall.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(sqe.Addr), uintptr(sqe.OpFlags))
	default:
		return false
	}
	cqe := uring.CQE{UserData: sqe.UserData, Res: int32(n)}
	if errno != 0 {
		cqe.Res = -int32(errno)
	}
	l.ring.Unget()
	l.stats.SendsNow.Add(1)
	l.dispatch(&cqe)
	return true
}
