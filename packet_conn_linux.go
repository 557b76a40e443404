package ringpoll

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ringpoll/ringpoll/internal/poll/uringp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// PacketConn is a UDP socket: a net.PacketConn, a net.Conn (for Read and
// Write, meaningful once connected by DialPacket) and a syscall.Conn, safe
// for concurrent use, with deadlines that work as net's do. Beyond net's
// methods it reads and writes batches of datagrams, many per system call
// and without allocating per datagram: see Batch, ReadBatch and
// WriteBatch.
//
// A PacketConn's own methods wait for readiness in Go's poller on every
// engine and move datagrams with recvmmsg(2) and sendmmsg(2); the engine
// option is checked (WithEngine of an engine that cannot run here fails).
// A PacketServer on the uring, uring-hybrid and uring-sqpoll engines reads
// the socket through an io_uring multishot RECVMSG instead (PacketStats.Ring
// says so), and an inline handler's replies go out through the same ring.
// The socket enters Go's poller only the first time something waits on it
// (a read, a deadline, SyscallConn, a write the send buffer holds back),
// so that a socket such a server reads costs the poller nothing per
// datagram.
type PacketConn struct {
	// fd is the socket, outside Go's poller until something must wait
	// on it (join; fd is then closed and -1, and the poller's descriptor
	// serves): a socket in an epoll set costs that set's callback for
	// every datagram queued, and wakes the poller while a PacketServer's
	// io_uring reader, which never waits there, has the datagram in hand
	// already. Who may still use it, and who closes it, is in
	// packet_life_linux.go.
	fd      int
	fdMu    sync.RWMutex  // fd's users for a system call (RLock) against changes to fd (Lock)
	closed  bool          // guarded by fdMu
	readers []*ringReader // guarded by fdMu: rings reading fd, which stays open while there are any
	done    chan struct{} // closed by Close
	joinMu  sync.Mutex
	polled  atomic.Pointer[polledConn]
	laddr   *net.UDPAddr
	raddr   *net.UDPAddr // DialPacket's peer; nil: not connected
	network string
	family  int // AF_INET or AF_INET6
	max     int // largest payload a datagram carries: the family's, or the connected peer's (maxTo)
	sends   sync.Pool
	recvs   sync.Pool
	gro     bool // the kernel may coalesce datagrams (UDP_GRO)
	// gso: WriteBatch may send runs as one UDP_SEGMENT message (not
	// WithoutGSO, the kernel knows it, and no send failed with EIO).
	gso atomic.Bool

	ring atomic.Pointer[uringp.PacketRing] // a PacketServer's reader, on the uring engines

	groMu   sync.Mutex // single reads on a GRO socket, through groRead
	groRead *Batch
	groNext []Packet

	truncated, batches, packets, sendBatches, sent, gsoSends, gsoFallbacks atomic.Uint64
}

// polledConn is the socket in Go's poller: a net.UDPConn on a duplicate
// of PacketConn.fd, whose reads, writes and deadlines wait there.
type polledConn struct {
	uc  *net.UDPConn
	raw syscall.RawConn

	batchOnce sync.Once
	batch     *ipv4.PacketConn // MessageConn's reads
}

var (
	_ net.PacketConn = (*PacketConn)(nil)
	_ net.Conn       = (*PacketConn)(nil)
	_ syscall.Conn   = (*PacketConn)(nil)
)

// ListenPacket opens a UDP socket on the local address, as
// net.ListenPacket does for "udp", "udp4" and "udp6". Options: WithEngine,
// WithLogger, WithReusePort (so that other sockets may share the address),
// WithGRO, WithoutGSO.
func ListenPacket(network, address string, opts ...Option) (*PacketConn, error) {
	cfg, err := packetConfig(inListenPacket, network, opts)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	return listenPacket(network, address, cfg)
}

func listenPacket(network, address string, cfg *config) (*PacketConn, error) {
	lc := net.ListenConfig{Control: cfg.packetControl}
	pc, err := lc.ListenPacket(context.Background(), network, address)
	if err != nil {
		return nil, err
	}
	return newPacketConn(pc.(*net.UDPConn), network, false, cfg)
}

