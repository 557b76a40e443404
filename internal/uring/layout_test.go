//go:build linux

package uring

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel reads and writes these structs by byte offset, so every field
// must sit exactly where the uapi header (include/uapi/linux/io_uring.h, as
// copied into liburing's src/include/liburing/io_uring.h) puts it on a
// 64-bit little-endian machine. Each row names the C field it mirrors; the
// "want" column was copied by hand from the header, not computed.

type layoutRow struct {
	c    string  // the C struct or field
	got  uintptr // unsafe.Sizeof, Offsetof or Alignof of the Go mirror
	want uintptr
}

func checkLayout(t *testing.T, rows []layoutRow) {
	t.Helper()
	for _, r := range rows {
		if r.got != r.want {
			t.Errorf("%s: got %d, want %d", r.c, r.got, r.want)
		}
	}
}

func TestLayoutSQE(t *testing.T) {
	var s SQE
	checkLayout(t, []layoutRow{
		{"sizeof(struct io_uring_sqe)", unsafe.Sizeof(s), 64},
		{"alignof(struct io_uring_sqe)", unsafe.Alignof(s), 8},
		{"io_uring_sqe.opcode", unsafe.Offsetof(s.Opcode), 0},
		{"io_uring_sqe.flags", unsafe.Offsetof(s.Flags), 1},
		{"io_uring_sqe.ioprio", unsafe.Offsetof(s.IoPrio), 2},
		{"io_uring_sqe.fd", unsafe.Offsetof(s.Fd), 4},
		{"io_uring_sqe.off/addr2", unsafe.Offsetof(s.Off), 8},
		{"io_uring_sqe.addr/splice_off_in", unsafe.Offsetof(s.Addr), 16},
		{"io_uring_sqe.len", unsafe.Offsetof(s.Len), 24},
		{"io_uring_sqe.rw_flags/msg_flags/cancel_flags/poll32_events", unsafe.Offsetof(s.OpFlags), 28},
		{"io_uring_sqe.user_data", unsafe.Offsetof(s.UserData), 32},
		{"io_uring_sqe.buf_index/buf_group", unsafe.Offsetof(s.BufIndex), 40},
		{"io_uring_sqe.personality", unsafe.Offsetof(s.Personality), 42},
		{"io_uring_sqe.file_index/splice_fd_in/addr_len", unsafe.Offsetof(s.FileIndex), 44},
		{"io_uring_sqe.addr3", unsafe.Offsetof(s.Addr3), 48},
		{"sizeof(io_uring_sqe.opcode)", unsafe.Sizeof(s.Opcode), 1},
		{"sizeof(io_uring_sqe.ioprio)", unsafe.Sizeof(s.IoPrio), 2},
		{"sizeof(io_uring_sqe.fd)", unsafe.Sizeof(s.Fd), 4},
		{"sizeof(io_uring_sqe.len)", unsafe.Sizeof(s.Len), 4},
		{"sizeof(io_uring_sqe.buf_group)", unsafe.Sizeof(s.BufIndex), 2},
		{"sizeof(io_uring_sqe.file_index)", unsafe.Sizeof(s.FileIndex), 4},
	})
}

func TestLayoutCQE(t *testing.T) {
	var c CQE
	checkLayout(t, []layoutRow{
		{"sizeof(struct io_uring_cqe)", unsafe.Sizeof(c), 16},
		{"io_uring_cqe.user_data", unsafe.Offsetof(c.UserData), 0},
		{"io_uring_cqe.res", unsafe.Offsetof(c.Res), 8},
		{"io_uring_cqe.flags", unsafe.Offsetof(c.Flags), 12},
	})
}

