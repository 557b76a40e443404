package ringpoll

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// The message calls of net.UDPConn: a datagram with its control messages
// (oob). With them a PacketConn is what quic-go calls an
// OOBCapablePacketConn, so it takes its fast path on it: it reads ECN
// marks and packet information, and sends runs of datagrams as one
// message the kernel cuts (UDP_SEGMENT), as it does on a net.UDPConn.

// ReadMsgUDP reads one datagram into b and its control messages into oob,
// as net.UDPConn's ReadMsgUDP does: n and oobn are the bytes of each
// copied, flags the message's flags, among them MSG_TRUNC when the
// datagram was longer than b (the rest is discarded; Stats counts it in
// Truncated) and MSG_CTRUNC when its control messages did not fit oob.
// It honours the read deadline.
func (c *PacketConn) ReadMsgUDP(b, oob []byte) (n, oobn, flags int, addr *net.UDPAddr, err error) {
	p, err := c.poller()
	if err != nil {
		return 0, 0, 0, nil, c.rawError("read", err)
	}
	n, oobn, flags, addr, err = p.uc.ReadMsgUDP(b, oob)
	c.readMsgDone(flags, err)
	return n, oobn, flags, addr, c.polledError(err)
}

// ReadMsgUDPAddrPort is ReadMsgUDP with the sender as a netip.AddrPort.
func (c *PacketConn) ReadMsgUDPAddrPort(b, oob []byte) (n, oobn, flags int, addr netip.AddrPort, err error) {
	p, err := c.poller()
	if err != nil {
		return 0, 0, 0, netip.AddrPort{}, c.rawError("read", err)
	}
	n, oobn, flags, addr, err = p.uc.ReadMsgUDPAddrPort(b, oob)
	c.readMsgDone(flags, err)
	return n, oobn, flags, addr, c.polledError(err)
}

// readMsgDone counts a message read.
func (c *PacketConn) readMsgDone(flags int, err error) {
	if err != nil {
		return
	}
	c.counted(1)
	if flags&unix.MSG_TRUNC != 0 {
		c.truncated.Add(1)
	}
}

// sentMsg counts a message of n bytes sent with the control messages
// oob: as many datagrams as a UDP_SEGMENT among them cut it into.
func (c *PacketConn) sentMsg(n int, oob []byte) {
	c.sendBatches.Add(1)
	seg := gsoSegment(oob)
	if seg <= 0 || n <= seg {
		c.sent.Add(1)
		return
	}
	c.gsoSends.Add(1)
	c.sent.Add(uint64((n + seg - 1) / seg))
}

// gsoSegment returns the segment size a UDP_SEGMENT control message in
// oob asks for, or 0.
func gsoSegment(oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_UDP && m.Header.Type == unix.UDP_SEGMENT && len(m.Data) >= 2 {
			return int(binary.NativeEndian.Uint16(m.Data))
		}
	}
	return 0
}

// WriteMsgUDP sends b as one datagram to addr with the control messages
// oob, as net.UDPConn's WriteMsgUDP does: on a connected PacketConn addr
// must be nil (else net.ErrWriteToConnected), on an unconnected one it
// must not. A UDP_SEGMENT control message makes the kernel cut b into
// datagrams of that size (GSO). It honours the write deadline.
func (c *PacketConn) WriteMsgUDP(b, oob []byte, addr *net.UDPAddr) (n, oobn int, err error) {
	if addr == nil {
		return c.writeMsg(b, oob, netip.AddrPort{}, nil)
	}
	return c.writeMsg(b, oob, addr.AddrPort(), addr)
}

// WriteMsgUDPAddrPort is WriteMsgUDP with the destination as a
// netip.AddrPort (the zero AddrPort on a connected PacketConn).
func (c *PacketConn) WriteMsgUDPAddrPort(b, oob []byte, addr netip.AddrPort) (n, oobn int, err error) {
	// Its errors name addr even when it is the zero AddrPort, as net's do.
	return c.writeMsg(b, oob, addr, net.UDPAddrFromAddrPort(addr))
}

// errNoAddress is a message call's error for a missing destination,
// worded as net's.
var errNoAddress = errors.New("missing address")

// writeMsg is WriteMsgUDP and WriteMsgUDPAddrPort; a is addr for errors.
// The poller's net.UDPConn, made from a descriptor, does not know that
// its socket is connected, so a connected PacketConn checks, and sends
// without an address itself.
func (c *PacketConn) writeMsg(b, oob []byte, addr netip.AddrPort, a net.Addr) (n, oobn int, err error) {
	switch {
	case c.raddr != nil && addr.IsValid():
		return 0, 0, c.writeError(a, net.ErrWriteToConnected)
	case c.raddr == nil && !addr.IsValid():
		return 0, 0, c.writeError(a, errNoAddress)
	}
	p, err := c.poller()
	if err != nil {
		return 0, 0, c.rawError("write", err)
	}
	if c.raddr == nil {
		n, oobn, err = p.uc.WriteMsgUDPAddrPort(b, oob, addr)
		if err == nil {
			c.sentMsg(n, oob)
		}
		return n, oobn, c.polledError(err)
	}
	var serr error
	err = p.raw.Write(func(fd uintptr) bool {
		n, serr = unix.SendmsgN(int(fd), b, oob, nil, unix.MSG_DONTWAIT)
		return serr != unix.EAGAIN
	})
	if err == nil && serr != nil {
		err = os.NewSyscallError("sendmsg", serr)
	}
	if err != nil {
		return 0, 0, c.writeError(c.raddr, err)
	}
	c.sentMsg(n, oob)
	return n, len(oob), nil
}