// DialPacket connects a UDP socket to the remote address, as net.Dial does
// for "udp", "udp4" and "udp6": Read, Write and batches without addresses
// then go to and come from that peer only, and ICMP errors the peer's host
// sends back (port unreachable) fail later reads and writes with
// syscall.ECONNREFUSED, as on a net.UDPConn. Options: WithEngine,
// WithLogger, WithGRO, WithoutGSO.
func DialPacket(network, address string, opts ...Option) (*PacketConn, error) {
	cfg, err := packetConfig(inDialPacket, network, opts)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	d := net.Dialer{Control: cfg.packetControl}
	c, err := d.Dial(network, address)
	if err != nil {
		return nil, err
	}
	return newPacketConn(c.(*net.UDPConn), network, true, cfg)
}

func packetConfig(t taker, network string, opts []Option) (*config, error) {
	if err := checkPacketNetwork(network); err != nil {
		return nil, err
	}
	cfg, err := configFor(t, opts)
	if err != nil {
		return nil, err
	}
	if _, err := cfg.engine.resolve(cfg.logger); err != nil {
		return nil, err
	}
	return cfg, nil
}

// packetControl sets the socket options the configuration asks for before
// the socket binds.
func (c *config) packetControl(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		if c.reusePort > 0 {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}
		if c.gro && serr == nil {
			// A kernel without UDP_GRO (before 5.0) refuses it: the
			// socket then reads datagrams one by one, as without.
			unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return os.NewSyscallError("setsockopt", err)
	}
	return nil
}

// newPacketConn makes a PacketConn of the socket net made, keeping a
// duplicate of it and closing uc, which takes the socket out of Go's
// poller until join puts it back.
func newPacketConn(uc *net.UDPConn, network string, connected bool, cfg *config) (*PacketConn, error) {
	defer uc.Close()
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	c := &PacketConn{fd: -1, network: network, done: make(chan struct{})}
	c.laddr, _ = uc.LocalAddr().(*net.UDPAddr)
	if connected {
		if c.raddr, _ = uc.RemoteAddr().(*net.UDPAddr); c.raddr == nil {
			return nil, fmt.Errorf("ringpoll: connected UDP socket without a peer address (%v)", uc.RemoteAddr())
		}
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		if c.family, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN); serr != nil {
			serr = os.NewSyscallError("getsockopt", serr)
			return
		}
		if gro, err := unix.GetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO); err == nil {
			c.gro = gro != 0
		}
		c.gso.Store(!cfg.noGSO && gsoProbe(int(fd)))
		if c.fd, serr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); serr != nil {
			c.fd, serr = -1, os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC)", serr)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}
	c.max = maxPayload(c.family == unix.AF_INET6)
	if c.raddr != nil {
		c.max = c.maxTo(c.raddr.AddrPort().Addr())
	}
	c.sends.New = func() any { return newSendOp() }
	c.recvs.New = func() any { return newRecvOp() }
	return c, nil
}

// polledError gives an error of the poller's net.UDPConn the network the
// PacketConn was opened with, as a net.UDPConn's errors name it ("udp4",
// "udp6" or "udp"): that UDPConn, made from a descriptor
// (net.FilePacketConn), knows its network only as "udp".
func (c *PacketConn) polledError(err error) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Net = c.network // each call makes its own OpError
	}
	return err
}

// LocalAddr returns the local address, a *net.UDPAddr.
func (c *PacketConn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the connected peer's address, or nil if the
// PacketConn is not connected.
func (c *PacketConn) RemoteAddr() net.Addr {
	if c.raddr == nil {
		return nil
	}
	return c.raddr
}

// SetDeadline sets the read and write deadlines, as net.Conn's does.
func (c *PacketConn) SetDeadline(t time.Time) error {
	return c.setDeadline(t, (*net.UDPConn).SetDeadline)
}

// SetReadDeadline sets the deadline for reads, batches included.
func (c *PacketConn) SetReadDeadline(t time.Time) error {
	return c.setDeadline(t, (*net.UDPConn).SetReadDeadline)
}

// SetWriteDeadline sets the deadline for writes, batches included.
func (c *PacketConn) SetWriteDeadline(t time.Time) error {
	return c.setDeadline(t, (*net.UDPConn).SetWriteDeadline)
}

func (c *PacketConn) setDeadline(t time.Time, set func(*net.UDPConn, time.Time) error) error {
	p, err := c.poller()
	if err != nil {
		return c.setError(err)
	}
	return c.polledError(set(p.uc, t))
}

// SetReadBuffer sets the socket's receive buffer size (SO_RCVBUF). A server
// taking bursts of datagrams wants it large: what does not fit is dropped
// and counted in PacketStats.Drops.
func (c *PacketConn) SetReadBuffer(bytes int) error {
	return c.setsockopt(unix.SO_RCVBUF, bytes)
}

// SetWriteBuffer sets the socket's send buffer size (SO_SNDBUF).
func (c *PacketConn) SetWriteBuffer(bytes int) error {
	return c.setsockopt(unix.SO_SNDBUF, bytes)
}

func (c *PacketConn) setsockopt(opt, v int) error {
	var serr error
	err := c.control(func(fd int) { serr = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, v) })
	if err == nil && serr != nil {
		err = os.NewSyscallError("setsockopt", serr)
	}
	if err != nil {
		return c.setError(err)
	}
	return nil
}

