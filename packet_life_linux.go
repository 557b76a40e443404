package ringpoll

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"

	"github.com/ringpoll/ringpoll/internal/poll/uringp"
	"golang.org/x/sys/unix"
)

// A PacketConn's socket has one lifetime, which Close ends for everything
// that reads or holds it. Its descriptors:
//
//   - fd, a duplicate of the socket net opened (net's own is closed at
//     once), used for every system call until the socket joins Go's
//     poller;
//   - the poller's, a net.UDPConn on a duplicate of fd made when
//     something must wait on the socket (poller), whose users net's own
//     lifetime counts: fd is closed then, unless a ring reads it;
//   - none other: a PacketServer's io_uring reader (a ringReader) arms
//     its requests on fd itself, and fd stays open while any ring reads
//     it, so that a re-arm never lands on a reused number.
//
// Short users of fd (a system call: control, a send) hold fdMu's read
// lock; a ring is counted in readers from attachRing until detachRing,
// which the reader calls once its ring is torn down (no request of its
// left in the kernel). Close marks the socket closed (no new user, no new
// ring), closes fd if no ring reads it, closes the poller's net.UDPConn
// (which waits for its users, as net's Close does), stops every ring and
// waits until each let go: the last one out closes fd.
//
//	open ──join──> in the poller (fd closed unless a ring reads it)
//	     ──Close──> closed: new users fail with net.ErrClosed; rings stopped
//	     ──last ring detached──> every descriptor closed, the port free

// ringReader is a PacketServer's io_uring ring reading a PacketConn's
// socket through fd.
type ringReader struct {
	ring *uringp.PacketRing // guarded by the PacketConn's fdMu; nil until made
	// stopped: Close stopped the ring. handling: an inline handler runs
	// on the reader. The reader sets handling and then looks at stopped,
	// Close sets stopped and then looks at handling, so that a batch
	// read as Close runs either is dropped or is being handled as Close
	// looks: Close waits for the ring to let go unless a handler runs on
	// the reader, which may be Close's caller and lets go when it
	// returns.
	stopped, handling atomic.Bool
	gone              chan struct{} // closed once the ring let go of fd
}

// enter reports whether the reader may hand a batch to an inline handler
// (false once Close stopped the ring), and if so notes that one runs
// until leave. A nil ringReader (no ring) always may.
func (rr *ringReader) enter() bool {
	if rr == nil {
		return true
	}
	rr.handling.Store(true)
	if rr.stopped.Load() {
		rr.handling.Store(false)
		return false
	}
	return true
}

func (rr *ringReader) leave() {
	if rr != nil {
		rr.handling.Store(false)
	}
}

// control runs f on the socket, unless it is closed (net.ErrClosed); the
// socket stays open while f runs.
func (c *PacketConn) control(f func(fd int)) error {
	c.fdMu.RLock()
	if c.closed {
		c.fdMu.RUnlock()
		return net.ErrClosed
	}
	if fd := c.fd; fd >= 0 {
		f(fd)
		c.fdMu.RUnlock()
		return nil
	}
	c.fdMu.RUnlock()
	// Joined: the poller's descriptor is the only one left.
	return c.polled.Load().raw.Control(func(fd uintptr) { f(int(fd)) })
}

