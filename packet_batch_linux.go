package ringpoll

import (
	"errors"
	"fmt"
	"github.com/ringpoll/ringpoll/internal/poll"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/ringpoll/ringpoll/internal/mmsg"
	"github.com/ringpoll/ringpoll/internal/poison"
	"golang.org/x/sys/unix"
)

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

// Limits of NewBatch, which its doc states.
const (
	maxBatchPackets = mmsg.MaxBatch
	maxPacketSize   = 65535
)

// NewBatch makes a Batch of count slots of size bytes each (1 <= count <=
// 1024, 1 <= size <= 65535). Datagrams longer than size arrive truncated,
// and say so. 64 slots of 2048 bytes (a PacketServer's default batch)
// suit datagrams up to a common path MTU.
func NewBatch(count, size int) (*Batch, error) {
	if count < 1 || count > maxBatchPackets {
		return nil, optionError(fmt.Sprintf("ringpoll: NewBatch(%d, %d): the count must be between 1 and %d", count, size, maxBatchPackets))
	}
	if size < 1 || size > maxPacketSize {
		return nil, optionError(fmt.Sprintf("ringpoll: NewBatch(%d, %d): the size must be between 1 and %d bytes", count, size, maxPacketSize))
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
	poll.Hook(poll.HookBatchRecv, nil)
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
// batch saves.
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
	if c.gro && b.size < maxPacketSize {
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

var errNilBatch = errors.New("ringpoll: ReadBatch into a nil *Batch: make one with NewBatch")

// sendmmsg sends messages [from, from+n) of h on fd (mmsg.Headers.Send);
// a variable so that a test can make the socket's send buffer look full.
var sendmmsg = (*mmsg.Headers).Send

// sendOp is one WriteBatch's headers and progress, pooled per PacketConn.
type sendOp struct {
	h       *mmsg.Headers
	counts  [defaultBatchPackets]int // datagrams in each message
	from, n int
	err     error
	sendFn  func(uintptr) bool // o.send, for the poller's RawConn.Write
	direct  func(int)          // o.send on a socket outside the poller, setting sent
	sent    bool
}

func newSendOp() *sendOp {
	o := &sendOp{h: mmsg.NewHeaders(defaultBatchPackets, gsoSegments)}
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

var errMissingAddress = errors.New("ringpoll: packet without a destination on an unconnected PacketConn: set Packet.Addr")
