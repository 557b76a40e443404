package ringpoll

import (
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"

	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

// ringsPackets reports whether a PacketServer on engine e reads its
// sockets through a PacketRing: the completion engines do; epoll and
// uring-reactor, whose model is readiness then a system call, read with
// recvmmsg(2).
func (e Engine) ringsPackets() bool {
	return e == EngineUring || e == EngineUringHybrid || e == EngineUringSQPoll
}

// openRing sets up the PacketRing of c's reader, with buffers slots of
// size bytes, on c's socket (attachRing: c's lifetime counts it, and
// Close stops it), and registers it to be stopped with the server. The
// reader parks in Go's poller between datagrams
// (uringp.NewParkedPacketRing); a reader pinned to a CPU (WithLoopCPUs)
// instead stays locked to its thread and sleeps in io_uring_enter, as the
// ring belongs to that thread. A kernel that refuses the ring leaves the
// reader on ReadBatch (ring nil, logged); open is false if the socket or
// the server closed meanwhile. The reader ends a ring with closeRing.
func (s *PacketServer) openRing(c *PacketConn, buffers, size int) (rr *ringReader, ring *uringp.PacketRing, open bool) {
	parked := len(s.cfg.loopCPUs()) == 0
	if !parked {
		runtime.LockOSThread()
	}
	count := 1
	for count < buffers {
		count *= 2
	}
	rr, fd, err := c.attachRing()
	if err != nil {
		return nil, nil, false // closed
	}
	if parked {
		ring, err = uringp.NewParkedPacketRing(fd, count, size, c.gro)
	} else {
		ring, err = uringp.NewPacketRing(fd, count, size, c.gro)
	}
	if err != nil {
		c.detachRing(rr)
		s.cfg.logger.Warn("ringpoll: reading datagrams with recvmmsg, the io_uring packet ring failed", "local", c.LocalAddr(), "err", err)
		return nil, nil, true
	}
	c.setRing(rr, ring)
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.rings = append(s.rings, ring)
	}
	s.mu.Unlock()
	if closed {
		closeRing(c, rr, ring)
		return nil, nil, false
	}
	return rr, ring, true
}

// closeRing stops and tears down the ring of c's reader rr (once its
// requests have all ended, none is left in the kernel) and lets go of
// c's socket.
func closeRing(c *PacketConn, rr *ringReader, ring *uringp.PacketRing) {
	ring.Stop()
	ring.Recv(nil) // tears it down
	c.detachRing(rr)
}

// readRing waits for datagrams on ring and makes sb's packets of them,
// as ReadBatch does.
func (c *PacketConn) readRing(ring *uringp.PacketRing, sb *serveBatch) ([]Packet, error) {
	n, err := ring.Recv(sb.ds)
	for err == nil && n == 0 && sb.w.rs != nil {
		// A flight of replies failed: resend or report it now, not when
		// the next datagram comes.
		if err := sb.w.rs.settle(c); err != nil {
			sb.w.log(err)
		}
		n, err = ring.Recv(sb.ds)
	}
	if err != nil {
		return nil, c.opError("read", netip.AddrPort{}, err)
	}
	sb.got = n
	ps := sb.in[:0]
	var cut uint64
	for i := range sb.ds[:n] {
		d := &sb.ds[i]
		if d.Truncated {
			cut++
		}
		if d.Segment > 0 || len(ps) == cap(ps) {
			ps = appendDatagram(ps, Packet{Data: d.Data, Addr: d.Addr, Size: d.Size, Truncated: d.Truncated}, d.Segment)
			continue
		}
		// Field by field, as parse fills d.
		ps = ps[:len(ps)+1]
		p := &ps[len(ps)-1]
		p.Data, p.Addr, p.Size, p.Truncated = d.Data, d.Addr, d.Size, d.Truncated
	}
	c.batches.Add(1)
	c.packets.Add(uint64(len(ps)))
	if cut > 0 {
		c.truncated.Add(cut)
	}
	return ps, nil
}

// ringSends sends an inline handler's replies through the reader's
// PacketRing: Flush queues one SENDMSG per message (a GSO run is one),
// and the reader submits them with one io_uring_enter before it next
// waits (with the wait itself where the reader is pinned) or hands out the
// next batch, however many replies the batch had. The flight's
// packets and headers stay untouched until the next Flush has seen every
// completion (settle); the writer fills a second set meanwhile.
type ringSends struct {
	ring     *uringp.PacketRing
	op       *sendOp
	msgs     int      // SENDMSGs in the flight
	fly      []Packet // the flight's packets
	flyMem   []byte
	spare    []Packet
	spareMem []byte
}

// flush settles the last flight and queues w's packets as the next.
func (rs *ringSends) flush(w *PacketWriter) error {
	err := rs.settle(w.conn)
	if len(w.out) == 0 {
		return err
	}
	if w.conn.closing() {
		// The ring still has the socket, until the reader lets go; the
		// replies fail as WriteBatch's would.
		clear(w.out)
		w.out, w.mem = w.out[:0], w.mem[:0]
		return w.conn.rawError("write", net.ErrClosed)
	}
	o := rs.op
	msgs, used, bad := w.conn.prepareSends(o, w.out, 0)
	for i := range msgs {
		rs.ring.QueueSend(o.h.Msghdr(i), i)
	}
	rs.msgs = msgs
	rs.fly, rs.flyMem = w.out[:used], w.mem
	// A packet that cannot be sent ends the flush there, as in
	// WriteBatch: it and those after it are dropped with the error.
	clear(w.out[used:])
	w.out, w.mem = rs.spare[:0], rs.spareMem[:0]
	if err == nil {
		err = bad
	}
	return err
}

// settle waits for the last flight's completions. A GSO run the kernel
// refused is sent again datagram by datagram, as WriteBatch does.
func (rs *ringSends) settle(c *PacketConn) error {
	if rs.msgs == 0 {
		return nil
	}
	var first error
	sent := 0
	for _, r := range rs.ring.WaitSends() {
		start := 0
		for _, k := range rs.op.counts[:r.I] {
			start += k
		}
		ps := rs.fly[start : start+rs.op.counts[r.I]]
		if r.Res >= 0 {
			sent += len(ps)
			if len(ps) > 1 {
				c.gsoSends.Add(1)
			}
			continue
		}
		errno := syscall.Errno(-r.Res)
		if len(ps) > 1 && c.gsoRefused(errno) {
			// Counted in the stats by writeBatch.
			_, err := c.writeBatch(ps, len(ps))
			if err != nil && first == nil {
				first = err
			}
			continue
		}
		if first == nil {
			first = c.opError("write", ps[0].Addr, os.NewSyscallError("sendmsg", errno))
		}
	}
	c.sendBatches.Add(1)
	c.sent.Add(uint64(sent))
	clear(rs.fly)
	rs.spare, rs.spareMem = rs.fly[:0], rs.flyMem[:0]
	rs.fly, rs.flyMem, rs.msgs = nil, nil, 0
	return first
}
