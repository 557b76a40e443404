package poll

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// errAgain is the errno a non-blocking send or read meets when the socket
// has no room or no data.
var errAgain error = unix.EAGAIN

const (
	shutRead  = unix.SHUT_RD
	shutWrite = unix.SHUT_WR
)

// closeFD closes the descriptor; close(2) is not retried on EINTR (the
// descriptor is gone either way on Linux).
func closeFD(sysfd int) { unix.Close(sysfd) }

// Iovecs is scratch space for one sendmsg: it lives on the heap, in an FD or
// a loop, so the kernel never reads a Go stack.
type Iovecs [MaxIov]unix.Iovec

// The calls here never sleep: the descriptors are non-blocking (sockets
// registered with an engine, the splice pipes, eventfds) and sends add
// MSG_DONTWAIT. So they go through RawSyscall, which does not tell the
// scheduler. Through Syscall, the first call of a program that had gone
// idle (at partial load, each request's) wakes sysmon from its sleep
// (entersyscall does), and sysmon then looks at the Ps every 20 µs until
// it finds them idle again and sleeps: a futex wake-up, its naps and its
// wait, for nothing. A loopback send runs the receiver's network stack
// inline, so a large one holds the P for as long as that takes, which it
// would spend on the CPU either way.

// sendFlags: MSG_NOSIGNAL keeps SIGPIPE away from runtime threads when
// the peer is gone; MSG_DONTWAIT keeps the call from sleeping whatever
// the descriptor's mode.
const sendFlags = unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT

// Sendv sends the chunks of iov (at most MaxIov) with one send or sendmsg.
// It returns errAgain as is and other errors as *os.SyscallError.
func Sendv(sysfd int, iov [][]byte, vecs *Iovecs) (int, error) {
	for {
		var n int
		var err error
		if len(iov) == 1 {
			n, err = send(sysfd, iov[0])
		} else {
			n, err = sendmsg(sysfd, iov, vecs)
		}
		if err != unix.EINTR {
			return result("sendmsg", n, err)
		}
	}
}

func sendmsg(sysfd int, iov [][]byte, vecs *Iovecs) (int, error) {
	cnt := 0
	for _, p := range iov {
		if len(p) == 0 || cnt == len(vecs) {
			continue
		}
		vecs[cnt].Base = &p[0]
		vecs[cnt].SetLen(len(p))
		cnt++
	}
	var msg unix.Msghdr
	msg.Iov = &vecs[0]
	msg.SetIovlen(cnt)
	n, _, e := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(sysfd), uintptr(unsafe.Pointer(&msg)), sendFlags)
	for i := range cnt {
		vecs[i].Base = nil // let the payload be collected
	}
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// send sends p with one sendto.
func send(sysfd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(sysfd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), sendFlags, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// Read reads from sysfd, which must be non-blocking, into p, retrying
// EINTR. It returns (0, nil) at EOF, errAgain as is, and other errors as
// *os.SyscallError.
func Read(sysfd int, p []byte) (int, error) {
	for {
		n, err := RawRead(sysfd, p)
		if err != unix.EINTR {
			return result("read", n, err)
		}
	}
}

// RawRead is one read(2) of a non-blocking descriptor, through
// RawSyscall; the error is the bare errno.
func RawRead(sysfd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(sysfd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// RawWrite is one write(2) to a non-blocking descriptor, through
// RawSyscall; the error is the bare errno.
func RawWrite(sysfd int, p []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(sysfd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// EpollWaitNow takes the ready events of epfd without waiting (epoll_pwait
// with a zero timeout), through RawSyscall.
func EpollWaitNow(epfd int, events []unix.EpollEvent) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// result maps a non-EINTR syscall result: EAGAIN to errAgain, other errnos
// to *os.SyscallError named op.
func result(op string, n int, err error) (int, error) {
	switch err {
	case nil:
		return n, nil
	case unix.EAGAIN:
		return 0, errAgain
	}
	return 0, os.NewSyscallError(op, err)
}

// resetOnClose makes the socket's close send a reset, not a FIN, and drop
// what it did not send (SO_LINGER on, 0 seconds: socket(7)). A socket with
// no linger, a Unix socket, refuses nothing but resets nothing either.
func resetOnClose(sysfd int) {
	unix.SetsockoptLinger(sysfd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
}

// Shutdown shuts down one side of the socket.
func Shutdown(sysfd, how int) error {
	return os.NewSyscallError("shutdown", unix.Shutdown(sysfd, how))
}

// IsAgain reports whether err is the "try again" errno from Read or Sendv.
func IsAgain(err error) bool { return err == errAgain }

// Sendfile moves up to n bytes from the file src into the socket sock
// with sendfile(2): from *off, which it advances, or from the file's
// offset, which the kernel advances, when off is nil. It retries EINTR and
// returns errAgain as is and other errnos bare: the caller knows which call
// it made, and whether the errno means the call cannot be made at all
// (IsUnsupported).
func Sendfile(sock, src int, off *int64, n int) (int, error) {
	for {
		m, err := unix.Sendfile(sock, src, off, n)
		switch err {
		case nil:
			return m, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, errAgain
		}
		return 0, err
	}
}

// Splice moves up to n bytes from in to out with splice(2), one of which is
// a pipe. SPLICE_F_NONBLOCK makes the pipe side non-blocking; the socket
// side is non-blocking by its own flag. Errors are as for Sendfile.
func Splice(out, in int, n int) (int, error) {
	for {
		m, err := unix.Splice(in, nil, out, nil, n, unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MOVE)
		switch err {
		case nil:
			return int(m), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, errAgain
		}
		return 0, err
	}
}

// IsUnsupported reports whether err, from Sendfile or Splice, says the call
// cannot be made on these descriptors at all (no bytes moved, none
// consumed): EINVAL (the source is not a file sendfile takes, or a socket
// splice takes), ENOSYS, EOPNOTSUPP.
func IsUnsupported(err error) bool {
	return err == unix.EINVAL || err == unix.ENOSYS || err == unix.EOPNOTSUPP
}
