//go:build linux

package uring

import (
	"os"
	"runtime"
	"unsafe"
)

// Fixed files: a table of file references the ring holds, so a request
// that names a slot (SQE.Fd = slot, Flags |= SqeFixedFile) skips the
// per-request lookup and reference count of its descriptor (fget/fput).
// A slot keeps its file open: the descriptor may be closed, but the socket
// lives on until the slot is cleared (UpdateFile with -1) or the ring
// closes.

// RegisterFilesSparse registers a table of n empty fixed-file slots
// (IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE, 5.19). The
// kernel refuses n above RLIMIT_NOFILE (EMFILE). Call it from the ring's
// owner thread.
func (r *Ring) RegisterFilesSparse(n uint32) error {
	reg := &RsrcRegister{Nr: n, Flags: RsrcRegisterSparse}
	if _, err := register(r.fd, RegisterFiles2, unsafe.Pointer(reg), uint32(unsafe.Sizeof(*reg))); err != nil {
		return os.NewSyscallError("io_uring_register(FILES2)", err)
	}
	return nil
}

// UpdateFile puts descriptor fd in fixed-file slot (the ring takes its own
// reference to the file), or clears the slot when fd is -1, dropping the
// reference a former file held (IORING_REGISTER_FILES_UPDATE). Requests in
// flight keep the file they started with. Call it from the ring's owner
// thread.
func (r *Ring) UpdateFile(slot uint32, fd int) error {
	// The kernel reads the descriptor through a pointer inside the
	// argument: both live in the Ring, in the heap, where they do not
	// move (the caller is the owner thread, so they are not shared).
	f := &r.files
	f.fd = int32(fd)
	f.upd = RsrcUpdate{Offset: slot, Data: uint64(uintptr(unsafe.Pointer(&f.fd)))}
	_, err := register(r.fd, RegisterFilesUpdate, unsafe.Pointer(&f.upd), 1)
	runtime.KeepAlive(r)
	if err != nil {
		return os.NewSyscallError("io_uring_register(FILES_UPDATE)", err)
	}
	return nil
}
