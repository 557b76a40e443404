// Package mmsg sends and receives many datagrams per system call
// (recvmmsg(2), sendmmsg(2)) without allocating: the message headers, their
// I/O vectors and socket addresses live in one Headers, made once and
// reused, and addresses are read and written as netip.AddrPort values.
package mmsg

import (
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxBatch bounds a Headers' size: the kernel's UIO_MAXIOV, the most
// messages one recvmmsg or sendmmsg takes.
const MaxBatch = 1024

// Headers holds n message headers, each with up to k I/O vectors, room
// for an IPv4 or IPv6 socket address, and room for a control message.
type Headers struct {
	hdrs  []unix.Mmsghdr
	iovs  []unix.Iovec // k per message
	k     int
	names []unix.RawSockaddrInet6
	ctl   []byte
}

// ctlSpace is each message's control buffer: room for one UDP_GRO or
// UDP_SEGMENT value (a 2-byte or 4-byte integer).
var ctlSpace = unix.CmsgSpace(4)

// NewHeaders returns headers for up to n messages, 1 <= n <= MaxBatch,
// of up to k buffers each (k > 1 gathers segments for UDP_SEGMENT).
func NewHeaders(n, k int) *Headers {
	h := &Headers{
		hdrs:  make([]unix.Mmsghdr, n),
		iovs:  make([]unix.Iovec, n*k),
		k:     k,
		names: make([]unix.RawSockaddrInet6, n),
		ctl:   make([]byte, n*ctlSpace),
	}
	for i := range h.hdrs {
		m := &h.hdrs[i].Hdr
		m.Iov = &h.iovs[i*k]
		m.SetIovlen(1)
	}
	return h
}

// Cap is the number of messages h holds.
func (h *Headers) Cap() int { return len(h.hdrs) }

// PrepareRecv points message i at buffer b, with room for the sender's
// address and the control messages.
func (h *Headers) PrepareRecv(i int, b []byte) {
	m := &h.hdrs[i].Hdr
	h.setIov(i, b)
	m.Name = (*byte)(unsafe.Pointer(&h.names[i]))
	m.Namelen = unix.SizeofSockaddrInet6
	m.Control = &h.ctl[i*ctlSpace]
	m.SetControllen(ctlSpace)
	m.Flags = 0
}

func (h *Headers) setIov(i int, b []byte) {
	setIovec(&h.iovs[i*h.k], b)
	h.hdrs[i].Hdr.SetIovlen(1)
}

func setIovec(v *unix.Iovec, b []byte) {
	if len(b) == 0 {
		v.Base = nil
	} else {
		v.Base = &b[0]
	}
	v.SetLen(len(b))
}

// Append adds buffer b to message i, prepared by PrepareSend, as its
// buffer number j (1 <= j < k): the message's payload is its buffers in
// order, cut into datagrams of its segment size.
func (h *Headers) Append(i, j int, b []byte) {
	setIovec(&h.iovs[i*h.k+j], b)
	h.hdrs[i].Hdr.SetIovlen(j + 1)
}

// Recv receives up to n datagrams on socket fd into the buffers set by
// PrepareRecv, without waiting (MSG_DONTWAIT). It reports how many
// arrived; EAGAIN means none had. Each message's length (Len), whether it
// was cut (Truncated) and its sender (Addr) are then readable.
//
// Recv and Send cannot sleep, so they do not tell the Go scheduler
// (RawSyscall6), as the runtime's own non-blocking epoll_wait does not: a
// recvmmsg of 64 datagrams takes tens of microseconds, long enough for
// sysmon to take the P of a thread it sees in a system call and start
// another thread to poll the network, a futex wake-up and a context
// switch each time, for a call that returns on its own anyway.
func (h *Headers) Recv(fd, n int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&h.hdrs[0])),
		uintptr(n), unix.MSG_DONTWAIT|unix.MSG_TRUNC, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// Msghdr returns message i's struct msghdr, for a SENDMSG submitted
// elsewhere (io_uring). It and what it points to stay put while h lives.
func (h *Headers) Msghdr(i int) *unix.Msghdr { return &h.hdrs[i].Hdr }

// Size is the length of datagram i as it was sent; more than the buffer
// when it was truncated.
func (h *Headers) Size(i int) int { return int(h.hdrs[i].Len) }

// Truncated reports whether datagram i was longer than its buffer.
func (h *Headers) Truncated(i int) bool { return h.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0 }

// Segment returns the size of the datagrams coalesced in message i by
// UDP_GRO, or 0 if the kernel coalesced none.
func (h *Headers) Segment(i int) int {
	m := &h.hdrs[i].Hdr
	return GROSegment(h.ctl[i*ctlSpace : i*ctlSpace+min(int(m.Controllen), ctlSpace)])
}

