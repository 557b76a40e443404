//go:build linux

package uringp

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/mmsg"
	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/uring"
)

// PacketRing reads one datagram socket with a multishot RECVMSG into a
// provided-buffer ring, on an io_uring of its own: one request stays
// armed, the kernel fills a buffer per datagram (header, source address,
// control messages, payload), and one io_uring_enter both waits and
// collects as many datagrams as arrived. It is the uring engines' packet
// reader; a PacketRing is not shared with the connection loops, whose
// buffers are sized for streams.
//
// The goroutine that makes a PacketRing must be locked to its thread
// (runtime.LockOSThread) and alone calls Recv and Close's wait; the ring
// is SINGLE_ISSUER. Give and Stop are safe from any goroutine.
type PacketRing struct {
	ring  *uring.Ring
	fd    int // the socket, the caller's until teardown
	arena *uring.Arena
	bufs  *uring.BufRing
	page  []byte // mmap'd: the RECVMSG template and the wake READ's target
	msg   *uring.Msghdr
	ev    *poll.EventFD // Give and Stop wake a dry or stopped reader with it
	ctl   int           // control bytes in each buffer
	max   int           // payload bytes a datagram may fill
	cqes  [128]uring.CQE
	next  []uring.CQE // reaped, not yet handed out
	// backlog holds RECVMSG completions WaitSends reaped, for Recv.
	backlog []uring.CQE

	sending int          // SENDMSGs queued or in flight
	results []SendResult // completed sends, until WaitSends returns them
	failed  bool         // one of results is an error

	armed    bool // the RECVMSG is in flight
	dry      bool // it ended for want of buffers
	taken    int  // buffers out of the ring as the reader sees it
	returned idStack
	giving   []uint16
	waiting  atomic.Bool // Recv waits with the ring dry: Give wakes it
	stopped  atomic.Bool
	down     atomic.Bool  // torn down
	out      atomic.Int64 // buffers handed out and not given back
	freed    atomic.Bool  // the arena went back to the pool

	// A parked ring's reader sleeps in Go's poller (park.go); these
	// follow the thread it runs on, as a parked loop does.
	park       *packetParker
	armTid     int // the thread that armed the RECVMSG
	seenTid    int // the thread the reader was last seen on
	seen       int // looks in a row that saw seenTid
	waits      int
	slept      bool   // Recv parked in Go's poller since Slept last looked
	readyLooks int    // readyToRun's calls in this wait
	canceling  bool   // a cancel of the RECVMSG is in flight
	testWait   func() // tests: called as a parked reader is about to wait
	testNoWake bool   // tests: Stop's eventfd write wakes nothing

	// Rearms counts RECVMSGs armed again after one ended (ENOBUFS, or a
	// final CQE the kernel sent on its own); NoBuffers counts the ends
	// for want of buffers; Moves counts RECVMSGs cancelled and armed
	// again because a parked reader moved to another thread.
	Rearms, NoBuffers, Moves atomic.Uint64
}

// packetParker is what a parked PacketRing's reader waits on: a
// non-blocking duplicate of the ring's descriptor in Go's poller.
type packetParker struct {
	file  *os.File
	rc    syscall.RawConn
	ready func(uintptr) bool
}

// Datagram is one datagram a PacketRing received: Data views the ring's
// buffer Bid until Give returns it.
type Datagram struct {
	Data      []byte
	Addr      netip.AddrPort
	Size      int  // length as sent
	Truncated bool // Data holds the first part only
	Segment   int  // UDP_GRO segment size, 0 if not coalesced
	Bid       uint16
}

// User data of a PacketRing's requests: a SENDMSG carries its number in
// the bits above udSend.
const (
	udRecv = iota + 1
	udWake
	udCancel
	udSend
)

// SendResult is the outcome of the SENDMSG that QueueSend numbered I: the
// bytes sent, or -errno.
type SendResult struct {
	I   int
	Res int32
}

// The buffer's layout: RecvmsgOut, the source address, control messages,
// payload.
const (
	recvmsgOutSize = int(unsafe.Sizeof(uring.RecvmsgOut{}))
	nameSpace      = unix.SizeofSockaddrInet6
)

// ErrStopped is returned by Recv once Stop was called.
var ErrStopped = net.ErrClosed

// NewPacketRing sets up a ring reading socket fd into count buffers (a
// power of two) of payload bytes each, with room for a UDP_GRO control
// message if gro. The calling goroutine must be locked to its thread.
//
// The ring arms its requests on fd itself, and arms them again by that
// number: the caller keeps fd open until the ring is torn down (Recv has
// returned ErrStopped), so that the number never names another file.
// The armed RECVMSG holds the socket open in the kernel as a descriptor
// would, until teardown cancels it.
func NewPacketRing(fd, count, payload int, gro bool) (*PacketRing, error) {
	return newPacketRing(fd, count, payload, gro, false)
}

// NewParkedPacketRing is NewPacketRing for a reader that need not be
// locked to a thread: Recv sleeps in Go's network poller on the ring's
// descriptor, as a parked loop does (park.go), instead of in
// io_uring_enter. A reader asleep in a system call holds a thread whose P
// the runtime's sysmon takes away and hands on, with a thread switch or
// two each time; a reader parked in the poller is an ordinary goroutine.
// The ring then has no SINGLE_ISSUER and no DEFER_TASKRUN, and when the
// reader settles on another thread, it re-arms its RECVMSG from there, so
// that arrivals do not wake the thread that armed it.
func NewParkedPacketRing(fd, count, payload int, gro bool) (*PacketRing, error) {
	return newPacketRing(fd, count, payload, gro, true)
}

