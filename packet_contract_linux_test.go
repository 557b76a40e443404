package ringpoll

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The contract tests run each case twice, on a std *net.UDPConn and on a
// ringpoll *PacketConn (every engine), and want the same record: what
// every call returned (the count, the address by its role, the error by
// its class). Programs written against net (quic-go, miekg/dns) decide on
// exactly these: whether an error is net.ErrClosed, whether it is
// Temporary, what a read of a longer datagram returns.

// contractConn is what the cases use of a UDP socket: the methods
// *net.UDPConn and *PacketConn share, under net's names.
type contractConn interface {
	net.Conn
	ReadFrom(b []byte) (int, net.Addr, error)
	WriteTo(b []byte, addr net.Addr) (int, error)
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
	SetReadBuffer(bytes int) error
	SetWriteBuffer(bytes int) error
	SyscallConn() (syscall.RawConn, error)
	ReadMsgUDP(b, oob []byte) (n, oobn, flags int, addr *net.UDPAddr, err error)
	ReadMsgUDPAddrPort(b, oob []byte) (n, oobn, flags int, addr netip.AddrPort, err error)
	WriteMsgUDP(b, oob []byte, addr *net.UDPAddr) (n, oobn int, err error)
	WriteMsgUDPAddrPort(b, oob []byte, addr netip.AddrPort) (n, oobn int, err error)
}

var (
	_ net.PacketConn = contractConn(nil)
	_ contractConn   = (*net.UDPConn)(nil)
	_ contractConn   = ctPacketConn{}
)

// ctPacketConn gives a PacketConn's AddrPort methods net's names.
type ctPacketConn struct{ *PacketConn }

func (c ctPacketConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	return c.ReadFromAddrPort(b)
}

func (c ctPacketConn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	return c.WriteToAddrPort(b, addr)
}

// ctMaker opens the socket under test: std's or ringpoll's.
type ctMaker struct {
	listen func(network, address string) (contractConn, error)
	dial   func(network string, raddr *net.UDPAddr) (contractConn, error)
}

