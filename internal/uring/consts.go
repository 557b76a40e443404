//go:build linux

package uring

// Opcodes (enum io_uring_op).
const (
	OpNop         = 0
	OpFsync       = 3
	OpReadFixed   = 4
	OpWriteFixed  = 5
	OpPollAdd     = 6
	OpPollRemove  = 7
	OpSendmsg     = 9
	OpRecvmsg     = 10
	OpTimeout     = 11
	OpAccept      = 13
	OpAsyncCancel = 14
	OpLinkTimeout = 15
	OpConnect     = 16
	OpClose       = 19
	OpRead        = 22
	OpWrite       = 23
	OpSend        = 26
	OpSplice      = 30
	OpRecv        = 27
	OpShutdown    = 34
	OpMsgRing     = 40
	OpSocket      = 45
	OpSendZC      = 47
	OpSendmsgZC   = 48
)

// FsyncDatasync makes an OpFsync an fdatasync (IORING_FSYNC_DATASYNC).
const FsyncDatasync = 1 << 0

// SpliceFdInFixed (SPLICE_F_FD_IN_FIXED) says an OpSplice's input
// descriptor is an index into the ring's fixed-file table.
const SpliceFdInFixed = 1 << 31

// SQE flags (IOSQE_*).
const (
	SqeFixedFile      = 1 << 0
	SqeIODrain        = 1 << 1
	SqeIOLink         = 1 << 2
	SqeIOHardlink     = 1 << 3
	SqeAsync          = 1 << 4
	SqeBufferSelect   = 1 << 5
	SqeCQESkipSuccess = 1 << 6
)

// Setup flags (IORING_SETUP_*).
const (
	SetupIOPoll        = 1 << 0
	SetupSQPoll        = 1 << 1
	SetupSQAff         = 1 << 2
	SetupCQSize        = 1 << 3
	SetupClamp         = 1 << 4
	SetupAttachWQ      = 1 << 5
	SetupRDisabled     = 1 << 6
	SetupSubmitAll     = 1 << 7
	SetupCoopTaskrun   = 1 << 8
	SetupTaskrunFlag   = 1 << 9
	SetupSQE128        = 1 << 10
	SetupCQE32         = 1 << 11
	SetupSingleIssuer  = 1 << 12
	SetupDeferTaskrun  = 1 << 13
	SetupNoMmap        = 1 << 14
	SetupRegisteredFDO = 1 << 15
	SetupNoSQArray     = 1 << 16
)

// Enter flags (IORING_ENTER_*).
const (
	EnterGetEvents      = 1 << 0
	EnterSQWakeup       = 1 << 1
	EnterSQWait         = 1 << 2
	EnterExtArg         = 1 << 3
	EnterRegisteredRing = 1 << 4
)

// SQ ring flags (IORING_SQ_*), in the word SQFlags reads.
const (
	SQNeedWakeup = 1 << 0
	SQCQOverflow = 1 << 1
	SQTaskrun    = 1 << 2
)

// CQE flags (IORING_CQE_F_*). The provided buffer id is Flags>>CQEBufferShift.
const (
	CQEFBuffer       = 1 << 0
	CQEFMore         = 1 << 1
	CQEFSockNonempty = 1 << 2
	CQEFNotif        = 1 << 3
	CQEFBufMore      = 1 << 4
	CQEBufferShift   = 16
)

// ioprio flags for send and recv (IORING_RECVSEND_*, IORING_RECV_MULTISHOT)
// and for accept (IORING_ACCEPT_MULTISHOT).
const (
	RecvsendPollFirst = 1 << 0
	RecvMultishot     = 1 << 1
	RecvsendFixedBuf  = 1 << 2
	SendZCReportUsage = 1 << 3
	RecvsendBundle    = 1 << 4
	AcceptMultishot   = 1 << 0
)

// PollAddMulti goes in the SQE's Len field of a POLL_ADD.
const PollAddMulti = 1 << 0

// Cancel flags (IORING_ASYNC_CANCEL_*).
const (
	CancelAll     = 1 << 0
	CancelFD      = 1 << 1
	CancelAny     = 1 << 2
	CancelFDFixed = 1 << 3
)

// Register opcodes (IORING_REGISTER_*).
const (
	RegisterBuffers         = 0
	UnregisterBuffers       = 1
	RegisterEventFD         = 4
	UnregisterEventFD       = 5
	RegisterProbe           = 8
	RegisterFilesUpdate     = 6
	RegisterFiles2          = 13
	RegisterRingFDs         = 20
	UnregisterRingFDs       = 21
	RegisterPbufRing        = 22
	UnregisterPbufRing      = 23
	RegisterSyncCancel      = 24
	RegisterPbufStatus      = 26
	RegisterSendMsgRing     = 31
	registerUseRegisteredFD = 1 << 31
)

// RsrcRegisterSparse (IORING_RSRC_REGISTER_SPARSE) registers a resource
// table of empty slots.
const RsrcRegisterSparse = 1 << 0

// PbufRingInc (IOU_PBUF_RING_INC, 6.12), a flag of BufReg: the kernel
// consumes each buffer of the ring incrementally, a completion taking only
// the bytes it filled, so one buffer serves several completions, each
// starting where the one before ended. A completion whose buffer the
// kernel will fill further carries CQEFBufMore.
const PbufRingInc = 1 << 1

// Feature flags (IORING_FEAT_*), reported in Params.Features.
const (
	FeatSingleMmap     = 1 << 0
	FeatNoDrop         = 1 << 1
	FeatSubmitStable   = 1 << 2
	FeatFastPoll       = 1 << 5
	FeatExtArg         = 1 << 8
	FeatRecvsendBundle = 1 << 14
	FeatMinTimeout     = 1 << 15
)

// mmap offsets.
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// probeOpSupported is IO_URING_OP_SUPPORTED.
const probeOpSupported = 1 << 0
