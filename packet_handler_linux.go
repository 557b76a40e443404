package ringpoll

import "net/netip"

// PacketHandler serves datagrams a batch at a time. ServePackets gets the
// datagrams one read returned (views valid until it returns) and a
// PacketWriter whose replies go out together, many per system call, when
// it returns.
type PacketHandler interface {
	ServePackets(w *PacketWriter, in []Packet)
}

// PacketHandlerFunc adapts a function to a PacketHandler.
type PacketHandlerFunc func(w *PacketWriter, in []Packet)

// ServePackets calls f(w, in).
func (f PacketHandlerFunc) ServePackets(w *PacketWriter, in []Packet) { f(w, in) }

// PacketWriter queues a handler's replies: WriteTo copies the payload, and
// the queued datagrams are sent together (one WriteBatch, sendmmsg; an
// inline handler's on the uring engines through the reader's ring) when
// the handler returns, or earlier with Flush or when the queue fills.
type PacketWriter struct {
	conn *PacketConn
	out  []Packet
	mem  []byte
	log  func(error)
	rs   *ringSends // an inline handler's on the uring engines
}

// pwQueue is how many replies a PacketWriter queues before it sends them;
// its memory for their payloads starts at pwMinMem and grows up to
// pwMaxMem while it fills before the queue does.
const (
	pwQueue  = defaultBatchPackets
	pwMinMem = 4 << 10
	pwMaxMem = 1 << 20
)

// Conn returns the socket the datagrams came from and replies leave by.
func (w *PacketWriter) Conn() *PacketConn { return w.conn }

// WriteTo queues b, copied, as a datagram to addr. It fails only for a
// payload no datagram can carry (ErrMessageTooLong) or, when the queue
// was full and sending it failed, with that error.
func (w *PacketWriter) WriteTo(b []byte, addr netip.AddrPort) error {
	if len(b) > w.conn.maxTo(addr.Addr()) {
		return w.conn.opError("write", addr, ErrMessageTooLong)
	}
	switch {
	case len(w.out) == pwQueue:
		if err := w.Flush(); err != nil {
			return err
		}
	case len(w.mem)+len(b) > cap(w.mem) && len(w.out) > 0:
		// Out of memory before the queue filled: send, and give the
		// next queue twice the room (up to pwMaxMem), so that replies
		// keep going out many per system call.
		grow := 2 * cap(w.mem)
		if err := w.Flush(); err != nil {
			return err
		}
		if cap(w.mem) < grow && grow <= pwMaxMem {
			w.mem = make([]byte, 0, grow)
		}
	}
	if len(w.mem)+len(b) > cap(w.mem) {
		w.mem = make([]byte, 0, max(2*cap(w.mem), len(b), pwMinMem))
	}
	start := len(w.mem)
	w.mem = append(w.mem, b...)
	w.out = append(w.out, Packet{Data: w.mem[start:len(w.mem):len(w.mem)], Addr: addr})
	return nil
}

// Flush sends the queued datagrams now. (An inline handler's on the
// uring engines leave with the reader's next submission to its ring; an
// error then comes from the Flush after.)
func (w *PacketWriter) Flush() error {
	if w.rs != nil {
		return w.rs.flush(w)
	}
	if len(w.out) == 0 {
		return nil
	}
	_, err := w.conn.WriteBatch(w.out)
	clear(w.out)
	w.out, w.mem = w.out[:0], w.mem[:0]
	return err
}