func ctStd() ctMaker {
	return ctMaker{
		listen: func(network, address string) (contractConn, error) {
			a, err := net.ResolveUDPAddr(network, address)
			if err != nil {
				return nil, err
			}
			c, err := net.ListenUDP(network, a)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		dial: func(network string, raddr *net.UDPAddr) (contractConn, error) {
			c, err := net.DialUDP(network, nil, raddr)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
	}
}

func ctRingpoll(e Engine) ctMaker {
	return ctMaker{
		listen: func(network, address string) (contractConn, error) {
			c, err := ListenPacket(network, address, WithEngine(e))
			if err != nil {
				return nil, err
			}
			return ctPacketConn{c}, nil
		},
		dial: func(network string, raddr *net.UDPAddr) (contractConn, error) {
			c, err := DialPacket(network, raddr.String(), WithEngine(e))
			if err != nil {
				return nil, err
			}
			return ctPacketConn{c}, nil
		},
	}
}

// ctFamily is where a case's sockets live: the network and the address
// the socket under test binds, and the loopback address peers use.
type ctFamily struct {
	network, bind, loopback string
	v6                      bool // needs IPv6
}

var (
	ctUDP4 = ctFamily{"udp4", "127.0.0.1:0", "127.0.0.1", false}
	ctUDP6 = ctFamily{"udp6", "[::1]:0", "::1", true}
	// ctDual is a "udp" socket on the IPv6 wildcard: it takes IPv4
	// datagrams too, from IPv4-mapped addresses.
	ctDual = ctFamily{"udp", "[::]:0", "127.0.0.1", true}
)

// ctRun is one run of a case: its sockets, the names of their addresses,
// and the record.
type ctRun struct {
	t     *testing.T
	mk    ctMaker
	fam   ctFamily
	names map[netip.AddrPort]string
	steps []string
}

// ctBrief bounds a read that should find nothing; ctLong one that should
// find something (it fails the test, not hangs it, if nothing comes).
const (
	ctBrief = 20 * time.Millisecond
	ctLong  = 5 * time.Second
)

// name records what an address is called in this run. A socket on a
// wildcard address is named on the loopback addresses too, which its
// peers see.
func (r *ctRun) name(a net.Addr, name string) {
	ap := a.(*net.UDPAddr).AddrPort()
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	r.names[ap] = name
	if ap.Addr().IsUnspecified() {
		for _, lo := range []string{"127.0.0.1", "::1"} {
			r.names[netip.AddrPortFrom(netip.MustParseAddr(lo), ap.Port())] = name
		}
	}
}

// addrPort describes an address by its name and its form, which must be
// the same whatever its port.
func (r *ctRun) addrPort(ap netip.AddrPort) string {
	if !ap.IsValid() {
		return "invalid"
	}
	n, ok := r.names[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())]
	if !ok {
		n = "port?"
	}
	return fmt.Sprintf("%s[%s is4=%v is4in6=%v zone=%q]", n, ap.Addr().Unmap(), ap.Addr().Is4(), ap.Addr().Is4In6(), ap.Addr().Zone())
}

// addr describes a net.Addr: its type, and for a *net.UDPAddr its name
// and the length of its IP.
func (r *ctRun) addr(a net.Addr) string {
	ua, ok := a.(*net.UDPAddr)
	switch {
	case a == nil:
		return "nil"
	case !ok:
		return fmt.Sprintf("%T(%v)", a, a)
	case ua == nil:
		return "(*net.UDPAddr)(nil)"
	}
	return fmt.Sprintf("*net.UDPAddr{%s ip%d}", r.addrPort(ua.AddrPort()), len(ua.IP))
}

// errAddr describes the address in an error by its name only: net's
// WriteToUDPAddrPort puts one of an unexported type there, which no other
// package can make.
func (r *ctRun) errAddr(a net.Addr) string {
	switch a := a.(type) {
	case nil:
		return "nil"
	case *net.UDPAddr:
		return r.addrPort(a.AddrPort())
	case interface {
		Addr() netip.Addr
		Port() uint16
	}:
		return r.addrPort(netip.AddrPortFrom(a.Addr(), a.Port()))
	}
	return r.addr(a)
}

// ctTargets are the errors a class names, first match.
var ctTargets = []struct {
	name string
	err  error
}{
	{"net.ErrClosed", net.ErrClosed},
	{"os.ErrDeadlineExceeded", os.ErrDeadlineExceeded},
	{"net.ErrWriteToConnected", net.ErrWriteToConnected},
	{"ECONNREFUSED", syscall.ECONNREFUSED},
	{"EDESTADDRREQ", syscall.EDESTADDRREQ},
	{"EINVAL", syscall.EINVAL},
	{"EMSGSIZE", syscall.EMSGSIZE},
}

// err describes an error's class: the target it matches (or its innermost
// text), Timeout and Temporary, and its *net.OpError's and
// *os.SyscallError's fields.
func (r *ctRun) err(err error) string {
	if err == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%T", err)
	is := ""
	for _, tg := range ctTargets {
		if errors.Is(err, tg.err) {
			is = tg.name
			break
		}
	}
	if is == "" {
		inner := err
		for u := errors.Unwrap(inner); u != nil; u = errors.Unwrap(inner) {
			inner = u
		}
		is = fmt.Sprintf("%T(%q)", inner, inner.Error())
	}
	fmt.Fprintf(&b, " is=%s", is)
	if ne, ok := err.(net.Error); ok {
		fmt.Fprintf(&b, " timeout=%v", ne.Timeout())
	}
	if te, ok := err.(interface{ Temporary() bool }); ok {
		fmt.Fprintf(&b, " temporary=%v", te.Temporary())
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		fmt.Fprintf(&b, " op=%s net=%s source=%s addr=%s", oe.Op, oe.Net, r.errAddr(oe.Source), r.errAddr(oe.Addr))
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		fmt.Fprintf(&b, " syscall=%s", se.Syscall)
	}
	return b.String()
}

func (r *ctRun) record(format string, args ...any) {
	r.steps = append(r.steps, fmt.Sprintf(format, args...))
}

// listen opens the socket under test on the family's address, named
// "self".
func (r *ctRun) listen() contractConn {
	return r.listenOn(r.fam.network, r.fam.bind)
}

func (r *ctRun) listenOn(network, address string) contractConn {
	r.t.Helper()
	c, err := r.mk.listen(network, address)
	if err != nil {
		r.t.Fatalf("listen %s %s: %v", network, address, err)
	}
	r.t.Cleanup(func() { c.Close() })
	r.name(c.LocalAddr(), "self")
	return c
}

// dial connects the socket under test to raddr.
func (r *ctRun) dial(raddr net.Addr) contractConn {
	r.t.Helper()
	c, err := r.mk.dial(r.fam.network, raddr.(*net.UDPAddr))
	if err != nil {
		r.t.Fatalf("dial %s %s: %v", r.fam.network, raddr, err)
	}
	r.t.Cleanup(func() { c.Close() })
	r.name(c.LocalAddr(), "self")
	return c
}

// peer opens a std socket, named name, on the family's loopback address.
func (r *ctRun) peer(name string) *net.UDPConn {
	return r.peerOn(r.fam.network, net.JoinHostPort(r.fam.loopback, "0"), name)
}

func (r *ctRun) peerOn(network, address, name string) *net.UDPConn {
	r.t.Helper()
	a, err := net.ResolveUDPAddr(network, address)
	if err != nil {
		r.t.Fatal(err)
	}
	p, err := net.ListenUDP(network, a)
	if err != nil {
		r.t.Fatalf("peer %s %s: %v", network, address, err)
	}
	r.t.Cleanup(func() { p.Close() })
	r.name(p.LocalAddr(), name)
	return p
}

// closedPort returns the address of a socket just closed: nothing listens
// there, and the kernel answers a datagram with port unreachable.
func (r *ctRun) closedPort() *net.UDPAddr {
	p := r.peer("closed")
	a := p.LocalAddr().(*net.UDPAddr)
	p.Close()
	return a
}

// to is the address at which peers reach c (a wildcard socket: on the
// family's loopback address).
func (r *ctRun) to(c net.Conn) *net.UDPAddr {
	a := *c.LocalAddr().(*net.UDPAddr)
	if a.IP.IsUnspecified() {
		a.IP = net.ParseIP(r.fam.loopback)
	}
	return &a
}

// send sends b from a peer to a, failing the test if it cannot.
func (r *ctRun) send(p *net.UDPConn, b string, a net.Addr) {
	r.t.Helper()
	if _, err := p.WriteTo([]byte(b), a); err != nil {
		r.t.Fatalf("peer send to %v: %v", a, err)
	}
}

// peerRecv records what peer p receives next.
func (r *ctRun) peerRecv(p *net.UDPConn) {
	p.SetReadDeadline(time.Now().Add(ctLong))
	buf := make([]byte, 256)
	n, from, err := p.ReadFromUDPAddrPort(buf)
	r.record("peer %s got %q from %s, %s", r.addr(p.LocalAddr()), buf[:n], r.addrPort(from), r.err(err))
}

// peerRecvSize records the size of what peer p receives next.
func (r *ctRun) peerRecvSize(p *net.UDPConn) {
	p.SetReadDeadline(time.Now().Add(ctLong))
	buf := make([]byte, maxPacketSize)
	n, from, err := p.ReadFromUDPAddrPort(buf)
	r.record("peer %s got %d bytes from %s, %s", r.addr(p.LocalAddr()), n, r.addrPort(from), r.err(err))
}

// tooLong describes the error of a write of a payload too long for its
// destination as err does, but for the system call: net's is the
// kernel's EMSGSIZE from sendto or write, ringpoll's is
// ErrMessageTooLong, which matches EMSGSIZE, from before any system call.
func (r *ctRun) tooLong(err error) string {
	desc, _, _ := strings.Cut(r.err(err), " syscall=")
	return desc
}

// deadline sets c's read deadline d from now (0: none; negative: in the
// past); errors are recorded.
func (r *ctRun) deadline(c contractConn, d time.Duration) {
	var t time.Time
	if d != 0 {
		t = time.Now().Add(d)
	}
	if err := c.SetReadDeadline(t); err != nil {
		r.record("SetReadDeadline(%v): %s", d, r.err(err))
	}
}

// The reads and writes, each recorded.

func (r *ctRun) readFrom(c contractConn, size int) {
	buf := make([]byte, size)
	n, a, err := c.ReadFrom(buf)
	r.record("ReadFrom([%d]) = %d %q %s, %s", size, n, buf[:n], r.addr(a), r.err(err))
}

func (r *ctRun) readFromAddrPort(c contractConn, size int) {
	buf := make([]byte, size)
	n, a, err := c.ReadFromUDPAddrPort(buf)
	r.record("ReadFromUDPAddrPort([%d]) = %d %q %s, %s", size, n, buf[:n], r.addrPort(a), r.err(err))
}

func (r *ctRun) read(c contractConn, size int) {
	buf := make([]byte, size)
	n, err := c.Read(buf)
	r.record("Read([%d]) = %d %q, %s", size, n, buf[:n], r.err(err))
}

func (r *ctRun) writeTo(c contractConn, b string, a net.Addr) {
	n, err := c.WriteTo([]byte(b), a)
	r.record("WriteTo(%q, %s) = %d, %s", b, r.addr(a), n, r.err(err))
}

func (r *ctRun) writeToAddrPort(c contractConn, b string, a netip.AddrPort) {
	n, err := c.WriteToUDPAddrPort([]byte(b), a)
	r.record("WriteToUDPAddrPort(%q, %s) = %d, %s", b, r.addrPort(a), n, r.err(err))
}

func (r *ctRun) write(c contractConn, b string) {
	n, err := c.Write([]byte(b))
	r.record("Write(%q) = %d, %s", b, n, r.err(err))
}

func (r *ctRun) readMsg(c contractConn, size, oobSize int) {
	buf, oob := make([]byte, size), make([]byte, oobSize)
	n, oobn, flags, a, err := c.ReadMsgUDP(buf, oob)
	r.record("ReadMsgUDP([%d], [%d]) = %d %q, %s, flags %#x, %s, %s", size, oobSize, n, buf[:max(n, 0)], ctCmsgs(oob[:max(oobn, 0)]), flags, r.addr(a), r.err(err))
}

func (r *ctRun) readMsgAddrPort(c contractConn, size, oobSize int) {
	buf, oob := make([]byte, size), make([]byte, oobSize)
	n, oobn, flags, a, err := c.ReadMsgUDPAddrPort(buf, oob)
	r.record("ReadMsgUDPAddrPort([%d], [%d]) = %d %q, %s, flags %#x, %s, %s", size, oobSize, n, buf[:max(n, 0)], ctCmsgs(oob[:max(oobn, 0)]), flags, r.addrPort(a), r.err(err))
}

func (r *ctRun) writeMsg(c contractConn, b string, oob []byte, a *net.UDPAddr) {
	n, oobn, err := c.WriteMsgUDP([]byte(b), oob, a)
	r.record("WriteMsgUDP(%q, [%d], %s) = %d %d, %s", b, len(oob), r.addr(a), n, oobn, r.err(err))
}

func (r *ctRun) writeMsgAddrPort(c contractConn, b string, oob []byte, a netip.AddrPort) {
	n, oobn, err := c.WriteMsgUDPAddrPort([]byte(b), oob, a)
	r.record("WriteMsgUDPAddrPort(%q, [%d], %s) = %d %d, %s", b, len(oob), r.addrPort(a), n, oobn, r.err(err))
}

// ctCmsgs describes control messages by level and type, and their data
// by its length.
func ctCmsgs(oob []byte) string {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return fmt.Sprintf("cmsgs(%v)", err)
	}
	var parts []string
	for _, m := range msgs {
		parts = append(parts, fmt.Sprintf("%d/%d[%d]", m.Header.Level, m.Header.Type, len(m.Data)))
	}
	return "cmsgs" + fmt.Sprint(parts)
}

