//go:build linux

package uring

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func setup(entries uint32, p *Params) (int, error) {
	fd, _, errno := syscall.RawSyscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// enter calls io_uring_enter. It goes through syscall.Syscall6, which tells
// the Go scheduler the thread may block, so a blocking wait hands the P to
// other goroutines.
func enter(fd int, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, error) {
	n, _, errno := syscall.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit),
		uintptr(minComplete), uintptr(flags), uintptr(arg), argSize)
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}

// enterRaw is enter through syscall.RawSyscall6, which does not tell the
// Go scheduler: the thread keeps its P for the whole call, so no other
// goroutine runs on that P meanwhile and sysmon does not hand it off. A
// signal (the runtime's preemption signal included) ends a wait with
// EINTR, so stopping the world for a garbage collection still reaches a
// thread asleep in here.
func enterRaw(fd int, toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, error) {
	n, _, errno := syscall.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(fd), uintptr(toSubmit),
		uintptr(minComplete), uintptr(flags), uintptr(arg), argSize)
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}

func register(fd int, op uint32, arg unsafe.Pointer, nargs uint32) (int, error) {
	n, _, errno := syscall.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), uintptr(op), uintptr(arg), uintptr(nargs), 0, 0)
	if errno != 0 {
		return int(n), errno
	}
	return int(n), nil
}
