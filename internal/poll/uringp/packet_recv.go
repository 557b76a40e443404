//go:build linux

package uringp

import (
	"errors"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/mmsg"
	"github.com/ringpoll/ringpoll/internal/poison"
	"github.com/ringpoll/ringpoll/internal/uring"
)

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
		if errors.Is(err, os.ErrDeadlineExceeded) && p.stopped.Load() {
			return // Stop's deadline: Recv tears the ring down
		}
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
		enter(p.ring, 0, 0, uring.EnterGetEvents, nil, 0, false)
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
	// Field by field: a composite literal is built on the stack and
	// copied, and the copy's wide loads stall on the narrow stores.
	size := int(h.Payloadlen)
	d.Data, d.Size, d.Bid, d.Segment = data, size, bid, 0
	d.Truncated = h.Flags&unix.MSG_TRUNC != 0 || size > len(data)
	d.Addr = netip.AddrPort{}
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