// setsockopt sets an integer option of c, failing the test if it cannot.
func (r *ctRun) setsockopt(c contractConn, level, opt, v int) {
	rc, err := c.SyscallConn()
	if err != nil {
		r.t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, v) }); err != nil || serr != nil {
		r.t.Fatalf("setsockopt: %v %v", err, serr)
	}
}

// allReads records each way of reading once, after a fresh deadline d.
func (r *ctRun) allReads(c contractConn, size int, d time.Duration) {
	for _, read := range []func(contractConn, int){r.readFrom, r.readFromAddrPort, r.read} {
		r.deadline(c, d)
		read(c, size)
	}
}

// waitError waits, up to ctLong, until c has an error pending (POLLERR:
// an ICMP error the kernel queued), without taking it, and records
// whether it came: a connected socket's ICMP error arrives
// asynchronously, and the next call takes it.
func (r *ctRun) waitError(c contractConn) {
	rc, err := c.SyscallConn()
	if err != nil {
		r.t.Fatal(err)
	}
	var revents int16
	var perr error
	err = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd)}}
		for {
			_, perr = unix.Poll(fds, int(ctLong/time.Millisecond))
			if perr != unix.EINTR {
				break
			}
		}
		revents = fds[0].Revents
	})
	if err == nil {
		err = perr
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.record("error pending: %v", revents&unix.POLLERR != 0)
}

