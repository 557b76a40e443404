package ringpoll

import (
	"errors"
	"net/netip"

	"golang.org/x/sys/unix"
)

// readCoalesced is ReadFromAddrPort on a GRO socket, where one receive may
// return many datagrams: it reads them into a Batch of its own and hands
// them out one per call.
func (c *PacketConn) readCoalesced(b []byte) (int, netip.AddrPort, error) {
	c.groMu.Lock()
	defer c.groMu.Unlock()
	if c.groRead == nil {
		c.groRead, _ = NewBatch(1, maxPacketSize)
	}
	for len(c.groNext) == 0 {
		ps, err := c.ReadBatch(c.groRead)
		if err != nil {
			return 0, netip.AddrPort{}, err
		}
		c.groNext = ps
	}
	p := c.groNext[0]
	c.groNext = c.groNext[1:]
	n := copy(b, p.Data)
	if n < p.Size {
		c.truncated.Add(1)
	}
	return n, p.Addr, nil
}

// coalesced makes the Packets of a read on a GRO socket, where a message
// may hold many datagrams, and counts those cut.
func (b *Batch) coalesced() (ps []Packet, cut uint64) {
	ps = b.pkts[:0]
	for i := range b.got {
		mem := b.mem[i*b.size : (i+1)*b.size]
		p := Packet{Addr: b.h.Addr(i), Size: b.h.Size(i), Truncated: b.h.Truncated(i)}
		seg := 0
		if p.Truncated {
			cut++
			p.Data = mem
		} else {
			p.Data = mem[:p.Size:p.Size]
			seg = b.h.Segment(i)
		}
		ps = appendDatagram(ps, p, seg)
	}
	if cap(ps) > cap(b.pkts) {
		b.pkts = ps // grown once, for coalesced datagrams
	}
	return ps, cut
}

// appendDatagram appends p to ps, cut into datagrams of seg bytes if the
// kernel coalesced several (UDP_GRO; seg 0: it did not).
func appendDatagram(ps []Packet, p Packet, seg int) []Packet {
	if p.Truncated || seg <= 0 || seg >= p.Size {
		return append(ps, p)
	}
	for off := 0; off < p.Size; off += seg {
		end := min(off+seg, p.Size)
		ps = append(ps, Packet{Data: p.Data[off:end:end], Addr: p.Addr, Size: end - off})
	}
	return ps
}

var errGROBatch = errors.New("ringpoll: a GRO socket needs Batch slots of 65535 bytes")

// gsoProbe reports whether the kernel knows UDP_SEGMENT for socket fd; a
// variable so that a test can play a kernel without it.
var gsoProbe = probeGSO

// gsoSegments bounds the datagrams one UDP_SEGMENT message carries (the
// kernel's UDP_MAX_SEGMENTS is 64 or more).
const gsoSegments = 64

// gsoRefused reports whether err, the failure of a segmented message,
// is the kernel refusing to cut it, so that the run goes again datagram
// by datagram, and counts it (PacketStats.GSOFallbacks). EIO means the
// device cannot checksum the datagrams (udp_send_skb in
// net/ipv4/udp.c), which holds for the socket's route, not for one peer:
// it ends GSO for the PacketConn. EINVAL (SO_NO_CHECK, too many
// segments), EMSGSIZE (a segment over the path's MTU) and EOPNOTSUPP
// concern this message; the next run is offered segmented again, and
// nothing is kept per destination, whose number a peer sending from
// spoofed sources would choose.
func (c *PacketConn) gsoRefused(err error) bool {
	switch err {
	case unix.EIO:
		c.gso.Store(false)
	case unix.EINVAL, unix.EMSGSIZE, unix.EOPNOTSUPP:
	default:
		return false
	}
	c.gsoFallbacks.Add(1)
	return true
}

// samePeer reports whether a and b are one destination: an IPv4 address
// and its IPv4-mapped form are.
func samePeer(a, b netip.AddrPort) bool {
	return a == b || a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// probeGSO asks the kernel whether it knows UDP_SEGMENT (Linux 4.18): one
// that does not would ignore the control message and send a run as one
// datagram of all its payloads, and getsockopt(2) of it fails there.
func probeGSO(fd int) bool {
	_, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT)
	return err == nil
}
