package ringpoll

import (
	"net/netip"
	"runtime"

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
// size bytes, and registers it to be stopped with the server. The reader
// stays locked to its thread: the ring belongs to it. A kernel that
// refuses the ring leaves the reader on ReadBatch (ring nil, logged);
// open is false if the server closed meanwhile.
func (s *PacketServer) openRing(c *PacketConn, buffers, size int) (ring *uringp.PacketRing, open bool) {
	runtime.LockOSThread()
	count := 1
	for count < buffers {
		count *= 2
	}
	var err error
	cerr := c.raw.Control(func(fd uintptr) {
		ring, err = uringp.NewPacketRing(int(fd), count, size, c.gro)
	})
	if cerr != nil {
		return nil, false // closed
	}
	if err != nil {
		s.cfg.logger.Warn("ringpoll: reading datagrams with recvmmsg, the io_uring packet ring failed", "local", c.LocalAddr(), "err", err)
		return nil, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		ring.Stop()
		ring.Recv(nil) // tears it down
		return nil, false
	}
	s.rings = append(s.rings, ring)
	c.ring.Store(ring)
	return ring, true
}

// readRing waits for datagrams on ring and makes sb's packets of them,
// as ReadBatch does.
func (c *PacketConn) readRing(ring *uringp.PacketRing, sb *serveBatch) ([]Packet, error) {
	n, err := ring.Recv(sb.ds)
	if err != nil {
		return nil, c.opError("read", netip.AddrPort{}, err)
	}
	sb.got = n
	ps := sb.in[:0]
	var cut uint64
	for _, d := range sb.ds[:n] {
		if d.Truncated {
			cut++
		}
		ps = appendDatagram(ps, Packet{Data: d.Data, Addr: d.Addr, Size: d.Size, Truncated: d.Truncated}, d.Segment)
	}
	c.batches.Add(1)
	c.packets.Add(uint64(len(ps)))
	if cut > 0 {
		c.truncated.Add(cut)
	}
	return ps, nil
}
