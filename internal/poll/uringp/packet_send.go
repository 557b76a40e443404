//go:build linux

package uringp

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/uring"
)

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
