//go:build linux

package uring

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring is one io_uring instance: its submission and completion queues
// mapped into our memory. A Ring is not safe for concurrent use.
type Ring struct {
	fd      int
	enterFD int    // fd, or the registered index with EnterRegisteredRing
	regFlag uint32 // EnterRegisteredRing once RegisterRingFD succeeded

	// Params as the kernel returned them: entries, flags, features.
	Params Params

	ringMem []byte
	sqeMem  []byte

	// Shared with the kernel; see the comment at each access.
	sqHead, sqTail, sqFlags, sqDropped *uint32
	sqArray                            []uint32 // nil with SetupNoSQArray
	sqes                               []SQE
	cqHead, cqTail, cqOverflow         *uint32
	cqes                               []CQE

	sqMask, cqMask uint32
	sqeTail        uint32 // next SQE to hand out; published by Flush
	sqPublished    uint32 // sqeTail at the last Flush

	// wait is the argument of timed waits. It lives here, in the heap,
	// because the kernel gets its address as an integer: on a goroutine
	// stack it could move before the call.
	wait struct {
		arg GetEventsArg
		ts  Timespec
	}
	// files is UpdateFile's argument, here for the same reason, and so
	// that a call allocates nothing.
	files struct {
		upd RsrcUpdate
		fd  int32
	}
}

// NewRing sets up a ring with entries submission slots and the request in
// p (flags, CQ size, SQPOLL settings) and maps it. The kernel needs
// FeatSingleMmap (5.4) and FeatNoDrop (5.5).
func NewRing(entries uint32, p *Params) (*Ring, error) {
	fd, err := setup(entries, p)
	if err != nil {
		return nil, os.NewSyscallError("io_uring_setup", err)
	}
	r := &Ring{fd: fd, enterFD: fd, Params: *p}
	if err := r.mmap(); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return r, nil
}