// sockopt records an integer socket option of c.
func (r *ctRun) sockopt(c contractConn, name string, opt int) {
	rc, err := c.SyscallConn()
	if err != nil {
		r.t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, opt) }); err != nil {
		r.t.Fatal(err)
	}
	r.record("%s = %d, %v", name, v, gerr)
}

// ctCase is one behaviour of net's: run records it on the socket r.mk
// makes, on each of families (default udp4 and udp6).
type ctCase struct {
	name     string
	families []ctFamily
	run      func(r *ctRun)
}

var ctCases = []ctCase{
	{name: "read-after-close", run: func(r *ctRun) {
		peer := r.peer("peer")
		for _, use := range []string{"fresh", "used", "dialed"} {
			r.record("-- %s", use)
			var c contractConn
			if use == "dialed" {
				c = r.dial(peer.LocalAddr())
			} else {
				c = r.listen()
			}
			if use == "used" {
				r.allReads(c, 8, ctBrief)
			}
			r.record("Close: %s", r.err(c.Close()))
			for _, size := range []int{8, 0} {
				r.readFrom(c, size)
				r.readFromAddrPort(c, size)
				r.read(c, size)
			}
		}
	}},
	{name: "write-after-close", run: func(r *ctRun) {
		peer := r.peer("peer")
		to := peer.LocalAddr().(*net.UDPAddr)
		for _, use := range []string{"fresh", "used", "dialed"} {
			r.record("-- %s", use)
			var c contractConn
			if use == "dialed" {
				c = r.dial(to)
			} else {
				c = r.listen()
			}
			if use == "used" {
				r.writeTo(c, "before", to)
				r.peerRecv(peer)
			}
			r.record("Close: %s", r.err(c.Close()))
			for _, b := range []string{"after", ""} {
				r.writeTo(c, b, to)
				r.writeToAddrPort(c, b, to.AddrPort())
				r.write(c, b)
			}
		}
	}},
	{name: "close-twice", run: func(r *ctRun) {
		peer := r.peer("peer")
		for _, c := range []contractConn{r.listen(), r.dial(peer.LocalAddr())} {
			r.record("Close: %s", r.err(c.Close()))
			r.record("Close: %s", r.err(c.Close()))
		}
	}},
	{name: "close-unblocks-reader", run: func(r *ctRun) {
		c := r.listen()
		done := make(chan string)
		go func() {
			_, _, err := c.ReadFrom(make([]byte, 8))
			done <- r.err(err)
		}()
		r.record("Close: %s", r.err(c.Close()))
		r.record("blocked ReadFrom: %s", <-done)
	}},
	{name: "set-after-close", run: func(r *ctRun) {
		peer := r.peer("peer")
		for _, c := range []contractConn{r.listen(), r.dial(peer.LocalAddr())} {
			r.record("-- %s", r.addr(c.RemoteAddr()))
			r.record("Close: %s", r.err(c.Close()))
			r.record("SetDeadline: %s", r.err(c.SetDeadline(time.Now())))
			r.record("SetReadDeadline: %s", r.err(c.SetReadDeadline(time.Now())))
			r.record("SetWriteDeadline: %s", r.err(c.SetWriteDeadline(time.Time{})))
			r.record("SetReadBuffer: %s", r.err(c.SetReadBuffer(1<<16)))
			r.record("SetWriteBuffer: %s", r.err(c.SetWriteBuffer(1<<16)))
			r.record("LocalAddr: %s RemoteAddr: %s", r.addr(c.LocalAddr()), r.addr(c.RemoteAddr()))
		}
	}},
	{name: "read-deadline-past", run: func(r *ctRun) {
		c := r.listen()
		peer := r.peer("peer")
		r.send(peer, "waiting", r.to(c))
		// Past: every read fails, though a datagram waits.
		r.allReads(c, 16, -time.Second)
		r.record("SetDeadline: %s", r.err(c.SetDeadline(time.Now().Add(-time.Second))))
		r.readFrom(c, 16)
		// Zero again: the waiting datagram is read.
		r.deadline(c, 0)
		r.readFrom(c, 16)
		r.send(peer, "next", r.to(c))
		r.record("SetDeadline(zero): %s", r.err(c.SetDeadline(time.Time{})))
		r.readFromAddrPort(c, 16)
		// A deadline that passes while the read waits.
		r.allReads(c, 16, ctBrief)
	}},
	{name: "write-deadline-past", run: func(r *ctRun) {
		peer := r.peer("peer")
		to := peer.LocalAddr().(*net.UDPAddr)
		for _, c := range []contractConn{r.listen(), r.dial(to)} {
			r.record("-- %s", r.addr(c.RemoteAddr()))
			for _, set := range []func(time.Time) error{c.SetWriteDeadline, c.SetDeadline} {
				r.record("set past: %s", r.err(set(time.Now().Add(-time.Second))))
				if c.RemoteAddr() == nil {
					r.writeTo(c, "late", to)
					r.writeToAddrPort(c, "late", to.AddrPort())
				}
				r.write(c, "late")
				r.record("set zero: %s", r.err(set(time.Time{})))
				if c.RemoteAddr() == nil {
					r.writeTo(c, "in time", to)
				} else {
					r.write(c, "in time")
				}
				r.peerRecv(peer)
			}
		}
	}},
	{name: "zero-length-datagram", run: func(r *ctRun) {
		c := r.listen()
		peer := r.peer("peer")
		to := peer.LocalAddr().(*net.UDPAddr)
		r.send(peer, "", r.to(c))
		r.deadline(c, ctLong)
		r.readFrom(c, 16)
		r.send(peer, "", r.to(c))
		r.readFromAddrPort(c, 16)
		r.send(peer, "", r.to(c))
		r.read(c, 16)
		r.writeTo(c, "", to)
		r.peerRecv(peer)
		r.writeToAddrPort(c, "", to.AddrPort())
		r.peerRecv(peer)
		d := r.dial(to)
		r.write(d, "")
		r.peerRecv(peer)
		r.send(peer, "", r.to(d))
		r.deadline(d, ctLong)
		r.read(d, 16)
	}},
	{name: "zero-length-buffer", run: func(r *ctRun) {
		peer := r.peer("peer")
		c := r.listen()
		d := r.dial(peer.LocalAddr())
		// Each read into an empty buffer with a datagram waiting, then a
		// read into a real one: did the first take the datagram?
		for i, read := range []func(contractConn, int){r.readFrom, r.readFromAddrPort, r.read} {
			for _, s := range []contractConn{c, d} {
				r.send(peer, fmt.Sprintf("datagram %d", i), r.to(s))
				r.deadline(s, ctLong)
				read(s, 0)
				r.deadline(s, ctBrief)
				read(s, 16)
			}
		}
		// And with nothing waiting.
		r.allReads(c, 0, ctBrief)
	}},
	{name: "longer-than-buffer", run: func(r *ctRun) {
		peer := r.peer("peer")
		c := r.listen()
		d := r.dial(peer.LocalAddr())
		long := strings.Repeat("0123456789", 150) // over a common MTU
		for _, read := range []func(contractConn, int){r.readFrom, r.readFromAddrPort, r.read} {
			for _, s := range []contractConn{c, d} {
				r.send(peer, long, r.to(s))
				r.deadline(s, ctLong)
				read(s, 10)
			}
		}
		r.allReads(c, 16, ctBrief) // the rest was discarded
	}},
	{name: "icmp-connected", run: func(r *ctRun) {
		closed := r.closedPort()
		c := r.dial(closed)
		r.write(c, "anyone?")
		r.waitError(c)
		r.deadline(c, ctLong)
		r.read(c, 16)
		r.deadline(c, ctBrief)
		r.read(c, 16) // taken: the next read waits
		r.write(c, "again")
		r.waitError(c)
		r.write(c, "and again") // the pending error fails the write
		r.write(c, "once more")
		r.waitError(c)
		r.deadline(c, ctLong)
		r.readFrom(c, 16)
		r.write(c, "last")
		r.waitError(c)
		r.readFromAddrPort(c, 16)
	}},
	{name: "icmp-unconnected", run: func(r *ctRun) {
		c := r.listen()
		closed := r.closedPort()
		peer := r.peer("peer")
		r.writeTo(c, "anyone?", closed)
		r.writeToAddrPort(c, "anyone?", closed.AddrPort())
		// Nothing to report: a datagram from a live peer reads cleanly,
		// and the next read waits.
		r.send(peer, "hello", r.to(c))
		r.deadline(c, ctLong)
		r.readFrom(c, 16)
		r.allReads(c, 16, ctBrief)
		r.writeTo(c, "still fine", peer.LocalAddr())
		r.peerRecv(peer)
	}},
	{name: "writeto-connected", run: func(r *ctRun) {
		peer := r.peer("peer")
		other := r.peer("other")
		to := peer.LocalAddr().(*net.UDPAddr)
		d := r.dial(to)
		r.writeTo(d, "to peer", to)
		r.writeTo(d, "to other", other.LocalAddr())
		r.writeTo(d, "to nil", nil)
		r.writeToAddrPort(d, "to peer", to.AddrPort())
		r.writeToAddrPort(d, "to nothing", netip.AddrPort{})
		// The first datagram the peer gets is the one Write sent: none of
		// the above went out.
		r.write(d, "marker")
		r.peerRecv(peer)
		other.SetReadDeadline(time.Now().Add(ctBrief))
		_, _, err := other.ReadFrom(make([]byte, 16))
		r.record("other: %s", r.err(err))
	}},
	{name: "write-unconnected", run: func(r *ctRun) {
		c := r.listen()
		r.write(c, "where to?")
		r.write(c, "")
		r.writeTo(c, "to nil", nil)
		r.writeTo(c, "to a TCPAddr", &net.TCPAddr{IP: net.ParseIP(r.fam.loopback), Port: 9})
		r.writeToAddrPort(c, "to nothing", netip.AddrPort{})
	}},
	{name: "msg-read", run: func(r *ctRun) {
		peer := r.peer("peer")
		c := r.listen()
		d := r.dial(peer.LocalAddr())
		for _, s := range []contractConn{c, d} {
			r.send(peer, "hello", r.to(s))
			r.deadline(s, ctLong)
			r.readMsg(s, 16, 64)
			r.send(peer, strings.Repeat("long ", 20), r.to(s))
			r.deadline(s, ctLong)
			r.readMsgAddrPort(s, 8, 64) // cut: MSG_TRUNC
		}
		// The traffic class of each datagram, as quic-go asks for ECN.
		if r.fam.v6 {
			r.setsockopt(c, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
		} else {
			r.setsockopt(c, unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
		}
		r.send(peer, "marked", r.to(c))
		r.deadline(c, ctLong)
		r.readMsg(c, 16, 64)
		r.send(peer, "no room", r.to(c))
		r.deadline(c, ctLong)
		r.readMsg(c, 16, 0) // MSG_CTRUNC
		r.deadline(c, ctBrief)
		r.readMsgAddrPort(c, 16, 64)
		r.record("Close: %s", r.err(c.Close()))
		r.readMsg(c, 16, 64)
		r.readMsgAddrPort(c, 16, 64)
	}},
	{name: "msg-write", run: func(r *ctRun) {
		peer := r.peer("peer")
		to := peer.LocalAddr().(*net.UDPAddr)
		c := r.listen()
		d := r.dial(to)
		r.writeMsg(c, "to peer", nil, to)
		r.peerRecv(peer)
		r.writeMsgAddrPort(c, "to peer again", nil, to.AddrPort())
		r.peerRecv(peer)
		r.writeMsg(c, "to nil", nil, nil)
		r.writeMsgAddrPort(c, "to nothing", nil, netip.AddrPort{})
		r.writeMsg(d, "connected", nil, nil)
		r.peerRecv(peer)
		r.writeMsgAddrPort(d, "connected again", nil, netip.AddrPort{})
		r.peerRecv(peer)
		r.writeMsg(d, "to peer", nil, to)
		r.writeMsgAddrPort(d, "to peer", nil, to.AddrPort())
		// One message the kernel cuts into datagrams of 4 (UDP_SEGMENT),
		// as quic-go sends.
		gso := make([]byte, unix.CmsgSpace(2))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&gso[0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
		binary.NativeEndian.PutUint16(gso[unix.CmsgLen(0):], 4)
		r.writeMsg(c, "aaaabbbbcc", gso, to)
		for range 3 {
			r.peerRecv(peer)
		}
		r.writeMsg(d, "ddddeeee", gso, nil)
		for range 2 {
			r.peerRecv(peer)
		}
		r.record("Close: %s", r.err(c.Close()))
		r.writeMsg(c, "after close", nil, to)
		r.writeMsgAddrPort(c, "after close", nil, to.AddrPort())
	}},
	{name: "ipv4-mapped", families: []ctFamily{ctDual}, run: func(r *ctRun) {
		c := r.listen()
		port := c.LocalAddr().(*net.UDPAddr).AddrPort().Port()
		// An IPv4 client, and a dual-stack one that sends to the
		// IPv4-mapped address.
		p4 := r.peerOn("udp4", "127.0.0.1:0", "peer4")
		pd := r.peerOn("udp", "[::]:0", "peer-dual")
		mapped := netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.0.0.1"), port)
		for _, p := range []*net.UDPConn{p4, pd} {
			var err error
			if p == p4 {
				_, err = p.WriteToUDPAddrPort([]byte("v4"), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port))
			} else {
				_, err = p.WriteToUDPAddrPort([]byte("mapped"), mapped)
			}
			if err != nil {
				r.t.Fatal(err)
			}
			buf := make([]byte, 16)
			c.SetReadDeadline(time.Now().Add(ctLong))
			n, from, err := c.ReadFrom(buf)
			r.record("ReadFrom = %d %q %s, %s", n, buf[:n], r.addr(from), r.err(err))
			if err != nil {
				continue
			}
			r.record("from.String() = %q", strings.Replace(from.String(), fmt.Sprint(from.(*net.UDPAddr).Port), "PORT", 1))
			r.writeTo(c, "reply", from)
			r.peerRecv(p)
			r.send(p, "again", &net.UDPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: int(port)})
			n, ap, err := c.ReadFromUDPAddrPort(buf)
			r.record("ReadFromUDPAddrPort = %d %q %s, %s", n, buf[:n], r.addrPort(ap), r.err(err))
			r.writeToAddrPort(c, "reply", ap)
			r.peerRecv(p)
		}
		// An IPv4 socket, which the dual-stack client reaches at the
		// mapped address, sees a plain IPv4 sender.
		c4 := r.listenOn("udp4", "127.0.0.1:0")
		port4 := c4.LocalAddr().(*net.UDPAddr).AddrPort().Port()
		if _, err := pd.WriteToUDPAddrPort([]byte("to v4"), netip.AddrPortFrom(mapped.Addr(), port4)); err != nil {
			r.t.Fatal(err)
		}
		buf := make([]byte, 16)
		c4.SetReadDeadline(time.Now().Add(ctLong))
		n, from, err := c4.ReadFrom(buf)
		r.record("udp4 ReadFrom = %d %q %s, %s", n, buf[:n], r.addr(from), r.err(err))
		if err == nil {
			r.writeTo(c4, "reply", from)
			r.peerRecv(pd)
			// Mapped destinations on an IPv4 socket.
			pdPort := pd.LocalAddr().(*net.UDPAddr).Port
			r.writeToAddrPort(c4, "reply", netip.AddrPortFrom(mapped.Addr(), uint16(pdPort)))
			r.peerRecv(pd)
			r.writeTo(c4, "reply", &net.UDPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: pdPort})
			r.peerRecv(pd)
		}
	}},
	{name: "too-long", families: []ctFamily{ctUDP4, ctUDP6, ctDual}, run: func(r *ctRun) {
		c := r.listen()
		type dest struct {
			p  *net.UDPConn
			to netip.AddrPort
		}
		var dests []dest
		if r.fam == ctDual {
			// An IPv4 peer, by both its names, and an IPv6 one: the
			// kernel sends to the first as IPv4, with IPv4's limit.
			p4, p6 := r.peerOn("udp4", "127.0.0.1:0", "peer4"), r.peerOn("udp6", "[::1]:0", "peer6")
			port4 := p4.LocalAddr().(*net.UDPAddr).AddrPort().Port()
			dests = []dest{
				{p4, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port4)},
				{p4, netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.0.0.1"), port4)},
				{p6, p6.LocalAddr().(*net.UDPAddr).AddrPort()},
			}
		} else {
			p := r.peer("peer")
			dests = []dest{{p, p.LocalAddr().(*net.UDPAddr).AddrPort()}}
		}
		for _, d := range dests {
			largest := maxPayload(!d.to.Addr().Unmap().Is4())
			for _, size := range []int{largest, largest + 1} {
				b := make([]byte, size)
				n, err := c.WriteToUDPAddrPort(b, d.to)
				r.record("WriteToUDPAddrPort([%d], %s) = %d, %s", size, r.addrPort(d.to), n, r.tooLong(err))
				n, err = c.WriteTo(b, net.UDPAddrFromAddrPort(d.to))
				r.record("WriteTo([%d], %s) = %d, %s", size, r.addrPort(d.to), n, r.tooLong(err))
				if size == largest {
					r.peerRecvSize(d.p)
					r.peerRecvSize(d.p)
				}
			}
		}
		d := r.dial(net.UDPAddrFromAddrPort(dests[0].to))
		largest := maxPayload(!dests[0].to.Addr().Unmap().Is4())
		for _, size := range []int{largest, largest + 1} {
			n, err := d.Write(make([]byte, size))
			r.record("Write([%d]) = %d, %s", size, n, r.tooLong(err))
		}
		r.peerRecvSize(dests[0].p)
	}},
	{name: "addresses", run: func(r *ctRun) {
		peer := r.peer("peer")
		binds := []string{r.fam.bind, ":0"}
		if r.fam.v6 {
			binds = append(binds, "[::]:0")
		} else {
			binds = append(binds, "0.0.0.0:0")
		}
		for _, bind := range binds {
			c := r.listenOn(r.fam.network, bind)
			r.record("listen %s: LocalAddr %s, RemoteAddr %s", bind, r.addr(c.LocalAddr()), r.addr(c.RemoteAddr()))
		}
		d := r.dial(peer.LocalAddr())
		r.record("dial: LocalAddr %s, RemoteAddr %s", r.addr(d.LocalAddr()), r.addr(d.RemoteAddr()))
		r.record("networks: %s %s", d.LocalAddr().Network(), d.RemoteAddr().Network())
		d.Close()
		r.record("closed: LocalAddr %s, RemoteAddr %s", r.addr(d.LocalAddr()), r.addr(d.RemoteAddr()))
	}},
	{name: "buffer-sizes", run: func(r *ctRun) {
		c := r.listen()
		for _, size := range []int{4096, 1 << 16, 0} {
			r.record("SetReadBuffer(%d): %s", size, r.err(c.SetReadBuffer(size)))
			r.sockopt(c, "SO_RCVBUF", unix.SO_RCVBUF)
			r.record("SetWriteBuffer(%d): %s", size, r.err(c.SetWriteBuffer(size)))
			r.sockopt(c, "SO_SNDBUF", unix.SO_SNDBUF)
		}
	}},
}

