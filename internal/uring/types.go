//go:build linux

package uring

// SQRingOffsets is struct io_sqring_offsets.
type SQRingOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

// CQRingOffsets is struct io_cqring_offsets.
type CQRingOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

// Params is struct io_uring_params: the setup request and the kernel's
// answer (features, ring offsets).
type Params struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  SQRingOffsets
	CQOff                                                                  CQRingOffsets
}

// SQE is struct io_uring_sqe (64 bytes; SQE128 is never set). Unions are
// named after the member we use most; the Prep methods document the rest.
type SQE struct {
	Opcode      uint8
	Flags       uint8
	IoPrio      uint16
	Fd          int32
	Off         uint64 // off, addr2
	Addr        uint64 // addr, splice_off_in
	Len         uint32
	OpFlags     uint32 // msg_flags, accept_flags, cancel_flags, poll32_events, ...
	UserData    uint64
	BufIndex    uint16 // buf_index, buf_group
	Personality uint16
	FileIndex   uint32 // file_index, addr_len, splice_fd_in
	Addr3       uint64
	_           uint64
}

// CQE is struct io_uring_cqe (16 bytes; CQE32 is never set). Res is the
// result, or -errno.
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// BufID returns the provided buffer id of a CQE with CQEFBuffer set.
func (c *CQE) BufID() uint16 { return uint16(c.Flags >> CQEBufferShift) }

// More reports whether more CQEs will follow for the same request
// (CQEFMore). A CQE without it is the request's last.
func (c *CQE) More() bool { return c.Flags&CQEFMore != 0 }

// BufRingEntry is struct io_uring_buf. In entry 0, Resv is the ring's tail.
type BufRingEntry struct {
	Addr uint64
	Len  uint32
	Bid  uint16
	Resv uint16
}

// BufReg is struct io_uring_buf_reg.
type BufReg struct {
	RingAddr    uint64
	RingEntries uint32
	Bgid        uint16
	Flags       uint16
	Resv        [3]uint64
}

// BufStatus is struct io_uring_buf_status.
type BufStatus struct {
	BufGroup uint32
	Head     uint32
	Resv     [8]uint32
}

// RsrcUpdate is struct io_uring_rsrc_update.
type RsrcUpdate struct {
	Offset, Resv uint32
	Data         uint64
}

// RsrcRegister is struct io_uring_rsrc_register, the argument of
// IORING_REGISTER_FILES2.
type RsrcRegister struct {
	Nr, Flags uint32
	Resv2     uint64
	Data      uint64
	Tags      uint64
}

// GetEventsArg is struct io_uring_getevents_arg, passed with EnterExtArg.
type GetEventsArg struct {
	Sigmask     uint64
	SigmaskSz   uint32
	MinWaitUsec uint32
	Ts          uint64
}

// Timespec is struct __kernel_timespec.
type Timespec struct {
	Sec, Nsec int64
}

// ProbeOp is struct io_uring_probe_op.
type ProbeOp struct {
	Op    uint8
	Resv  uint8
	Flags uint16
	Resv2 uint32
}

// Probe is struct io_uring_probe with room for every opcode.
type Probe struct {
	LastOp uint8
	OpsLen uint8
	Resv   uint16
	Resv2  [3]uint32
	Ops    [256]ProbeOp
}

// Supported reports whether the kernel supports opcode op.
func (p *Probe) Supported(op uint8) bool {
	return op <= p.LastOp && p.Ops[op].Flags&probeOpSupported != 0
}