func TestLayoutParams(t *testing.T) {
	var p Params
	var sq SQRingOffsets
	var cq CQRingOffsets
	checkLayout(t, []layoutRow{
		{"sizeof(struct io_uring_params)", unsafe.Sizeof(p), 120},
		{"io_uring_params.sq_entries", unsafe.Offsetof(p.SQEntries), 0},
		{"io_uring_params.cq_entries", unsafe.Offsetof(p.CQEntries), 4},
		{"io_uring_params.flags", unsafe.Offsetof(p.Flags), 8},
		{"io_uring_params.sq_thread_cpu", unsafe.Offsetof(p.SQThreadCPU), 12},
		{"io_uring_params.sq_thread_idle", unsafe.Offsetof(p.SQThreadIdle), 16},
		{"io_uring_params.features", unsafe.Offsetof(p.Features), 20},
		{"io_uring_params.wq_fd", unsafe.Offsetof(p.WQFd), 24},
		{"io_uring_params.resv", unsafe.Offsetof(p.Resv), 28},
		{"sizeof(io_uring_params.resv)", unsafe.Sizeof(p.Resv), 12},
		{"io_uring_params.sq_off", unsafe.Offsetof(p.SQOff), 40},
		{"io_uring_params.cq_off", unsafe.Offsetof(p.CQOff), 80},

		{"sizeof(struct io_sqring_offsets)", unsafe.Sizeof(sq), 40},
		{"io_sqring_offsets.head", unsafe.Offsetof(sq.Head), 0},
		{"io_sqring_offsets.tail", unsafe.Offsetof(sq.Tail), 4},
		{"io_sqring_offsets.ring_mask", unsafe.Offsetof(sq.RingMask), 8},
		{"io_sqring_offsets.ring_entries", unsafe.Offsetof(sq.RingEntries), 12},
		{"io_sqring_offsets.flags", unsafe.Offsetof(sq.Flags), 16},
		{"io_sqring_offsets.dropped", unsafe.Offsetof(sq.Dropped), 20},
		{"io_sqring_offsets.array", unsafe.Offsetof(sq.Array), 24},
		{"io_sqring_offsets.resv1", unsafe.Offsetof(sq.Resv1), 28},
		{"io_sqring_offsets.user_addr", unsafe.Offsetof(sq.UserAddr), 32},

		{"sizeof(struct io_cqring_offsets)", unsafe.Sizeof(cq), 40},
		{"io_cqring_offsets.head", unsafe.Offsetof(cq.Head), 0},
		{"io_cqring_offsets.tail", unsafe.Offsetof(cq.Tail), 4},
		{"io_cqring_offsets.ring_mask", unsafe.Offsetof(cq.RingMask), 8},
		{"io_cqring_offsets.ring_entries", unsafe.Offsetof(cq.RingEntries), 12},
		{"io_cqring_offsets.overflow", unsafe.Offsetof(cq.Overflow), 16},
		{"io_cqring_offsets.cqes", unsafe.Offsetof(cq.Cqes), 20},
		{"io_cqring_offsets.flags", unsafe.Offsetof(cq.Flags), 24},
		{"io_cqring_offsets.resv1", unsafe.Offsetof(cq.Resv1), 28},
		{"io_cqring_offsets.user_addr", unsafe.Offsetof(cq.UserAddr), 32},
	})
}

func TestLayoutBufRing(t *testing.T) {
	var e BufRingEntry
	var reg BufReg
	var st BufStatus
	checkLayout(t, []layoutRow{
		{"sizeof(struct io_uring_buf)", unsafe.Sizeof(e), 16},
		{"io_uring_buf.addr", unsafe.Offsetof(e.Addr), 0},
		{"io_uring_buf.len", unsafe.Offsetof(e.Len), 8},
		{"io_uring_buf.bid", unsafe.Offsetof(e.Bid), 12},
		// io_uring_buf_ring overlays its u16 tail on bufs[0].resv.
		{"io_uring_buf.resv (= io_uring_buf_ring.tail in bufs[0])", unsafe.Offsetof(e.Resv), 14},
		// Advance stores bid|tail<<16 as one u32 at the bid's offset: it
		// must be 4-aligned inside a 16-byte entry.
		{"io_uring_buf.bid % 4 (32-bit tail store)", unsafe.Offsetof(e.Bid) % 4, 0},

		{"sizeof(struct io_uring_buf_reg)", unsafe.Sizeof(reg), 40},
		{"io_uring_buf_reg.ring_addr", unsafe.Offsetof(reg.RingAddr), 0},
		{"io_uring_buf_reg.ring_entries", unsafe.Offsetof(reg.RingEntries), 8},
		{"io_uring_buf_reg.bgid", unsafe.Offsetof(reg.Bgid), 12},
		{"io_uring_buf_reg.flags", unsafe.Offsetof(reg.Flags), 14},
		{"io_uring_buf_reg.resv", unsafe.Offsetof(reg.Resv), 16},

		{"sizeof(struct io_uring_buf_status)", unsafe.Sizeof(st), 40},
		{"io_uring_buf_status.buf_group", unsafe.Offsetof(st.BufGroup), 0},
		{"io_uring_buf_status.head", unsafe.Offsetof(st.Head), 4},
		{"io_uring_buf_status.resv", unsafe.Offsetof(st.Resv), 8},
	})
}