// TestPacketStatsCountEveryCall: every way of reading and sending counts
// in Stats, the single calls and the message calls as much as batches.
func TestPacketStatsCountEveryCall(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		a, b := pcListen(t, e, "udp4", "127.0.0.1:0"), pcListen(t, e, "udp4", "127.0.0.1:0")
		to := b.LocalAddr().(*net.UDPAddr)
		buf, oob := make([]byte, 64), make([]byte, 64)
		pcDeadline(t, b)
		for range 5 {
			if _, err := a.WriteTo([]byte("x"), to); err != nil {
				t.Fatal(err)
			}
			if _, _, err := b.ReadFrom(buf); err != nil {
				t.Fatal(err)
			}
		}
		gso := make([]byte, unix.CmsgSpace(2))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&gso[0]))
		h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
		h.SetLen(unix.CmsgLen(2))
		binary.NativeEndian.PutUint16(gso[unix.CmsgLen(0):], 4)
		if _, _, err := a.WriteMsgUDP([]byte("aaaabbbbcc"), gso, to); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, _, _, _, err := b.ReadMsgUDP(buf, oob); err != nil {
				t.Fatal(err)
			}
		}
		sa, sb := a.Stats(), b.Stats()
		if sa.SendBatches != 6 || sa.SentPackets != 8 || sa.GSOSends != 1 {
			t.Errorf("sender: %d sends, %d datagrams, %d GSO sends; want 6, 8 and 1 (%v)", sa.SendBatches, sa.SentPackets, sa.GSOSends, sa)
		}
		if sb.Batches != 8 || sb.Packets != 8 {
			t.Errorf("receiver: %d receives, %d datagrams; want 8 and 8 (%v)", sb.Batches, sb.Packets, sb)
		}
	})
}