// setError is the error of a setter (deadlines, buffer sizes), as net's:
// it names the local address as Addr, and no Source.
func (c *PacketConn) setError(err error) error {
	return &net.OpError{Op: "set", Net: c.network, Addr: c.LocalAddr(), Err: cause(err)}
}

// SyscallConn returns the raw socket. Its Read and Write wait in Go's
// poller as a net.UDPConn's do.
func (c *PacketConn) SyscallConn() (syscall.RawConn, error) {
	p, err := c.poller()
	if err != nil {
		return nil, c.rawError("raw-control", err)
	}
	return p.raw, nil
}

// Stats returns the counters, with the kernel's count of drops read now.
func (c *PacketConn) Stats() PacketStats {
	s := PacketStats{
		Truncated:    c.truncated.Load(),
		Batches:      c.batches.Load(),
		Packets:      c.packets.Load(),
		SendBatches:  c.sendBatches.Load(),
		SentPackets:  c.sent.Load(),
		GSOSends:     c.gsoSends.Load(),
		GSOFallbacks: c.gsoFallbacks.Load(),
		GRO:          c.gro,
	}
	if r := c.ring.Load(); r != nil {
		s.Ring, s.RingDry, s.RingMoves = true, r.NoBuffers.Load(), r.Moves.Load()
	}
	c.control(func(fd int) { s.Drops = socketDrops(fd) })
	return s
}

// socketDrops reads the socket's drop counter with SO_MEMINFO, which costs
// nothing per datagram (SO_RXQ_OVFL would add a control message to each).
func socketDrops(fd int) uint64 {
	var info [unix.SK_MEMINFO_VARS + 8]uint32
	size := uint32(unsafe.Sizeof(info))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&size)), 0)
	if e != 0 || size < (unix.SK_MEMINFO_DROPS+1)*4 {
		return 0
	}
	return uint64(info[unix.SK_MEMINFO_DROPS])
}

func (c *PacketConn) opError(op string, addr netip.AddrPort, err error) error {
	var a net.Addr
	if addr.IsValid() {
		a = net.UDPAddrFromAddrPort(addr)
	} else if c.raddr != nil {
		a = c.raddr
	}
	return &net.OpError{Op: op, Net: c.network, Source: c.LocalAddr(), Addr: a, Err: err}
}

// rawError turns the error of a RawConn call into the one a read or write
// returns: the cause (net.ErrClosed, os.ErrDeadlineExceeded) in an
// OpError naming op.
func (c *PacketConn) rawError(op string, err error) error {
	return c.opError(op, netip.AddrPort{}, cause(err))
}

// cause is err without the *net.OpError a RawConn call or the poller's
// net.UDPConn put around it.
func cause(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return oe.Err
	}
	return err
}

// maxTo is the largest payload of a datagram to addr (the zero Addr: the
// connected peer, or any). The kernel sends to an IPv4 address, mapped
// or not, as IPv4 even from an IPv6 socket (udpv6_sendmsg hands it to
// udp_sendmsg), so IPv4's limit holds there, and it would refuse a
// longer payload with a bare EMSGSIZE.
func (c *PacketConn) maxTo(addr netip.Addr) int {
	if addr.Is4() || addr.Is4In6() {
		return maxPayload(false)
	}
	return c.max
}
