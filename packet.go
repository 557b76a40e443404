package ringpoll

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// Packet is one datagram in a batch.
//
// From ReadBatch, Data is a view into the Batch's memory, valid until the
// Batch is read into again or released; Addr is the sender. For
// WriteBatch, Data is the payload and Addr the destination (the zero
// AddrPort on a connected PacketConn).
type Packet struct {
	Data []byte
	Addr netip.AddrPort
	// Truncated is set by ReadBatch when the datagram was longer than the
	// Batch's slots: Data holds its first part. Size is its full length.
	Truncated bool
	// Size is the datagram's length as sent; len(Data) unless Truncated.
	Size int
}

// Errors of the packet API.
var (
	// ErrMessageTooLong is returned by writes of a payload no UDP datagram
	// to its destination can carry: over 65507 bytes to an IPv4 address
	// (on a dual-stack socket too, mapped or not) and 65527 to an IPv6
	// one. It matches syscall.EMSGSIZE too.
	ErrMessageTooLong error = messageTooLongError{}
)

type messageTooLongError struct{}

func (messageTooLongError) Error() string {
	return "ringpoll: payload longer than a UDP datagram can carry (65507 bytes on IPv4, 65527 on IPv6): split it"
}
func (messageTooLongError) Is(target error) bool { return target == syscall.EMSGSIZE }

// Default batch shape (WithPacketBatch): 64 datagrams of up to 2048 bytes.
const (
	defaultBatchPackets = 64
	defaultPacketSize   = 2048
)

// maxPayload is the largest UDP payload for a socket family, without IPv6
// jumbograms.
func maxPayload(v6 bool) int {
	if v6 {
		return 65535 - 8
	}
	return 65535 - 20 - 8
}

// PacketStats are a PacketConn's counters.
type PacketStats struct {
	// Drops counts datagrams the kernel dropped for this socket because its
	// receive buffer was full (SK_MEMINFO_DROPS, the counter SO_RXQ_OVFL
	// reports); raise it with SetReadBuffer or read faster.
	Drops uint64
	// Truncated counts datagrams cut short because the buffer was too
	// small, each also reported to the reader.
	Truncated uint64
	// Batches and Packets count receive calls that returned datagrams and
	// the datagrams they returned: Packets/Batches is the batch size reads
	// achieve.
	Batches, Packets uint64
	// SendBatches and SentPackets are the same for sends.
	SendBatches, SentPackets uint64
	// GSOSends counts messages sent as several datagrams cut by the kernel
	// (UDP_SEGMENT); GSOFallbacks counts such messages the kernel refused
	// to cut, each then sent again datagram by datagram. After a refusal
	// with EIO (the device cannot checksum them) the socket sends no
	// more runs segmented; after any other the next run is offered
	// segmented again.
	GSOSends, GSOFallbacks uint64
	// GRO reports whether the kernel coalesces datagrams for this socket
	// (WithGRO, where the kernel has UDP_GRO).
	GRO bool
	// Ring reports whether a PacketServer reads this socket through an
	// io_uring multishot RECVMSG (the uring engines), and RingDry counts
	// the times that request ran out of buffers, every one held by
	// batches being handled, and was armed again once some came back:
	// often means handlers hold batches long. RingMoves counts the times
	// the reader, which parks in Go's poller between datagrams, settled
	// on another OS thread and armed its RECVMSG again from there (the
	// kernel runs a request's completion work on the thread that armed
	// it); a count that keeps rising means the reader keeps changing
	// threads.
	Ring      bool
	RingDry   uint64
	RingMoves uint64
}

// String formats the counters on one line.
func (s PacketStats) String() string {
	return fmt.Sprintf("drops=%d truncated=%d batches=%d packets=%d send_batches=%d sent=%d gso_sends=%d gso_fallbacks=%d gro=%v ring=%v ring_dry=%d ring_moves=%d",
		s.Drops, s.Truncated, s.Batches, s.Packets, s.SendBatches, s.SentPackets, s.GSOSends, s.GSOFallbacks, s.GRO, s.Ring, s.RingDry, s.RingMoves)
}