func newPacketRing(fd, count, payload int, gro, parked bool) (*PacketRing, error) {
	if count <= 0 || count > 1<<15 || count&(count-1) != 0 {
		return nil, errors.New("uring: packet ring: the buffer count must be a power of two up to 32768")
	}
	p := &PacketRing{fd: fd, max: payload}
	if gro {
		p.ctl = mmsg.ControlSpace
	}
	var err error
	if parked {
		p.ring, err = newRing(64, uring.Params{CQEntries: uint32(max(256, 2*count))}, parkedFlags)
	} else {
		p.ring, err = newLoopRing(64, uint32(max(256, 2*count)))
	}
	if err != nil {
		return nil, err
	}
	if parked {
		if err := p.newParker(); err != nil {
			p.teardown()
			return nil, err
		}
	}
	if p.ev, err = poll.NewEventFD(); err != nil {
		p.teardown()
		return nil, err
	}
	if p.page, err = unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
		p.page = nil
		p.teardown()
		return nil, os.NewSyscallError("mmap", err)
	}
	p.msg = (*uring.Msghdr)(unsafe.Pointer(&p.page[64]))
	p.msg.Namelen = nameSpace
	p.msg.Controllen = uint64(p.ctl)
	size := (recvmsgOutSize + nameSpace + p.ctl + payload + 63) &^ 63
	if p.arena, err = getArena(count, size); err != nil {
		p.teardown()
		return nil, err
	}
	if p.bufs, err = uring.NewBufRing(p.ring, count, 0); err != nil {
		p.teardown()
		return nil, err
	}
	p.returned.next = make([]uint32, count)
	for i := range count {
		p.bufs.Add(p.arena.Buf(i), uint16(i), i)
	}
	p.bufs.Advance(count)
	p.armWake()
	return p, nil
}

func (p *PacketRing) armWake() {
	sqe := p.getSQE()
	sqe.PrepRead(p.ev.FD(), p.page[:8])
	sqe.UserData = udWake
}

func (p *PacketRing) arm() {
	if p.park != nil {
		p.armTid, p.seen, p.canceling = unix.Gettid(), 0, false
	}
	sqe := p.getSQE()
	// MSG_TRUNC: the header then gives a cut datagram's full length.
	sqe.PrepRecvmsgMultishot(p.fd, p.msg, unix.MSG_TRUNC, 0)
	sqe.UserData = udRecv
	p.armed, p.dry = true, false
}

func (p *PacketRing) getSQE() *uring.SQE {
	for {
		if sqe := p.ring.GetSQE(); sqe != nil {
			return sqe
		}
		p.enter(0)
	}
}

// enter submits what is queued and waits for wait completions.
func (p *PacketRing) enter(wait uint32) {
	flags := uint32(0)
	if wait > 0 || p.ring.SQFlags()&(uring.SQTaskrun|uring.SQCQOverflow) != 0 {
		flags = uring.EnterGetEvents
	}
	_, err := enter(p.ring, p.ring.Flush(), wait, flags, nil, 0, false)
	if err != nil && !uring.IsTemporary(err) {
		panic("ringpoll: io_uring_enter: " + err.Error())
	}
}

func (p *PacketRing) wake() {
	if !p.testNoWake {
		p.ev.Signal()
	}
}

// Stop makes Recv return ErrStopped, now if it waits. Safe from any
// goroutine; the reader then tears the ring down.
func (p *PacketRing) Stop() {
	if p.stopped.CompareAndSwap(false, true) {
		p.wake()
		if p.park != nil {
			// The eventfd wakes a parked reader only through the ring:
			// the wake READ completes in the task work of the thread that
			// armed it. A passed deadline ends the poller's wait whatever
			// that thread does (wait).
			p.park.file.SetReadDeadline(aLongTimeAgo)
		}
	}
}

// shutdown cancels the RECVMSG, waits for its final completion and tears
// the ring down. Datagrams that arrived meanwhile go back unread.
func (p *PacketRing) shutdown() {
	if p.down.Load() {
		return
	}
	p.waitSends() // their results stay for WaitSends
	p.drop(p.backlog)
	p.drop(p.next)
	p.backlog, p.next = nil, nil
	if p.armed {
		sqe := p.getSQE()
		sqe.PrepCancel64(udRecv, 0)
		sqe.UserData = udCancel
	}
	for p.armed {
		p.enter(1)
		for k := p.ring.PeekCQE(p.cqes[:]); k > 0; k = p.ring.PeekCQE(p.cqes[:]) {
			p.drop(p.cqes[:k])
		}
	}
	p.teardown()
}

// drop handles completions without reading them: buffers go back, and a
// final RECVMSG completion disarms.
func (p *PacketRing) drop(cqes []uring.CQE) {
	for i := range cqes {
		cqe := &cqes[i]
		if cqe.UserData != udRecv {
			continue
		}
		if cqe.Flags&uring.CQEFBuffer != 0 {
			p.out.Add(1)
			p.Give(cqe.BufID())
		}
		if !cqe.More() {
			p.armed = false
		}
	}
}

// teardown closes what NewPacketRing made (not the socket, which is the
// caller's). The arena goes back to the
// pool only once every buffer handed out was given back: a reader may
// still look at its datagrams.
func (p *PacketRing) teardown() {
	if p.park != nil {
		p.park.file.Close()
	}
	if p.bufs != nil {
		p.bufs.Close()
	}
	if p.ring != nil {
		p.ring.Close() // ends the wake READ
	}
	if p.ev != nil {
		p.ev.Close()
	}
	if p.page != nil {
		unix.Munmap(p.page)
	}
	p.down.Store(true)
	if p.arena != nil && p.out.Load() == 0 {
		p.freeArena()
	}
}

func (p *PacketRing) freeArena() {
	if p.arena != nil && p.freed.CompareAndSwap(false, true) {
		putArena(p.arena)
	}
}