func TestLayoutRegisterAndEnterArgs(t *testing.T) {
	var u RsrcUpdate
	var rr RsrcRegister
	var g GetEventsArg
	var ts Timespec
	var po ProbeOp
	var p Probe
	checkLayout(t, []layoutRow{
		{"sizeof(struct io_uring_rsrc_update)", unsafe.Sizeof(u), 16},
		{"io_uring_rsrc_update.offset", unsafe.Offsetof(u.Offset), 0},
		{"io_uring_rsrc_update.resv", unsafe.Offsetof(u.Resv), 4},
		{"io_uring_rsrc_update.data", unsafe.Offsetof(u.Data), 8},

		{"sizeof(struct io_uring_rsrc_register)", unsafe.Sizeof(rr), 32},
		{"io_uring_rsrc_register.nr", unsafe.Offsetof(rr.Nr), 0},
		{"io_uring_rsrc_register.flags", unsafe.Offsetof(rr.Flags), 4},
		{"io_uring_rsrc_register.resv2", unsafe.Offsetof(rr.Resv2), 8},
		{"io_uring_rsrc_register.data", unsafe.Offsetof(rr.Data), 16},
		{"io_uring_rsrc_register.tags", unsafe.Offsetof(rr.Tags), 24},

		{"sizeof(struct io_uring_getevents_arg)", unsafe.Sizeof(g), 24},
		{"io_uring_getevents_arg.sigmask", unsafe.Offsetof(g.Sigmask), 0},
		{"io_uring_getevents_arg.sigmask_sz", unsafe.Offsetof(g.SigmaskSz), 8},
		{"io_uring_getevents_arg.min_wait_usec", unsafe.Offsetof(g.MinWaitUsec), 12},
		{"io_uring_getevents_arg.ts", unsafe.Offsetof(g.Ts), 16},

		{"sizeof(struct __kernel_timespec)", unsafe.Sizeof(ts), 16},
		{"__kernel_timespec.tv_sec", unsafe.Offsetof(ts.Sec), 0},
		{"__kernel_timespec.tv_nsec", unsafe.Offsetof(ts.Nsec), 8},

		{"sizeof(struct io_uring_probe_op)", unsafe.Sizeof(po), 8},
		{"io_uring_probe_op.op", unsafe.Offsetof(po.Op), 0},
		{"io_uring_probe_op.resv", unsafe.Offsetof(po.Resv), 1},
		{"io_uring_probe_op.flags", unsafe.Offsetof(po.Flags), 2},
		{"io_uring_probe_op.resv2", unsafe.Offsetof(po.Resv2), 4},

		{"sizeof(struct io_uring_probe) + 256 ops", unsafe.Sizeof(p), 16 + 256*8},
		{"io_uring_probe.last_op", unsafe.Offsetof(p.LastOp), 0},
		{"io_uring_probe.ops_len", unsafe.Offsetof(p.OpsLen), 1},
		{"io_uring_probe.resv", unsafe.Offsetof(p.Resv), 2},
		{"io_uring_probe.resv2", unsafe.Offsetof(p.Resv2), 4},
		{"io_uring_probe.ops", unsafe.Offsetof(p.Ops), 16},
	})
}