// TestPacketContract runs every case on std's socket and on ringpoll's,
// on every engine, and wants the same record from both.
func TestPacketContract(t *testing.T) {
	for _, tc := range ctCases {
		t.Run(tc.name, func(t *testing.T) {
			fams := tc.families
			if fams == nil {
				fams = []ctFamily{ctUDP4, ctUDP6}
			}
			for _, fam := range fams {
				t.Run(fam.network, func(t *testing.T) {
					if fam.v6 && ipv6Loopback() != nil {
						t.Skipf("no IPv6 loopback here: %v", ipv6Loopback())
					}
					want := ctRecord(t, "net", ctStd(), fam, tc.run)
					forEachEngine(t, func(t *testing.T, e Engine) {
						got := ctRecord(t, "ringpoll", ctRingpoll(e), fam, tc.run)
						if !slices.Equal(got, want) {
							t.Errorf("ringpoll and net differ:\n%s", ctDiff(got, want))
						}
					})
				})
			}
		})
	}
}

// ctRecord runs a case, as subtest name, on the sockets mk makes and
// returns its record; the sockets are closed when it returns.
func ctRecord(t *testing.T, name string, mk ctMaker, fam ctFamily, run func(*ctRun)) []string {
	var steps []string
	t.Run(name, func(t *testing.T) {
		r := &ctRun{t: t, mk: mk, fam: fam, names: map[netip.AddrPort]string{}}
		run(r)
		steps = r.steps
	})
	if t.Failed() {
		t.FailNow()
	}
	return steps
}

// ctDiff shows two records side by side, marking the lines that differ.
func ctDiff(got, want []string) string {
	var b strings.Builder
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g == w {
			fmt.Fprintf(&b, "  both:     %s\n", g)
			continue
		}
		fmt.Fprintf(&b, "! ringpoll: %s\n! net:      %s\n", g, w)
	}
	return b.String()
}
