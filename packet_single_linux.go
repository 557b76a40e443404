package ringpoll

import (
	"net"
	"net/netip"
	"os"
	"unsafe"

	"github.com/ringpoll/ringpoll/internal/mmsg"
	"golang.org/x/sys/unix"
)

// ReadFromAddrPort reads one datagram into b and returns its length and
// sender. A datagram longer than b fills b and the rest is discarded, with
// no error, as net's ReadFromUDPAddrPort does (servers such as quic-go's
// and miekg/dns's stop on any error that is not temporary): Stats counts
// it in Truncated.
func (c *PacketConn) ReadFromAddrPort(b []byte) (int, netip.AddrPort, error) {
	return c.readFrom(b, "recvfrom")
}

// readFrom reads one datagram into b; an error of the system call is
// reported under the name call, which is the one net's method of the same
// name calls (recvfrom(2) for ReadFrom, read(2) for Read).
func (c *PacketConn) readFrom(b []byte, call string) (int, netip.AddrPort, error) {
	if c.gro {
		return c.readCoalesced(b)
	}
	p, err := c.poller()
	if err != nil {
		return 0, netip.AddrPort{}, c.rawError("read", err)
	}
	o := c.recvs.Get().(*recvOp)
	defer c.recvs.Put(o)
	o.buf = b
	err = p.raw.Read(o.recvFn)
	o.buf = nil
	if err != nil {
		return 0, netip.AddrPort{}, c.rawError("read", err)
	}
	addr := mmsg.DecodeAddr(&o.from, o.fromLen)
	if o.err != nil {
		return 0, addr, c.opError("read", addr, os.NewSyscallError(call, o.err))
	}
	c.counted(1)
	if o.n > len(b) {
		c.truncated.Add(1)
		return len(b), addr, nil
	}
	return o.n, addr, nil
}

// recvOp is one single-datagram read: recvfrom(2) with MSG_TRUNC, which
// returns the datagram's whole length, so a cut one is seen (std's
// ReadFromUDPAddrPort does not ask, and ReadMsgUDPAddrPort's recvmsg costs
// more). Pooled per PacketConn, with its callback bound once.
type recvOp struct {
	buf     []byte
	n       int
	from    unix.RawSockaddrInet6
	fromLen uint32
	err     error
	recvFn  func(uintptr) bool
}

func newRecvOp() *recvOp {
	o := &recvOp{}
	o.recvFn = o.recv
	return o
}

func (o *recvOp) recv(fd uintptr) bool {
	var p unsafe.Pointer
	if len(o.buf) > 0 {
		p = unsafe.Pointer(&o.buf[0])
	}
	for {
		o.fromLen = unix.SizeofSockaddrInet6
		// MSG_DONTWAIT: it cannot sleep, so it need not tell the
		// scheduler (see mmsg.Headers.Recv).
		r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(p), uintptr(len(o.buf)), unix.MSG_TRUNC|unix.MSG_DONTWAIT,
			uintptr(unsafe.Pointer(&o.from)), uintptr(unsafe.Pointer(&o.fromLen)))
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		case 0:
			o.n, o.err = int(r), nil
		default:
			o.n, o.err, o.fromLen = 0, e, 0
		}
		return true
	}
}

// ReadFrom implements net.PacketConn; see ReadFromAddrPort.
func (c *PacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, ap, err := c.ReadFromAddrPort(b)
	if !ap.IsValid() {
		return n, nil, err
	}
	return n, net.UDPAddrFromAddrPort(ap), err
}

// Read implements net.Conn: it reads one datagram, from the connected
// peer on a PacketConn from DialPacket, from anyone otherwise. A Read into
// an empty b returns 0 and no error at once, leaving the next datagram
// where it is, as net's does.
func (c *PacketConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		// internal/poll's FD.Read returns before it calls read(2), which
		// would take the datagram; only a closed socket fails it.
		if err := c.control(func(int) {}); err != nil {
			return 0, c.rawError("read", err)
		}
		return 0, nil
	}
	n, _, err := c.readFrom(b, "read")
	return n, err
}

// WriteToAddrPort sends b as one datagram to addr. On a connected
// PacketConn it fails with net.ErrWriteToConnected, as net's does.
func (c *PacketConn) WriteToAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	if c.raddr != nil {
		return 0, c.writeError(net.UDPAddrFromAddrPort(addr), net.ErrWriteToConnected)
	}
	if len(b) > c.maxTo(addr.Addr()) {
		return 0, c.writeError(net.UDPAddrFromAddrPort(addr), ErrMessageTooLong)
	}
	p, err := c.poller()
	if err != nil {
		return 0, c.writeError(net.UDPAddrFromAddrPort(addr), err)
	}
	n, err := p.uc.WriteToUDPAddrPort(b, addr)
	c.sentOne(err)
	return n, c.polledError(err)
}

// WriteTo implements net.PacketConn: it sends b as one datagram to addr, a
// *net.UDPAddr. On a connected PacketConn it fails with
// net.ErrWriteToConnected, as net's does.
func (c *PacketConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	// The poller's net.UDPConn, made from a descriptor, does not know the
	// socket is connected, and would send: refuse here, after the
	// argument check net makes first.
	if a, ok := addr.(*net.UDPAddr); ok && c.raddr != nil {
		if a == nil {
			addr = nil // as net reports a nil *net.UDPAddr
		}
		return 0, c.writeError(addr, net.ErrWriteToConnected)
	}
	if len(b) > c.maxTo(udpAddrIP(addr)) {
		return 0, c.writeError(addr, ErrMessageTooLong)
	}
	p, err := c.poller()
	if err != nil {
		return 0, c.writeError(addr, err)
	}
	n, err := p.uc.WriteTo(b, addr)
	c.sentOne(err)
	return n, c.polledError(err)
}

// writeError is the error of a write to addr, as net's.
func (c *PacketConn) writeError(addr net.Addr, err error) error {
	return &net.OpError{Op: "write", Net: c.network, Source: c.LocalAddr(), Addr: addr, Err: cause(err)}
}

// Write implements net.Conn: it sends b as one datagram to the connected
// peer.
func (c *PacketConn) Write(b []byte) (int, error) {
	if len(b) > c.max {
		return 0, c.opError("write", netip.AddrPort{}, ErrMessageTooLong)
	}
	p, err := c.poller()
	if err != nil {
		return 0, c.rawError("write", err)
	}
	n, err := p.uc.Write(b)
	c.sentOne(err)
	return n, c.polledError(err)
}

// counted counts one receive call that returned n datagrams.
func (c *PacketConn) counted(n int) {
	c.batches.Add(1)
	c.packets.Add(uint64(n))
}

// sentOne counts a send of one datagram, if it went out.
func (c *PacketConn) sentOne(err error) {
	if err == nil {
		c.sendBatches.Add(1)
		c.sent.Add(1)
	}
}

// udpAddrIP is the IP of a *net.UDPAddr, or the zero Addr for anything
// else, which the write then refuses.
func udpAddrIP(addr net.Addr) netip.Addr {
	if a, ok := addr.(*net.UDPAddr); ok && a != nil {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip
	}
	return netip.Addr{}
}
