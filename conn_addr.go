package ringpoll

import (
	"net"
	"net/netip"
	"unsafe"
)

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr {
	switch {
	case c.laddr != nil && c.network == netUnix:
		return (*net.UnixAddr)(c.laddr)
	case c.laddr != nil:
		return (*net.TCPAddr)(c.laddr)
	}
	if x := c.extra.Load(); x != nil && x.laddr != nil {
		return x.laddr
	}
	return nil
}

// setLocal keeps a as the local address: in laddr if it is of the
// network's type, else in extra. Called by newConn only.
func (c *Conn) setLocal(a net.Addr) {
	switch a := a.(type) {
	case nil:
	case *net.TCPAddr:
		if a != nil && c.network != netUnix {
			c.laddr = unsafe.Pointer(a)
			return
		}
	case *net.UnixAddr:
		if a != nil && c.network == netUnix {
			c.laddr = unsafe.Pointer(a)
			return
		}
	}
	if a != nil {
		c.extras().laddr = a
	}
}

// setPeer keeps the peer's address: an IP address without a zone as a
// value, anything else in extra. Called by newConn only.
func (c *Conn) setPeer(r remote) {
	switch {
	case r.addr != nil:
		c.extras().setRemote(r.addr)
	case !r.ap.IsValid():
		// None: the peer was gone before its address was read.
	case r.ap.Addr().Zone() != "":
		c.extras().setRemote(net.TCPAddrFromAddrPort(r.ap))
	default:
		a := r.ap.Addr()
		c.peerIP, c.peerPort = a.As16(), r.ap.Port()
		if a.Is4() {
			c.bits |= connPeer4
		} else {
			c.bits |= connPeer6
		}
	}
}

// peer returns the address setPeer kept as a value.
func (c *Conn) peer() netip.AddrPort {
	switch {
	case c.bits&connPeer4 != 0:
		return netip.AddrPortFrom(netip.AddrFrom16(c.peerIP).Unmap(), c.peerPort)
	case c.bits&connPeer6 != 0:
		return netip.AddrPortFrom(netip.AddrFrom16(c.peerIP), c.peerPort)
	}
	return netip.AddrPort{}
}

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr {
	x := c.extras()
	if a := x.remote(); a != nil {
		return a
	}
	return x.setRemote(net.TCPAddrFromAddrPort(c.peer()))
}

// remote is a new connection's peer address: a TCP address as a value (ap),
// or for other networks the address itself (addr).
type remote struct {
	ap   netip.AddrPort
	addr net.Addr
}

// remoteOf converts a net.Addr to a remote.
func remoteOf(a net.Addr) remote {
	if t, ok := a.(*net.TCPAddr); ok {
		return remote{ap: t.AddrPort()}
	}
	return remote{addr: a}
}
