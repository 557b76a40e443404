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
	"github.com/ringpoll/ringpoll/internal/poison"
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
	_, err := p.ring.Enter(p.ring.Flush(), wait, flags, nil, 0)
	if err != nil && !uring.IsTemporary(err) {
		panic("ringpoll: io_uring_enter: " + err.Error())
	}
}

// Recv fills dst with datagrams that arrived, waiting until at least one
// has, and returns how many; or 0 once every send queued has completed
// and one of them failed, for the caller to see to with WaitSends. Their buffers stay out of the ring until
// Give. It returns ErrStopped after Stop, having torn the ring down
// (again and again, once it is), and an error the RECVMSG ended with
// (other than for want of buffers), after which a call arms it again.
func (p *PacketRing) Recv(dst []Datagram) (int, error) {
	if p.down.Load() {
		return 0, ErrStopped
	}
	for {
		p.replenish()
		if p.stopped.Load() {
			p.shutdown()
			return 0, ErrStopped
		}
		n, err := p.take(dst)
		if n > 0 || err != nil {
			if p.ring.SQReady() > 0 {
				// The last batch's replies go out now, before the caller
				// handles this one, rather than with the next wait.
				p.enter(0)
			}
			return n, err
		}
		if p.failed && p.sending == 0 {
			return 0, nil // the sender must see to it: WaitSends
		}
		// Every completion reaped is handled: the arm state is current.
		if !p.armed {
			if p.taken < p.arena.Count() {
				if p.dry {
					p.Rearms.Add(1)
				}
				p.arm()
			} else {
				// Dry: sleep until a Give or Stop writes the eventfd.
				p.waiting.Store(true)
				if !p.returned.empty() || p.stopped.Load() {
					p.waiting.Store(false)
					continue
				}
			}
		}
		p.wait()
		p.waiting.Store(false)
	}
}

// Slept reports whether Recv parked in Go's poller for datagrams since
// the last call: whether the reader surely gave its P up.
func (p *PacketRing) Slept() bool {
	s := p.slept
	p.slept = false
	return s
}

// newParker registers a non-blocking duplicate of the ring's descriptor
// with Go's poller.
func (p *PacketRing) newParker() error {
	file, rc, err := pollRing(p.ring)
	if err != nil {
		return err
	}
	p.park = &packetParker{file: file, rc: rc, ready: p.readyToRun}
	return nil
}

// wait submits what is queued and sleeps until a completion is ready: in
// io_uring_enter, or for a parked ring in Go's poller.
func (p *PacketRing) wait() {
	if p.park == nil {
		p.enter(1)
		return
	}
	p.followThread()
	if p.testWait != nil {
		p.testWait()
	}
	if p.ring.SQReady() > 0 {
		p.enter(0)
	}
	p.readyLooks = 0
	if err := p.park.rc.Read(p.park.ready); err != nil {
		panic("ringpoll: waiting for io_uring completions: " + err.Error())
	}
	// More than one look: the poller parked the reader, and others had
	// its P. A wait in the kernel gives it up only if sysmon takes it.
	p.slept = p.slept || p.readyLooks > 1
}

// readyToRun reports whether a parked reader has completions to reap;
// the poller parks it until the ring's descriptor polls readable. Task
// work queued for this thread runs first: with COOP_TASKRUN it waits for
// the thread to enter the kernel.
func (p *PacketRing) readyToRun(uintptr) bool {
	p.readyLooks++
	if p.ring.SQFlags()&uring.SQTaskrun != 0 {
		p.ring.Enter(0, 0, uring.EnterGetEvents, nil, 0)
	}
	return p.ring.CQReady() > 0
}

// followThread looks, every threadEvery waits, at the thread a parked
// reader runs on; once it was seen settleSamples times in a row on
// another than the one that armed the RECVMSG, it cancels the RECVMSG,
// which Recv then arms again from here.
func (p *PacketRing) followThread() {
	if p.waits++; p.waits%threadEvery != 0 || !p.armed || p.canceling {
		return
	}
	tid := unix.Gettid()
	switch {
	case tid == p.armTid:
		p.seen = 0
		return
	case tid == p.seenTid:
		p.seen++
	default:
		p.seenTid, p.seen = tid, 1
	}
	if p.seen < settleSamples {
		return
	}
	sqe := p.getSQE()
	sqe.PrepCancel64(udRecv, 0)
	sqe.UserData = udCancel
	p.canceling = true
	p.Moves.Add(1)
}

// take turns reaped completions into datagrams, up to len(dst).
func (p *PacketRing) take(dst []Datagram) (n int, err error) {
	for n < len(dst) {
		var cqe *uring.CQE
		switch {
		case len(p.backlog) > 0:
			cqe = &p.backlog[0]
			p.backlog = p.backlog[1:]
		case len(p.next) > 0:
			cqe = &p.next[0]
			p.next = p.next[1:]
		default:
			k := p.ring.PeekCQE(p.cqes[:])
			if k == 0 {
				return n, nil
			}
			p.next = p.cqes[:k]
			continue
		}
		if p.other(cqe) {
			continue
		}
		if cqe.Flags&uring.CQEFBuffer != 0 {
			p.taken++
			p.out.Add(1)
			if cqe.Res > 0 && p.parse(&dst[n], cqe) {
				n++
			} else {
				p.Give(cqe.BufID())
			}
		}
		if cqe.More() {
			continue
		}
		p.armed = false
		switch {
		case p.canceling && cqe.Res == -int32(unix.ECANCELED):
			// Moved: armed again from the reader's thread.
		case cqe.Res == -int32(unix.ENOBUFS):
			p.dry = true
			p.NoBuffers.Add(1)
		case cqe.Res < 0 && cqe.Res != -int32(unix.ECANCELED):
			return n, os.NewSyscallError("recvmsg", syscall.Errno(-cqe.Res))
		default:
			p.Rearms.Add(1) // the kernel ended it without a cause we know
		}
	}
	return n, nil
}