// closing reports whether Close was called.
func (c *PacketConn) closing() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// poller returns the socket in Go's poller, putting it there the first
// time: everything that waits (reads, deadlines, a write the send buffer
// holds back) joins. A PacketServer reading through an io_uring ring, and
// writing batches, never does.
func (c *PacketConn) poller() (*polledConn, error) {
	if p := c.polled.Load(); p != nil {
		return p, nil
	}
	c.joinMu.Lock()
	defer c.joinMu.Unlock()
	if p := c.polled.Load(); p != nil {
		return p, nil
	}
	var pc net.PacketConn
	var jerr error
	err := c.control(func(fd int) {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			jerr = os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC)", err)
			return
		}
		f := os.NewFile(uintptr(dup), "udp")
		pc, jerr = net.FilePacketConn(f) // a duplicate of its own
		f.Close()
	})
	if err == nil {
		err = jerr
	}
	if err != nil {
		return nil, err
	}
	uc := pc.(*net.UDPConn)
	raw, err := uc.SyscallConn()
	if err != nil {
		uc.Close()
		return nil, err
	}
	p := &polledConn{uc: uc, raw: raw}
	c.polled.Store(p)
	// One descriptor per socket, as a net.UDPConn has: control uses the
	// poller's from now on. A ring reading fd closes it when it lets go.
	c.fdMu.Lock()
	if len(c.readers) == 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	c.fdMu.Unlock()
	return p, nil
}

// attachRing counts a PacketServer's ring reader in c's lifetime and
// returns the descriptor the ring is to read, which stays open until
// detachRing. A socket that joined the poller already gets fd back: a
// duplicate of the poller's descriptor, which net owns.
func (c *PacketConn) attachRing() (*ringReader, int, error) {
	c.fdMu.Lock()
	defer c.fdMu.Unlock()
	if c.closed {
		return nil, -1, net.ErrClosed
	}
	if c.fd < 0 {
		var serr error
		err := c.polled.Load().raw.Control(func(fd uintptr) {
			if c.fd, serr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0); serr != nil {
				c.fd, serr = -1, os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC)", serr)
			}
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return nil, -1, err
		}
	}
	rr := &ringReader{gone: make(chan struct{})}
	c.readers = append(c.readers, rr)
	return rr, c.fd, nil
}

// setRing gives rr the ring it made, stopping it at once if Close came
// first.
func (c *PacketConn) setRing(rr *ringReader, ring *uringp.PacketRing) {
	c.fdMu.Lock()
	rr.ring = ring
	c.ring.Store(ring)
	if rr.stopped.Load() {
		ring.Stop()
	}
	c.fdMu.Unlock()
}

// detachRing ends rr's hold on fd, whose ring is torn down (or was never
// made): the last one out of a closed, or joined, socket closes fd.
func (c *PacketConn) detachRing(rr *ringReader) {
	c.fdMu.Lock()
	c.readers = slices.DeleteFunc(c.readers, func(r *ringReader) bool { return r == rr })
	if len(c.readers) == 0 && c.fd >= 0 && (c.closed || c.polled.Load() != nil) {
		unix.Close(c.fd)
		c.fd = -1
	}
	c.fdMu.Unlock()
	close(rr.gone)
}

// Close closes the socket: blocked reads and writes return
// net.ErrClosed, and a PacketServer reading it stops, its io_uring
// reader letting go of the socket before Close returns (unless that
// reader is running an inline handler, which may be the caller: it lets
// go when the handler returns). Every descriptor on the socket is then
// closed, and its port free. Handlers running finish on their own, their
// replies failing with net.ErrClosed.
func (c *PacketConn) Close() error {
	c.joinMu.Lock()
	c.fdMu.Lock()
	if c.closed {
		c.fdMu.Unlock()
		c.joinMu.Unlock()
		return c.opError("close", netip.AddrPort{}, net.ErrClosed)
	}
	c.closed = true
	close(c.done)
	var err error
	if len(c.readers) == 0 && c.fd >= 0 {
		err = unix.Close(c.fd)
		c.fd = -1
	}
	readers := slices.Clone(c.readers)
	for _, rr := range readers {
		rr.stopped.Store(true)
		if rr.ring != nil {
			rr.ring.Stop()
		}
	}
	c.fdMu.Unlock()
	c.joinMu.Unlock()
	if p := c.polled.Load(); p != nil {
		if perr := p.uc.Close(); err == nil {
			err = perr
		}
	}
	for _, rr := range readers {
		if !rr.handling.Load() {
			<-rr.gone
		}
	}
	if err != nil {
		return c.opError("close", netip.AddrPort{}, err)
	}
	return nil
}
