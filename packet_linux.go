package ringpoll

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/net/ipv4"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ringpoll/ringpoll/internal/mmsg"
	"github.com/ringpoll/ringpoll/internal/poison"
	"github.com/ringpoll/ringpoll/internal/poll/uringp"
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

// gsoProbe reports whether the kernel knows UDP_SEGMENT for socket fd; a
// variable so that a test can play a kernel without it.
var gsoProbe = probeGSO

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

// readCoalesced is ReadFromAddrPort on a GRO socket, where one receive may
// return many datagrams: it reads them into a Batch of its own and hands
// them out one per call.
func (c *PacketConn) readCoalesced(b []byte) (int, netip.AddrPort, error) {
	c.groMu.Lock()
	defer c.groMu.Unlock()
	if c.groRead == nil {
		c.groRead, _ = NewBatch(1, MaxPacketSize)
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

// Batch is memory for reading many datagrams with one call: a number of
// slots of a fixed size, each taking one datagram, and the headers the
// kernel fills. Make one per reading goroutine and use it again and again:
// a read allocates nothing.
//
// The Packets that ReadBatch returns point into the Batch: they stay valid
// until the Batch is read into again or Release is called, and no other
// connection's data ever shows in them. A Batch is not safe for concurrent
// use.
type Batch struct {
	h    *mmsg.Headers
	mem  []byte
	size int
	pkts []Packet

	got    int
	out    int // Packets handed out by the last read, cleared by Release
	dirty  int // headers [0, dirty) need setting up again
	want   readSize
	err    error
	recvFn func(uintptr) bool
	// parked: a read found the socket empty, so the poller parked the
	// reader (PacketServer's reader tells its Awake).
	parked bool
}

// Limits of NewBatch.
const (
	MaxBatchPackets = mmsg.MaxBatch
	MaxPacketSize   = 65535
)

// NewBatch makes a Batch of count slots of size bytes each (1 <= count <=
// MaxBatchPackets, 1 <= size <= MaxPacketSize). Datagrams longer than size
// arrive truncated, and say so. DefaultBatchPackets and DefaultPacketSize
// suit datagrams up to a common path MTU.
func NewBatch(count, size int) (*Batch, error) {
	if count < 1 || count > MaxBatchPackets {
		return nil, optionError(fmt.Sprintf("ringpoll: NewBatch(%d, %d): the count must be between 1 and %d", count, size, MaxBatchPackets))
	}
	if size < 1 || size > MaxPacketSize {
		return nil, optionError(fmt.Sprintf("ringpoll: NewBatch(%d, %d): the size must be between 1 and %d bytes", count, size, MaxPacketSize))
	}
	b := &Batch{h: mmsg.NewHeaders(count, 1), mem: make([]byte, count*size), size: size, pkts: make([]Packet, count)}
	b.recvFn = b.recv
	b.dirty = count
	b.want = readSize{n: 1, max: count}
	return b, nil
}

// Release ends the use of the Packets last read into b. Reading into b
// again releases them too; Release is for a reader that lets go early.
func (b *Batch) Release() {
	if poison.Enabled && b.out > 0 {
		// The slots the last read filled, which its Packets showed.
		poison.Fill(b.mem[:min(b.got*b.size, len(b.mem))])
	}
	clear(b.pkts[:b.out])
	b.out = 0
}

func (b *Batch) recv(fd uintptr) bool {
	for {
		b.got, b.err = b.h.Recv(int(fd), b.want.n)
		switch b.err {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			b.want.next(0)
			b.parked = true
			return false
		}
		return true
	}
}

// readSize is how many datagrams a reader takes at once, adapted to what
// arrives: twice as many after a read that filled its share (up to max),
// as many as came after one that emptied the socket, and half as many
// after one that found it empty. So a busy socket soon reads max per
// call, and a lightly loaded one reads a datagram or two at a time and
// answers them before it reads on, as a loop of single reads does: a
// reader that took all that had arrived at once would be done sooner
// and go idle more often, and for a server doing request/response at a
// light load each idle sleep and wake-up costs more than the calls a
// batch saves (docs/bench/HISTORY.md, "UDP's batch size, adapted to what
// arrives").
type readSize struct{ n, max int }

// next adapts n to a read that got datagrams (0: found none).
func (r *readSize) next(got int) {
	switch {
	case got >= r.n:
		r.n = min(2*r.n, r.max)
	case got > 0:
		r.n = got
	default:
		r.n = max(r.n/2, 1)
	}
}

// ReadBatch reads datagrams that have arrived, waiting (up to the read
// deadline) until at least one has. How many one call reads adapts to
// what arrives, up to b's count: it doubles after each call that read all
// it offered to, so on a busy socket each call soon reads the whole count,
// and it falls back to what came, or to one, once the socket runs dry, so
// that a lightly loaded reader answers a datagram or two before it reads
// on. The returned Packets are views into b, valid until b is read into
// again or released. A datagram longer than b's slots comes with
// Truncated set.
func (c *PacketConn) ReadBatch(b *Batch) ([]Packet, error) {
	if b == nil {
		return nil, c.opError("read", netip.AddrPort{}, errNilBatch)
	}
	b.Release()
	if c.gro && b.size < MaxPacketSize {
		return nil, c.opError("read", netip.AddrPort{}, errGROBatch)
	}
	// Only the headers of messages received last time changed (the
	// kernel writes the length, address and control lengths and flags
	// of those it fills): a read that gets one datagram sets up one.
	for i := range b.dirty {
		b.h.PrepareRecv(i, b.mem[i*b.size:(i+1)*b.size])
	}
	b.dirty = b.h.Cap() // until a read says which it filled
	p, err := c.poller()
	if err == nil {
		err = p.raw.Read(b.recvFn)
	}
	if err != nil {
		return nil, c.rawError("read", err)
	}
	if b.err != nil {
		return nil, c.opError("read", netip.AddrPort{}, os.NewSyscallError("recvmmsg", b.err))
	}
	b.dirty = b.got
	b.want.next(b.got)
	var ps []Packet
	var cut uint64
	if c.gro {
		ps, cut = b.coalesced()
	} else {
		// Each datagram fills its Packet in place: no copy of a Packet
		// per datagram, as an append would make.
		ps = b.pkts[:b.got]
		for i := range ps {
			p, mem := &ps[i], b.mem[i*b.size:(i+1)*b.size]
			p.Addr, p.Size, p.Truncated = b.h.Addr(i), b.h.Size(i), b.h.Truncated(i)
			if p.Truncated {
				cut++
				p.Data = mem
			} else {
				p.Data = mem[:p.Size:p.Size]
			}
		}
	}
	b.out = len(ps)
	c.batches.Add(1)
	c.packets.Add(uint64(len(ps)))
	if cut > 0 {
		c.truncated.Add(cut)
	}
	return ps, nil
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

var errNilBatch = errors.New("ringpoll: ReadBatch into a nil *Batch: make one with NewBatch")

var errGROBatch = errors.New("ringpoll: a GRO socket needs Batch slots of MaxPacketSize")

// sendmmsg sends messages [from, from+n) of h on fd (mmsg.Headers.Send);
// a variable so that a test can make the socket's send buffer look full.
var sendmmsg = (*mmsg.Headers).Send

// gsoSegments bounds the datagrams one UDP_SEGMENT message carries (the
// kernel's UDP_MAX_SEGMENTS is 64 or more).
const gsoSegments = 64

// sendOp is one WriteBatch's headers and progress, pooled per PacketConn.
type sendOp struct {
	h       *mmsg.Headers
	counts  [DefaultBatchPackets]int // datagrams in each message
	from, n int
	err     error
	sendFn  func(uintptr) bool // o.send, for the poller's RawConn.Write
	direct  func(int)          // o.send on a socket outside the poller, setting sent
	sent    bool
}

func newSendOp() *sendOp {
	o := &sendOp{h: mmsg.NewHeaders(DefaultBatchPackets, gsoSegments)}
	o.sendFn = o.send
	o.direct = func(fd int) { o.sent = o.send(uintptr(fd)) }
	return o
}

func (o *sendOp) send(fd uintptr) bool {
	for o.from < o.n {
		r, err := sendmmsg(o.h, int(fd), o.from, o.n-o.from)
		switch err {
		case nil:
			o.from += r
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			o.err = err
			return true
		}
	}
	return true
}

// WriteBatch sends the packets in order, many per system call, waiting (up
// to the write deadline) while the socket's send buffer is full: none is
// dropped for want of room. It returns how many were sent; if that is
// fewer than len(ps), ps[n] is the one that failed, with the error.
// Packet.Addr is each destination; on a connected PacketConn it must be
// the zero AddrPort (the peer), as WriteTo fails there.
//
// Runs of packets to one destination, of one size (the last may be
// shorter), go as one message the kernel cuts into datagrams (UDP GSO),
// unless WithoutGSO or the kernel does not know UDP_SEGMENT (the socket
// asked when it was opened). A run the kernel refuses to cut is sent
// again datagram by datagram (PacketStats.GSOFallbacks); if it refused
// with EIO, which says the device cannot checksum for the socket's
// route, no run is sent segmented again on this PacketConn.
func (c *PacketConn) WriteBatch(ps []Packet) (int, error) {
	return c.writeBatch(ps, 0)
}

// writeBatch is WriteBatch, with the first plain packets of ps sent one
// per message.
func (c *PacketConn) writeBatch(ps []Packet, plain int) (int, error) {
	if len(ps) == 0 {
		// As net's Write of nothing: no error, unless the socket is closed.
		if err := c.control(func(int) {}); err != nil {
			return 0, c.rawError("write", err)
		}
		return 0, nil
	}
	o := c.sends.Get().(*sendOp)
	defer c.sends.Put(o)
	sent := 0
	for len(ps) > 0 {
		msgs, used, bad := c.prepareSends(o, ps, plain)
		if msgs == 0 {
			return sent, bad
		}
		o.from, o.n, o.err = 0, msgs, nil
		err := c.send(o)
		done := o.sentCount(c)
		sent += done
		if err != nil {
			return sent, c.rawError("write", err)
		}
		if o.err != nil {
			if k := o.counts[o.from]; k > 1 && c.gsoRefused(o.err) {
				// The run again, one datagram per message.
				ps, plain = ps[done:], k
				continue
			}
			return sent, c.opError("write", ps[done].Addr, os.NewSyscallError("sendmmsg", o.err))
		}
		ps, plain = ps[used:], max(plain-used, 0)
	}
	return sent, nil
}

// sentCount counts the messages o sent, [0, o.from), in c's stats, and
// returns the datagrams they carried.
func (o *sendOp) sentCount(c *PacketConn) int {
	done, gso := 0, 0
	for _, k := range o.counts[:o.from] {
		done += k
		if k > 1 {
			gso++
		}
	}
	if o.from > 0 {
		c.sendBatches.Add(1)
		c.sent.Add(uint64(done))
	}
	if gso > 0 {
		c.gsoSends.Add(uint64(gso))
	}
	return done
}

// send runs o: straight on the socket while it is outside Go's poller,
// joining it only when the send buffer is full and the rest must wait.
func (c *PacketConn) send(o *sendOp) error {
	if c.polled.Load() == nil {
		// o.direct, made once per pooled op: a closure here would cost
		// two allocations per batch.
		o.sent = false
		if err := c.control(o.direct); err != nil {
			return err
		}
		if o.sent {
			return nil
		}
	}
	p, err := c.poller()
	if err != nil {
		return err
	}
	return p.raw.Write(o.sendFn)
}

// prepareSends fills o's messages from ps: each packet a message, or a run
// of them one segmented message; the first plain packets go one per
// message. It returns the messages made, the packets they hold, and, if
// it stopped at a packet that cannot be sent, why.
func (c *PacketConn) prepareSends(o *sendOp, ps []Packet, plain int) (msgs, used int, bad error) {
	gso := c.gso.Load()
	for used < len(ps) && msgs < o.h.Cap() {
		p := &ps[used]
		if err := c.checkSend(p); err != nil {
			return msgs, used, err
		}
		o.h.PrepareSend(msgs, p.Data, p.Addr, c.family)
		k := 1
		if seg := len(p.Data); seg > 0 && gso && used >= plain {
			total, limit := seg, c.maxTo(p.Addr.Addr())
			for k < gsoSegments && used+k < len(ps) {
				q := &ps[used+k]
				if !samePeer(q.Addr, p.Addr) || len(q.Data) == 0 || len(q.Data) > seg || total+len(q.Data) > limit || c.checkSend(q) != nil {
					break
				}
				o.h.Append(msgs, k, q.Data)
				total += len(q.Data)
				k++
				if len(q.Data) < seg {
					break // a shorter datagram ends the run
				}
			}
			if k > 1 {
				o.h.SetSegment(msgs, seg)
			}
		}
		o.counts[msgs] = k
		msgs++
		used += k
	}
	return msgs, used, nil
}

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

// checkSend reports what would make the kernel refuse p, clearly.
func (c *PacketConn) checkSend(p *Packet) error {
	switch {
	case len(p.Data) > c.maxTo(p.Addr.Addr()):
		return c.opError("write", p.Addr, ErrMessageTooLong)
	case c.raddr != nil && p.Addr.IsValid():
		return c.opError("write", p.Addr, net.ErrWriteToConnected)
	case c.raddr == nil && !p.Addr.IsValid():
		return c.opError("write", p.Addr, errMissingAddress)
	case p.Addr.IsValid() && c.family == unix.AF_INET && !p.Addr.Addr().Unmap().Is4():
		return c.opError("write", p.Addr, fmt.Errorf("ringpoll: IPv6 destination on an IPv4 socket: %w", syscall.EAFNOSUPPORT))
	}
	return nil
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

// udpAddrIP is the IP of a *net.UDPAddr, or the zero Addr for anything
// else, which the write then refuses.
func udpAddrIP(addr net.Addr) netip.Addr {
	if a, ok := addr.(*net.UDPAddr); ok && a != nil {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip
	}
	return netip.Addr{}
}

// samePeer reports whether a and b are one destination: an IPv4 address
// and its IPv4-mapped form are.
func samePeer(a, b netip.AddrPort) bool {
	return a == b || a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

var errMissingAddress = errors.New("ringpoll: packet without a destination on an unconnected PacketConn: set Packet.Addr")

// probeGSO asks the kernel whether it knows UDP_SEGMENT (Linux 4.18): one
// that does not would ignore the control message and send a run as one
// datagram of all its payloads, and getsockopt(2) of it fails there.
func probeGSO(fd int) bool {
	_, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT)
	return err == nil
}