// other handles a completion that is not the RECVMSG's and reports
// whether it was one.
func (p *PacketRing) other(cqe *uring.CQE) bool {
	switch cqe.UserData & 0xff {
	case udWake:
		p.armWake()
	case udCancel:
	case udSend:
		p.sending--
		p.results = append(p.results, SendResult{I: int(cqe.UserData >> 8), Res: cqe.Res})
		p.failed = p.failed || cqe.Res < 0
	default:
		return false
	}
	return true
}

// QueueSend queues a SENDMSG of msg as send number i; the next Recv or
// WaitSends submits it. msg and the memory it points to must stay put
// and unchanged until WaitSends has returned its result. Reader only.
func (p *PacketRing) QueueSend(msg *unix.Msghdr, i int) {
	sqe := p.getSQE()
	sqe.PrepSendmsg(p.fd, (*uring.Msghdr)(unsafe.Pointer(msg)), 0)
	sqe.UserData = udSend | uint64(i)<<8
	p.sending++
}

// WaitSends submits the queued sends, waits until every send queued has
// completed, and returns their results, valid until the next call.
// Datagrams that arrive meanwhile wait for Recv. Reader only; after the
// ring was torn down it returns the results of the sends teardown waited
// for.
func (p *PacketRing) WaitSends() []SendResult {
	p.waitSends()
	r := p.results
	p.results, p.failed = p.results[:0], false
	return r
}

// waitSends is WaitSends, leaving the results where they are.
func (p *PacketRing) waitSends() {
	if p.sending > 0 {
		// Recv's completions move to the backlog, so that reaping
		// here does not overwrite them. A Recv that filled its dst left
		// the rest of what it reaped there, sends' completions among
		// them: those count now, or the wait below would be for
		// completions already taken off the CQ.
		p.backlog = append(p.backlog, p.next...)
		p.next = nil
		kept := p.backlog[:0]
		for _, cqe := range p.backlog {
			if cqe.UserData&0xff == udSend {
				p.other(&cqe)
			} else {
				kept = append(kept, cqe)
			}
		}
		p.backlog = kept
	}
	for p.sending > 0 {
		if p.ring.SQReady() > 0 || p.ring.CQReady() == 0 {
			// Sends Recv submitted have mostly completed already (a
			// datagram's SENDMSG does inline): enter only to submit or
			// for what is still missing.
			p.enter(1)
		}
		for k := p.ring.PeekCQE(p.cqes[:]); k > 0; k = p.ring.PeekCQE(p.cqes[:]) {
			for i := range p.cqes[:k] {
				if !p.other(&p.cqes[i]) {
					p.backlog = append(p.backlog, p.cqes[i])
				}
			}
		}
	}
}

// parse fills d from the buffer a RECVMSG completion carries.
func (p *PacketRing) parse(d *Datagram, cqe *uring.CQE) bool {
	bid := cqe.BufID()
	b := p.arena.Buf(int(bid))[:cqe.Res]
	if len(b) < recvmsgOutSize+nameSpace+p.ctl {
		return false
	}
	h := (*uring.RecvmsgOut)(unsafe.Pointer(&b[0]))
	data := b[recvmsgOutSize+nameSpace+p.ctl:]
	data = data[:min(len(data), p.max):min(len(data), p.max)]
	*d = Datagram{Data: data, Size: int(h.Payloadlen), Bid: bid}
	d.Truncated = h.Flags&unix.MSG_TRUNC != 0 || d.Size > len(data)
	if h.Namelen > 0 {
		d.Addr = mmsg.DecodeAddr((*unix.RawSockaddrInet6)(unsafe.Pointer(&b[recvmsgOutSize])), min(h.Namelen, nameSpace))
	}
	if p.ctl > 0 && !d.Truncated {
		ctl := b[recvmsgOutSize+nameSpace:][:min(int(h.Controllen), p.ctl)]
		d.Segment = mmsg.GROSegment(ctl)
	}
	return true
}

// Give returns buffer bid, handed out by Recv, to the ring. Safe for
// concurrent use, also after Stop.
func (p *PacketRing) Give(bid uint16) { p.GiveAll([]uint16{bid}) }

// GiveAll returns buffers handed out by Recv, as Give does, with one
// atomic update for all of them. Under the ringpoison tag each is
// poisoned first: a Datagram's Data read after it went back shows the
// pattern.
func (p *PacketRing) GiveAll(bids []uint16) {
	if len(bids) == 0 {
		return
	}
	if poison.Enabled {
		for _, bid := range bids {
			poison.Fill(p.arena.Buf(int(bid)))
		}
	}
	p.returned.pushAll(bids)
	if p.waiting.Load() {
		p.wake()
	}
	if p.out.Add(-int64(len(bids))) == 0 && p.down.Load() {
		p.freeArena()
	}
}

// replenish puts given-back buffers in the ring.
func (p *PacketRing) replenish() {
	if p.returned.empty() {
		return
	}
	p.giving = p.returned.takeAll(p.giving[:0])
	for i, bid := range p.giving {
		p.bufs.Add(p.arena.Buf(int(bid)), bid, i)
	}
	p.bufs.Advance(len(p.giving))
	p.taken -= len(p.giving)
}

func (p *PacketRing) wake() { p.ev.Signal() }

// Stop makes Recv return ErrStopped, now if it waits. Safe from any
// goroutine; the reader then tears the ring down.
func (p *PacketRing) Stop() {
	if p.stopped.CompareAndSwap(false, true) {
		p.wake()
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