// GROSegment returns the segment size a UDP_GRO control message in ctl
// (a message's control bytes, as long as the kernel filled) gives, or 0
// if it has none.
func GROSegment(ctl []byte) int {
	for len(ctl) >= unix.CmsgLen(0) {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
		n := int(c.Len)
		if n < unix.CmsgLen(0) || n > len(ctl) {
			return 0
		}
		if c.Level == unix.SOL_UDP && c.Type == unix.UDP_GRO && n >= unix.CmsgLen(4) {
			return int(*(*int32)(unsafe.Pointer(&ctl[unix.CmsgLen(0)])))
		}
		ctl = ctl[min(len(ctl), unix.CmsgSpace(n-unix.CmsgLen(0))):]
	}
	return 0
}

// ControlSpace is the control bytes a receive needs for the UDP_GRO
// message.
var ControlSpace = ctlSpace

// Addr returns the sender of datagram i, or the zero AddrPort if the
// kernel gave none (a connected socket may omit it).
func (h *Headers) Addr(i int) netip.AddrPort {
	if h.hdrs[i].Hdr.Namelen == 0 {
		return netip.AddrPort{}
	}
	return decode(&h.names[i])
}

// PrepareSend points message i at payload b for destination to, which is
// encoded for a socket of the given family (AF_INET or AF_INET6). A zero
// to sends to the connected peer.
func (h *Headers) PrepareSend(i int, b []byte, to netip.AddrPort, family int) error {
	m := &h.hdrs[i].Hdr
	h.setIov(i, b)
	m.Name, m.Namelen = nil, 0
	if to.IsValid() {
		n, err := encode(&h.names[i], to, family)
		if err != nil {
			return err
		}
		m.Name = (*byte)(unsafe.Pointer(&h.names[i]))
		m.Namelen = uint32(n)
	}
	m.Control = nil
	m.SetControllen(0)
	m.Flags = 0
	return nil
}

// SetSegment asks the kernel to cut message i's payload into datagrams of
// seg bytes each, the last possibly shorter (UDP_SEGMENT).
func (h *Headers) SetSegment(i, seg int) {
	m := &h.hdrs[i].Hdr
	ctl := h.ctl[i*ctlSpace : (i+1)*ctlSpace]
	c := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
	c.Level, c.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	c.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&ctl[unix.CmsgLen(0)])) = uint16(seg)
	m.Control = &ctl[0]
	m.SetControllen(unix.CmsgSpace(2))
}

// Send sends messages [from, from+n), prepared by PrepareSend, on socket
// fd, without waiting (MSG_DONTWAIT). It reports how many the kernel
// took; EAGAIN means none.
func (h *Headers) Send(fd, from, n int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&h.hdrs[from])),
		uintptr(n), unix.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// DecodeAddr reads a socket address of n bytes that recvfrom(2) wrote;
// the zero AddrPort if there was none.
func DecodeAddr(sa *unix.RawSockaddrInet6, n uint32) netip.AddrPort {
	if n == 0 {
		return netip.AddrPort{}
	}
	return decode(sa)
}

// decode reads an AF_INET or AF_INET6 socket address.
func decode(sa *unix.RawSockaddrInet6) netip.AddrPort {
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	port := uint16(p[0])<<8 | uint16(p[1])
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	case unix.AF_INET6:
		a := netip.AddrFrom16(sa.Addr)
		if sa.Scope_id != 0 {
			a = a.WithZone(zoneName(sa.Scope_id))
		}
		return netip.AddrPortFrom(a, port)
	}
	return netip.AddrPort{}
}

// ErrFamily is returned by PrepareSend for an IPv6 destination on an IPv4
// socket.
var ErrFamily = syscall.EAFNOSUPPORT

// encode writes to as a socket address for a socket of family and returns
// its length.
func encode(sa *unix.RawSockaddrInet6, to netip.AddrPort, family int) (int, error) {
	a := to.Addr()
	if family == unix.AF_INET {
		if a.Is4In6() {
			a = a.Unmap()
		}
		if !a.Is4() {
			return 0, ErrFamily
		}
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.As4()}
		putPort(&sa4.Port, to.Port())
		return unix.SizeofSockaddrInet4, nil
	}
	*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16()}
	putPort(&sa.Port, to.Port())
	if z := a.Zone(); z != "" {
		sa.Scope_id = zoneIndex(z)
	}
	return unix.SizeofSockaddrInet6, nil
}

func putPort(dst *uint16, port uint16) {
	p := (*[2]byte)(unsafe.Pointer(dst))
	p[0], p[1] = byte(port>>8), byte(port)
}
