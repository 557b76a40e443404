//go:build linux

package uring

import "unsafe"

// Prep methods fill an SQE from GetSQE (which zeroed it), as liburing's
// io_uring_prep_* functions do. Pointers passed in must stay valid until
// the request's final CQE, unless the method says the kernel copies them
// at submission; they must not point into a goroutine stack.

// PrepRecvMultishot prepares a multishot recv into buffers from buffer
// group bgid (Linux 6.0): one CQE per arrival, each with CQEFBuffer and,
// while the request lives on, CQEFMore. It ends with a CQE without
// CQEFMore: res 0 at EOF, -ENOBUFS when the group ran dry, -errno.
func (s *SQE) PrepRecvMultishot(fd int, msgFlags uint32, bgid uint16) {
	s.Opcode = OpRecv
	s.Fd = int32(fd)
	s.IoPrio = RecvMultishot
	s.Flags = SqeBufferSelect
	s.BufIndex = bgid
	s.OpFlags = msgFlags
}

// PrepRecvmsgMultishot prepares a multishot recvmsg into buffers from
// buffer group bgid (Linux 6.0), for datagram sockets: one CQE per
// datagram, its buffer laid out as RecvmsgOut, then msg.Namelen bytes of
// source address, then msg.Controllen bytes of control messages, then the
// payload. msg is copied at submission; it carries no iovec. The request
// ends as PrepRecvMultishot's does.
func (s *SQE) PrepRecvmsgMultishot(fd int, msg *Msghdr, msgFlags uint32, bgid uint16) {
	s.Opcode = OpRecvmsg
	s.Fd = int32(fd)
	s.Addr = uint64(uintptr(unsafe.Pointer(msg)))
	s.Len = 1
	s.IoPrio = RecvMultishot
	s.Flags = SqeBufferSelect
	s.BufIndex = bgid
	s.OpFlags = msgFlags
}

// RecvmsgOut is struct io_uring_recvmsg_out, at the start of each buffer a
// multishot recvmsg fills: the lengths of the source address and control
// messages the kernel had (either may exceed the space the request gave),
// the payload's full length (over what fits when Flags has MSG_TRUNC) and
// the message's flags.
type RecvmsgOut struct {
	Namelen, Controllen, Payloadlen, Flags uint32
}

// SetRecvLimit caps a multishot recv at n bytes in total (the SQE's
// optlen; Linux 6.16 or so, earlier kernels fail the recv with EINVAL):
// once n bytes arrived, the request ends with a CQE without CQEFMore. An
// input high-water mark becomes exact this way, with no cancellation.
func (s *SQE) SetRecvLimit(n uint32) { s.FileIndex = n }

// PrepSend prepares a send of len(b) bytes at b.
func (s *SQE) PrepSend(fd int, b []byte, msgFlags uint32) {
	s.Opcode = OpSend
	s.Fd = int32(fd)
	s.Addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	s.Len = uint32(len(b))
	s.OpFlags = msgFlags
}

// PrepSendmsg prepares a sendmsg of msg.
func (s *SQE) PrepSendmsg(fd int, msg *Msghdr, msgFlags uint32) {
	s.Opcode = OpSendmsg
	s.Fd = int32(fd)
	s.Addr = uint64(uintptr(unsafe.Pointer(msg)))
	s.Len = 1
	s.OpFlags = msgFlags
}

// PrepMultishotAccept prepares a multishot accept on the listening socket
// fd (5.19): one CQE per connection (res is the new descriptor), flags as
// for accept4 (SOCK_NONBLOCK|SOCK_CLOEXEC). Peer addresses are not asked
// for; use getpeername.
func (s *SQE) PrepMultishotAccept(fd int, flags uint32) {
	s.Opcode = OpAccept
	s.Fd = int32(fd)
	s.IoPrio = AcceptMultishot
	s.OpFlags = flags
}

// PrepPollMultishot prepares a multishot POLL_ADD for events (POLLIN,
// POLLOUT, POLLRDHUP, ...; 5.13). Each CQE's res is the ready event mask.
// Like EPOLLET, it reports edges: drain the socket to EAGAIN.
func (s *SQE) PrepPollMultishot(fd int, events uint32) {
	s.Opcode = OpPollAdd
	s.Fd = int32(fd)
	s.Len = PollAddMulti
	s.OpFlags = events
}

// PrepRead prepares a read of len(b) bytes into b (at the current file
// position for sockets and eventfds: off is -1).
func (s *SQE) PrepRead(fd int, b []byte) {
	s.Opcode = OpRead
	s.Fd = int32(fd)
	s.Addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	s.Len = uint32(len(b))
	s.Off = ^uint64(0)
}

// PrepReadAt prepares a read of len(b) bytes into b at file offset off
// (-1: at the file's position, which it advances).
func (s *SQE) PrepReadAt(fd int, b []byte, off int64) { s.prepRW(OpRead, fd, b, off) }

// PrepWriteAt prepares a write of b at file offset off (-1: at the
// file's position).
func (s *SQE) PrepWriteAt(fd int, b []byte, off int64) { s.prepRW(OpWrite, fd, b, off) }

func (s *SQE) prepRW(op uint8, fd int, b []byte, off int64) {
	s.Opcode = op
	s.Fd = int32(fd)
	s.Addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	s.Len = uint32(len(b))
	s.Off = uint64(off)
}

// PrepFsync prepares an fsync, or with FsyncDatasync an fdatasync.
func (s *SQE) PrepFsync(fd int, flags uint32) {
	s.Opcode = OpFsync
	s.Fd = int32(fd)
	s.OpFlags = flags
}

// PrepCancel64 prepares the cancellation of the request whose user_data is
// target; flags may add CancelAll. Its own CQE's res is 0 (or a count with
// CancelAll), -ENOENT or -EALREADY; the target ends with its own final CQE.
func (s *SQE) PrepCancel64(target uint64, flags uint32) {
	s.Opcode = OpAsyncCancel
	s.Fd = -1
	s.Addr = target
	s.OpFlags = flags
}

// Msghdr is struct msghdr for PrepSendmsg, with its iovec array.
type Msghdr struct {
	Name       uint64
	Namelen    uint32
	_          uint32
	Iov        uint64
	Iovlen     uint64
	Control    uint64
	Controllen uint64
	Flags      int32
	_          int32
}

// Iovec is struct iovec.
type Iovec struct {
	Base uint64
	Len  uint64
}