func (r *Ring) mmap() error {
	p := &r.Params
	if p.Features&FeatSingleMmap == 0 || p.Features&FeatNoDrop == 0 {
		return fmt.Errorf("io_uring: kernel lacks SINGLE_MMAP or NODROP (features %#x): need Linux 5.5 or later", p.Features)
	}
	size := max(uintptr(p.SQOff.Array)+uintptr(p.SQEntries)*4, uintptr(p.CQOff.Cqes)+uintptr(p.CQEntries)*unsafe.Sizeof(CQE{}))
	if p.Flags&SetupNoSQArray != 0 {
		size = uintptr(p.CQOff.Cqes) + uintptr(p.CQEntries)*unsafe.Sizeof(CQE{})
	}
	mem, err := unix.Mmap(r.fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return os.NewSyscallError("mmap", err)
	}
	sqeMem, err := unix.Mmap(r.fd, offSQEs, int(p.SQEntries)*int(unsafe.Sizeof(SQE{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		unix.Munmap(mem)
		return os.NewSyscallError("mmap", err)
	}
	r.ringMem, r.sqeMem = mem, sqeMem
	word := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead, r.sqTail, r.sqFlags, r.sqDropped = word(p.SQOff.Head), word(p.SQOff.Tail), word(p.SQOff.Flags), word(p.SQOff.Dropped)
	r.sqMask = *word(p.SQOff.RingMask)
	if p.Flags&SetupNoSQArray == 0 {
		r.sqArray = unsafe.Slice(word(p.SQOff.Array), p.SQEntries)
		// The array maps ring positions to SQE indexes; identity, once.
		for i := range r.sqArray {
			r.sqArray[i] = uint32(i)
		}
	}
	r.sqes = unsafe.Slice((*SQE)(unsafe.Pointer(&sqeMem[0])), p.SQEntries)
	r.cqHead, r.cqTail, r.cqOverflow = word(p.CQOff.Head), word(p.CQOff.Tail), word(p.CQOff.Overflow)
	r.cqMask = *word(p.CQOff.RingMask)
	r.cqes = unsafe.Slice((*CQE)(unsafe.Pointer(&mem[p.CQOff.Cqes])), p.CQEntries)
	// The tails start where the kernel says (0 on a new ring).
	r.sqeTail = atomic.LoadUint32(r.sqTail)
	r.sqPublished = r.sqeTail
	return nil
}

// Close unmaps and closes the ring. The kernel cancels what is in flight.
// A ring whose descriptor was registered (RegisterRingFD) must be closed on
// the registering thread: the registration, which keeps the ring alive, is
// per thread.
func (r *Ring) Close() error {
	if r.fd < 0 {
		return nil
	}
	if r.regFlag != 0 {
		upd := RsrcUpdate{Offset: uint32(r.enterFD)}
		register(r.fd, UnregisterRingFDs, unsafe.Pointer(&upd), 1)
		r.regFlag = 0
	}
	unix.Munmap(r.sqeMem)
	unix.Munmap(r.ringMem)
	err := syscall.Close(r.fd)
	r.fd = -1
	return err
}

// FD returns the ring's file descriptor.
func (r *Ring) FD() int { return r.fd }

// RegisterRingFD registers the ring's descriptor with the calling thread
// (IORING_REGISTER_RING_FDS, 5.18), so each Enter skips the file table
// lookup. Only the registering thread may use the registered index; call it
// from the ring's locked owner thread.
func (r *Ring) RegisterRingFD() error {
	upd := RsrcUpdate{Offset: ^uint32(0), Data: uint64(r.fd)}
	if _, err := register(r.fd, RegisterRingFDs, unsafe.Pointer(&upd), 1); err != nil {
		return os.NewSyscallError("io_uring_register(RING_FDS)", err)
	}
	r.enterFD = int(upd.Offset)
	r.regFlag = EnterRegisteredRing
	return nil
}

// GetSQE returns the next free submission entry, zeroed, or nil when the
// queue is full (Submit, then try again).
func (r *Ring) GetSQE() *SQE {
	// Acquire: the kernel (or the SQPOLL thread) has finished reading the
	// entries before head, so their slots may be reused.
	head := atomic.LoadUint32(r.sqHead)
	if r.sqeTail-head >= r.Params.SQEntries {
		return nil
	}
	sqe := &r.sqes[r.sqeTail&r.sqMask]
	r.sqeTail++
	*sqe = SQE{}
	return sqe
}

// Unpublished returns the last entry GetSQE handed out, or nil if a
// Flush has published it already (or none was handed out).
func (r *Ring) Unpublished() *SQE {
	if r.sqeTail == r.sqPublished {
		return nil
	}
	return &r.sqes[(r.sqeTail-1)&r.sqMask]
}

// Unget takes back the entry Unpublished returns: the kernel never sees
// it, and GetSQE hands its slot out again.
func (r *Ring) Unget() {
	if r.sqeTail != r.sqPublished {
		r.sqeTail--
	}
}

// Flush publishes the entries got since the last Flush to the kernel and
// returns how many entries wait to be submitted.
func (r *Ring) Flush() uint32 {
	if r.sqeTail != r.sqPublished {
		// Release: the SQE bodies (plain stores) are visible before the
		// tail that hands them over.
		atomic.StoreUint32(r.sqTail, r.sqeTail)
		r.sqPublished = r.sqeTail
	}
	// Acquire, pairing with the kernel's store of head after consuming.
	return r.sqeTail - atomic.LoadUint32(r.sqHead)
}

// SQReady returns the number of entries got but not yet submitted.
func (r *Ring) SQReady() uint32 { return r.sqeTail - atomic.LoadUint32(r.sqHead) }

// SQFlags returns the kernel's SQ ring flags (SQNeedWakeup, SQCQOverflow,
// SQTaskrun).
func (r *Ring) SQFlags() uint32 {
	// Sequentially consistent: after a tail store this load is ordered
	// after it, which the SQPOLL wake-up check needs (liburing issues a
	// full barrier there).
	return atomic.LoadUint32(r.sqFlags)
}

// Enter calls io_uring_enter on the ring (through the registered index if
// RegisterRingFD succeeded), as a blocking system call: the Go scheduler
// is told, so if the call sleeps, the thread's P goes to other goroutines.
// It returns the number of entries submitted.
func (r *Ring) Enter(toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, error) {
	return enter(r.enterFD, toSubmit, minComplete, flags|r.regFlag, arg, argSize)
}

// EnterRaw is Enter without telling the Go scheduler (syscall.RawSyscall6):
// the thread keeps its P for the whole call, whatever it does in the
// kernel. A signal, the runtime's preemption signal included, ends a wait
// with EINTR.
func (r *Ring) EnterRaw(toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, error) {
	return enterRaw(r.enterFD, toSubmit, minComplete, flags|r.regFlag, arg, argSize)
}

// TimeoutArg returns the argument of an enter whose wait is bounded by d:
// pass it with EnterExtArg (FeatExtArg, 5.11). It points into r, so it is
// valid until the next TimeoutArg call.
func (r *Ring) TimeoutArg(d time.Duration) (unsafe.Pointer, uintptr) {
	w := &r.wait
	w.ts = Timespec{Sec: int64(d / time.Second), Nsec: int64(d % time.Second)}
	w.arg = GetEventsArg{Ts: uint64(uintptr(unsafe.Pointer(&w.ts)))}
	return unsafe.Pointer(&w.arg), unsafe.Sizeof(w.arg)
}

// SubmitAndWaitTimeout flushes, submits, and waits until at least wait
// completions are available or d has passed (then ETIME), through Enter;
// it runs deferred task work too. It is io_uring_submit_and_wait_timeout,
// needs FeatExtArg (5.11) and does not allocate.
func (r *Ring) SubmitAndWaitTimeout(wait uint32, d time.Duration) (int, error) {
	arg, size := r.TimeoutArg(d)
	return r.Enter(r.Flush(), wait, EnterGetEvents|EnterExtArg, arg, size)
}

// PeekCQE copies up to len(dst) completions into dst and consumes them. It
// does not enter the kernel: with SetupDeferTaskrun, completions appear only
// after an Enter with EnterGetEvents.
func (r *Ring) PeekCQE(dst []CQE) int {
	// Acquire: CQE bodies up to tail are written before the kernel
	// published tail.
	tail := atomic.LoadUint32(r.cqTail)
	head := *r.cqHead // only we write head
	n := 0
	for ; head != tail && n < len(dst); head++ {
		dst[n] = r.cqes[head&r.cqMask]
		n++
	}
	if n > 0 {
		// Release: our copies are done before the kernel may reuse the
		// slots (P24 in URING-NOTES).
		atomic.StoreUint32(r.cqHead, head)
	}
	return n
}

// CQReady returns the number of completions waiting in the CQ ring.
func (r *Ring) CQReady() uint32 {
	return atomic.LoadUint32(r.cqTail) - *r.cqHead
}

// Overflow returns the kernel's count of completions that did not fit in
// the CQ ring (they wait in the kernel until an Enter with EnterGetEvents
// flushes them; FeatNoDrop).
func (r *Ring) Overflow() uint32 { return atomic.LoadUint32(r.cqOverflow) }

// Dropped returns the kernel's count of invalid submission entries.
func (r *Ring) Dropped() uint32 { return atomic.LoadUint32(r.sqDropped) }

// RegisterEventFD makes the kernel signal fd on each completion.
func (r *Ring) RegisterEventFD(fd int) error {
	v := int32(fd)
	if _, err := register(r.fd, RegisterEventFD, unsafe.Pointer(&v), 1); err != nil {
		return os.NewSyscallError("io_uring_register(EVENTFD)", err)
	}
	return nil
}

// Probe asks the kernel which opcodes it supports (5.6).
func (r *Ring) Probe() (*Probe, error) {
	p := new(Probe)
	if _, err := register(r.fd, RegisterProbe, unsafe.Pointer(p), uint32(len(p.Ops))); err != nil {
		return nil, os.NewSyscallError("io_uring_register(PROBE)", err)
	}
	return p, nil
}

// IsTemporary reports whether an Enter error is a normal interruption to
// retry (a signal, a timed-out wait, or a busy completion queue to reap
// first) rather than a ring failure.
func IsTemporary(err error) bool {
	return errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.ETIME) ||
		errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EBUSY)
}