// checkPacketNetwork accepts the UDP networks.
func checkPacketNetwork(network string) error {
	switch network {
	case "udp", "udp4", "udp6":
		return nil
	}
	return net.UnknownNetworkError(network + " (ringpoll's datagrams are udp, udp4 and udp6; for streams use Listen or Dial)")
}

// WithReusePort opens n sockets on one UDP address with SO_REUSEPORT, each
// read by its own goroutine, where a PacketServer listens
// (ListenAndServe) or ListenPacketGroup is called; the kernel spreads
// datagrams over them by a hash of source and destination (so one busy
// peer lands on one socket: the spread is only as even as the peers are
// many). On ListenPacket it only sets SO_REUSEPORT, so that other sockets
// may join. 1 <= n <= 1024. Taken by ListenPacket, ListenPacketGroup
// (default there: GOMAXPROCS sockets) and NewPacketServer.
func WithReusePort(n int) Option {
	return func(c *config) {
		c.give(optReusePort)
		if n < 1 || n > 1024 {
			c.fail("WithReusePort(%d): the socket count must be between 1 and 1024", n)
			return
		}
		c.reusePort = n
	}
}

// WithCPUSteering makes a WithReusePort group hand each datagram to the
// socket whose index is the number of the CPU that received it, modulo
// the group's size (a classic BPF program, SO_ATTACH_REUSEPORT_CBPF):
// with one socket per CPU, a datagram is read where its softirq ran.
// Taken by ListenPacketGroup and NewPacketServer, whose ListenAndServe
// then opens a group even without WithReusePort (of GOMAXPROCS sockets,
// as ListenPacketGroup does).
func WithCPUSteering() Option {
	return func(c *config) {
		c.give(optCPUSteering)
		c.steerCPU = true
	}
}

// WithPacketBatch sets the shape of the batches a PacketServer reads: count
// datagrams of up to size bytes each (see NewBatch). The default is 64
// datagrams of up to 2048 bytes. Taken by NewPacketServer.
func WithPacketBatch(count, size int) Option {
	return func(c *config) {
		c.give(optPacketBatch)
		if count < 1 || count > 1024 || size < 1 || size > 65535 {
			c.fail("WithPacketBatch(%d, %d): want 1 to 1024 datagrams of 1 to 65535 bytes", count, size)
			return
		}
		c.batch = [2]int{count, size}
	}
}

// WithGRO lets the kernel coalesce datagrams of one flow into one receive
// (UDP_GRO): a reader then takes dozens of datagrams for the cost of one.
// ReadBatch hands them out one Packet each, but needs a Batch of
// 65535-byte slots, as a coalesced receive holds up to 64 KiB; single
// reads (ReadFrom) still return one datagram each, through a buffer of the
// PacketConn's own. A kernel without UDP_GRO ignores it
// (PacketStats.GRO says). Taken by ListenPacket, DialPacket,
// ListenPacketGroup and NewPacketServer (for the sockets ListenAndServe
// opens).
func WithGRO() Option {
	return func(c *config) {
		c.give(optGRO)
		c.gro = true
	}
}

// WithoutGSO makes WriteBatch send each datagram as a message of its own,
// never a run of them cut by the kernel (UDP_SEGMENT). Without it GSO is
// used where the kernel knows UDP_SEGMENT, which each socket asks once
// when it is opened (getsockopt(2)), and a run the kernel refuses to cut
// is sent again datagram by datagram (PacketStats.GSOFallbacks); this
// turns it off for the socket from the start. Taken by ListenPacket,
// DialPacket, ListenPacketGroup and NewPacketServer (for the sockets
// ListenAndServe opens).
func WithoutGSO() Option {
	return func(c *config) {
		c.give(optWithoutGSO)
		c.noGSO = true
	}
}