// TestLayoutMsghdr checks Msghdr and Iovec against the LP64 struct msghdr
// and struct iovec (x86_64 and arm64 agree), and against x/sys/unix's own
// mirrors of them.
func TestLayoutMsghdr(t *testing.T) {
	var m Msghdr
	var um unix.Msghdr
	var v Iovec
	var uv unix.Iovec
	checkLayout(t, []layoutRow{
		{"sizeof(struct msghdr)", unsafe.Sizeof(m), 56},
		{"msghdr.msg_name", unsafe.Offsetof(m.Name), 0},
		{"msghdr.msg_namelen", unsafe.Offsetof(m.Namelen), 8},
		{"msghdr.msg_iov", unsafe.Offsetof(m.Iov), 16},
		{"msghdr.msg_iovlen", unsafe.Offsetof(m.Iovlen), 24},
		{"msghdr.msg_control", unsafe.Offsetof(m.Control), 32},
		{"msghdr.msg_controllen", unsafe.Offsetof(m.Controllen), 40},
		{"msghdr.msg_flags", unsafe.Offsetof(m.Flags), 48},

		{"sizeof(struct msghdr) vs unix.Msghdr", unsafe.Sizeof(m), unsafe.Sizeof(um)},
		{"msghdr.msg_namelen vs unix.Msghdr", unsafe.Offsetof(m.Namelen), unsafe.Offsetof(um.Namelen)},
		{"msghdr.msg_iov vs unix.Msghdr", unsafe.Offsetof(m.Iov), unsafe.Offsetof(um.Iov)},
		{"msghdr.msg_iovlen vs unix.Msghdr", unsafe.Offsetof(m.Iovlen), unsafe.Offsetof(um.Iovlen)},
		{"msghdr.msg_control vs unix.Msghdr", unsafe.Offsetof(m.Control), unsafe.Offsetof(um.Control)},
		{"msghdr.msg_controllen vs unix.Msghdr", unsafe.Offsetof(m.Controllen), unsafe.Offsetof(um.Controllen)},
		{"msghdr.msg_flags vs unix.Msghdr", unsafe.Offsetof(m.Flags), unsafe.Offsetof(um.Flags)},

		{"sizeof(struct iovec)", unsafe.Sizeof(v), 16},
		{"iovec.iov_base", unsafe.Offsetof(v.Base), 0},
		{"iovec.iov_len", unsafe.Offsetof(v.Len), 8},
		{"sizeof(struct iovec) vs unix.Iovec", unsafe.Sizeof(v), unsafe.Sizeof(uv)},
	})
}

type constRow struct {
	c    string // the C macro or enumerator
	got  uint64
	want uint64
}

