package ringpoll

import (
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
	"net"
)

// MessageConn is a PacketConn with the ReadBatch of x/net's
// ipv4.PacketConn and ipv6.PacketConn: many datagrams, each with its
// control messages, in one recvmmsg(2). quic-go reads through a conn's
// own ReadBatch of that form when it has one, so given a MessageConn
// (quic.Transport{Conn: c.MessageConn()}) its reads are the
// PacketConn's: counted in Stats, ended by Close and by the read
// deadline as c's other reads are. Every other method is c's.
//
// The name is taken on PacketConn by ReadBatch(*Batch), which reads
// without allocating; this one allocates an address per datagram, as
// x/net's does.
type MessageConn struct {
	*PacketConn
}

// MessageConn returns c as a MessageConn.
func (c *PacketConn) MessageConn() MessageConn { return MessageConn{c} }

// ReadBatch reads up to len(ms) datagrams, at least one, waiting for the
// first, as ipv4.PacketConn's ReadBatch does: each message's Buffers take
// the datagram, its OOB the control messages, and N, NN, Flags and Addr (a
// *net.UDPAddr) are set. A datagram longer than the buffers is cut, with
// MSG_TRUNC in Flags. flags are recvmmsg(2)'s (MSG_DONTWAIT is added).
func (c MessageConn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	p, err := c.poller()
	if err != nil {
		return 0, c.rawError("read", err)
	}
	if len(ms) == 0 {
		if c.closing() {
			return 0, c.rawError("read", net.ErrClosed)
		}
		return 0, nil
	}
	x := p.batchConn()
	n, err := x.ReadBatch(ms, flags)
	if err != nil {
		return 0, c.rawError("read", cause(err))
	}
	c.counted(n)
	for i := range ms[:n] {
		if ms[i].Flags&unix.MSG_TRUNC != 0 {
			c.truncated.Add(1)
		}
	}
	return n, nil
}

// batchConn returns x/net's batch calls on the poller's socket, made once.
func (p *polledConn) batchConn() *ipv4.PacketConn {
	p.batchOnce.Do(func() { p.batch = ipv4.NewPacketConn(p.uc) })
	return p.batch
}