// TestConstants checks every constant in consts.go against the value in
// the uapi header, copied by hand.
func TestConstants(t *testing.T) {
	rows := []constRow{
		// enum io_uring_op
		{"IORING_OP_NOP", OpNop, 0},
		{"IORING_OP_FSYNC", OpFsync, 3},
		{"IORING_OP_READ_FIXED", OpReadFixed, 4},
		{"IORING_OP_WRITE_FIXED", OpWriteFixed, 5},
		{"IORING_OP_POLL_ADD", OpPollAdd, 6},
		{"IORING_OP_POLL_REMOVE", OpPollRemove, 7},
		{"IORING_OP_SENDMSG", OpSendmsg, 9},
		{"IORING_OP_RECVMSG", OpRecvmsg, 10},
		{"IORING_OP_TIMEOUT", OpTimeout, 11},
		{"IORING_OP_ACCEPT", OpAccept, 13},
		{"IORING_OP_ASYNC_CANCEL", OpAsyncCancel, 14},
		{"IORING_OP_LINK_TIMEOUT", OpLinkTimeout, 15},
		{"IORING_OP_CONNECT", OpConnect, 16},
		{"IORING_OP_CLOSE", OpClose, 19},
		{"IORING_OP_READ", OpRead, 22},
		{"IORING_OP_WRITE", OpWrite, 23},
		{"IORING_OP_SEND", OpSend, 26},
		{"IORING_OP_RECV", OpRecv, 27},
		{"IORING_OP_SPLICE", OpSplice, 30},
		{"IORING_OP_SHUTDOWN", OpShutdown, 34},
		{"IORING_OP_MSG_RING", OpMsgRing, 40},
		{"IORING_OP_SOCKET", OpSocket, 45},
		{"IORING_OP_SEND_ZC", OpSendZC, 47},
		{"IORING_OP_SENDMSG_ZC", OpSendmsgZC, 48},

		// IORING_FSYNC_DATASYNC (sqe->fsync_flags), SPLICE_F_FD_IN_FIXED
		// (sqe->splice_flags)
		{"IORING_FSYNC_DATASYNC", FsyncDatasync, 0x1},
		{"SPLICE_F_FD_IN_FIXED", SpliceFdInFixed, 0x80000000},

		// IOSQE_*
		{"IOSQE_FIXED_FILE", SqeFixedFile, 0x01},
		{"IOSQE_IO_DRAIN", SqeIODrain, 0x02},
		{"IOSQE_IO_LINK", SqeIOLink, 0x04},
		{"IOSQE_IO_HARDLINK", SqeIOHardlink, 0x08},
		{"IOSQE_ASYNC", SqeAsync, 0x10},
		{"IOSQE_BUFFER_SELECT", SqeBufferSelect, 0x20},
		{"IOSQE_CQE_SKIP_SUCCESS", SqeCQESkipSuccess, 0x40},

		// IORING_SETUP_*
		{"IORING_SETUP_IOPOLL", SetupIOPoll, 0x1},
		{"IORING_SETUP_SQPOLL", SetupSQPoll, 0x2},
		{"IORING_SETUP_SQ_AFF", SetupSQAff, 0x4},
		{"IORING_SETUP_CQSIZE", SetupCQSize, 0x8},
		{"IORING_SETUP_CLAMP", SetupClamp, 0x10},
		{"IORING_SETUP_ATTACH_WQ", SetupAttachWQ, 0x20},
		{"IORING_SETUP_R_DISABLED", SetupRDisabled, 0x40},
		{"IORING_SETUP_SUBMIT_ALL", SetupSubmitAll, 0x80},
		{"IORING_SETUP_COOP_TASKRUN", SetupCoopTaskrun, 0x100},
		{"IORING_SETUP_TASKRUN_FLAG", SetupTaskrunFlag, 0x200},
		{"IORING_SETUP_SQE128", SetupSQE128, 0x400},
		{"IORING_SETUP_CQE32", SetupCQE32, 0x800},
		{"IORING_SETUP_SINGLE_ISSUER", SetupSingleIssuer, 0x1000},
		{"IORING_SETUP_DEFER_TASKRUN", SetupDeferTaskrun, 0x2000},
		{"IORING_SETUP_NO_MMAP", SetupNoMmap, 0x4000},
		{"IORING_SETUP_REGISTERED_FD_ONLY", SetupRegisteredFDO, 0x8000},
		{"IORING_SETUP_NO_SQARRAY", SetupNoSQArray, 0x10000},

		// IORING_ENTER_*
		{"IORING_ENTER_GETEVENTS", EnterGetEvents, 0x1},
		{"IORING_ENTER_SQ_WAKEUP", EnterSQWakeup, 0x2},
		{"IORING_ENTER_SQ_WAIT", EnterSQWait, 0x4},
		{"IORING_ENTER_EXT_ARG", EnterExtArg, 0x8},
		{"IORING_ENTER_REGISTERED_RING", EnterRegisteredRing, 0x10},

		// IORING_SQ_* (sq_ring->flags)
		{"IORING_SQ_NEED_WAKEUP", SQNeedWakeup, 0x1},
		{"IORING_SQ_CQ_OVERFLOW", SQCQOverflow, 0x2},
		{"IORING_SQ_TASKRUN", SQTaskrun, 0x4},

		// IORING_CQE_F_*
		{"IORING_CQE_F_BUFFER", CQEFBuffer, 0x1},
		{"IORING_CQE_F_MORE", CQEFMore, 0x2},
		{"IORING_CQE_F_SOCK_NONEMPTY", CQEFSockNonempty, 0x4},
		{"IORING_CQE_F_NOTIF", CQEFNotif, 0x8},
		{"IORING_CQE_F_BUF_MORE", CQEFBufMore, 0x10},
		{"IORING_CQE_BUFFER_SHIFT", CQEBufferShift, 16},

		// send/recv and accept flags in sqe->ioprio
		{"IORING_RECVSEND_POLL_FIRST", RecvsendPollFirst, 0x1},
		{"IORING_RECV_MULTISHOT", RecvMultishot, 0x2},
		{"IORING_RECVSEND_FIXED_BUF", RecvsendFixedBuf, 0x4},
		{"IORING_SEND_ZC_REPORT_USAGE", SendZCReportUsage, 0x8},
		{"IORING_RECVSEND_BUNDLE", RecvsendBundle, 0x10},
		{"IORING_ACCEPT_MULTISHOT", AcceptMultishot, 0x1},

		// POLL_ADD flags in sqe->len
		{"IORING_POLL_ADD_MULTI", PollAddMulti, 0x1},

		// IORING_ASYNC_CANCEL_*
		{"IORING_ASYNC_CANCEL_ALL", CancelAll, 0x1},
		{"IORING_ASYNC_CANCEL_FD", CancelFD, 0x2},
		{"IORING_ASYNC_CANCEL_ANY", CancelAny, 0x4},
		{"IORING_ASYNC_CANCEL_FD_FIXED", CancelFDFixed, 0x8},

		// enum io_uring_register_op
		{"IORING_REGISTER_BUFFERS", RegisterBuffers, 0},
		{"IORING_UNREGISTER_BUFFERS", UnregisterBuffers, 1},
		{"IORING_REGISTER_EVENTFD", RegisterEventFD, 4},
		{"IORING_UNREGISTER_EVENTFD", UnregisterEventFD, 5},
		{"IORING_REGISTER_PROBE", RegisterProbe, 8},
		{"IORING_REGISTER_FILES_UPDATE", RegisterFilesUpdate, 6},
		{"IORING_REGISTER_FILES2", RegisterFiles2, 13},
		{"IORING_RSRC_REGISTER_SPARSE", RsrcRegisterSparse, 1},
		{"IORING_REGISTER_RING_FDS", RegisterRingFDs, 20},
		{"IORING_UNREGISTER_RING_FDS", UnregisterRingFDs, 21},
		{"IORING_REGISTER_PBUF_RING", RegisterPbufRing, 22},
		{"IORING_UNREGISTER_PBUF_RING", UnregisterPbufRing, 23},
		{"IORING_REGISTER_SYNC_CANCEL", RegisterSyncCancel, 24},
		{"IORING_REGISTER_PBUF_STATUS", RegisterPbufStatus, 26},
		{"IOU_PBUF_RING_INC", PbufRingInc, 2},
		{"IORING_REGISTER_SEND_MSG_RING", RegisterSendMsgRing, 31},
		{"IORING_REGISTER_USE_REGISTERED_RING", registerUseRegisteredFD, 0x80000000},

		// IORING_FEAT_*
		{"IORING_FEAT_SINGLE_MMAP", FeatSingleMmap, 0x1},
		{"IORING_FEAT_NODROP", FeatNoDrop, 0x2},
		{"IORING_FEAT_SUBMIT_STABLE", FeatSubmitStable, 0x4},
		{"IORING_FEAT_FAST_POLL", FeatFastPoll, 0x20},
		{"IORING_FEAT_EXT_ARG", FeatExtArg, 0x100},
		{"IORING_FEAT_RECVSEND_BUNDLE", FeatRecvsendBundle, 0x4000},
		{"IORING_FEAT_MIN_TIMEOUT", FeatMinTimeout, 0x8000},

		// mmap offsets
		{"IORING_OFF_SQ_RING", offSQRing, 0},
		{"IORING_OFF_CQ_RING", offCQRing, 0x8000000},
		{"IORING_OFF_SQES", offSQEs, 0x10000000},

		// IO_URING_OP_SUPPORTED (io_uring_probe_op.flags)
		{"IO_URING_OP_SUPPORTED", probeOpSupported, 0x1},

		// The system call numbers (asm-generic and x86_64 agree).
		{"__NR_io_uring_setup", unix.SYS_IO_URING_SETUP, 425},
		{"__NR_io_uring_enter", unix.SYS_IO_URING_ENTER, 426},
		{"__NR_io_uring_register", unix.SYS_IO_URING_REGISTER, 427},
	}
	for _, r := range rows {
		if r.got != r.want {
			t.Errorf("%s: got %#x, want %#x", r.c, r.got, r.want)
		}
	}
}

// TestCQEAccessors checks BufID and More decode io_uring_cqe.flags as the
// header says: the buffer id in the upper 16 bits, F_MORE in bit 1.
func TestCQEAccessors(t *testing.T) {
	for _, tc := range []struct {
		flags uint32
		bid   uint16
		more  bool
	}{
		{0, 0, false},
		{CQEFBuffer | 7<<CQEBufferShift, 7, false},
		{CQEFBuffer | CQEFMore | 0xfffe<<CQEBufferShift, 0xfffe, true},
		{CQEFMore | CQEFSockNonempty, 0, true},
	} {
		c := CQE{Flags: tc.flags}
		if got := c.BufID(); got != tc.bid {
			t.Errorf("flags %#x: BufID %d, want %d", tc.flags, got, tc.bid)
		}
		if got := c.More(); got != tc.more {
			t.Errorf("flags %#x: More %v, want %v", tc.flags, got, tc.more)
		}
	}
}

// TestProbeSupported checks Probe.Supported reads io_uring_probe_op.flags
// and ignores opcodes past last_op.
func TestProbeSupported(t *testing.T) {
	var p Probe
	p.LastOp = 27
	p.Ops[OpRecv].Flags = probeOpSupported
	p.Ops[OpSend].Flags = 0
	p.Ops[40].Flags = probeOpSupported // past last_op: must not count
	for _, tc := range []struct {
		op   uint8
		want bool
	}{{OpRecv, true}, {OpSend, false}, {40, false}, {255, false}} {
		if got := p.Supported(tc.op); got != tc.want {
			t.Errorf("Supported(%d) = %v, want %v", tc.op, got, tc.want)
		}
	}
}
