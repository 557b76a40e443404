package ringpoll

import (
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/mmsg"
)

// TestPacketGSOProbe: where the kernel does not know UDP_SEGMENT (the
// probe says so; here a stand-in for it), a kernel that would ignore the
// control message and send a run as one datagram of its payloads, a run
// leaves datagram by datagram, and each arrives on its own with its own
// length.
func TestPacketGSOProbe(t *testing.T) {
	for _, fam := range pcFamilies {
		t.Run(fam.network, func(t *testing.T) {
			if fam.network == "udp6" && ipv6Loopback() != nil {
				t.Skipf("no IPv6 loopback here: %v", ipv6Loopback())
			}
			real := gsoProbe
			defer func() { gsoProbe = real }()
			probed := 0
			gsoProbe = func(int) bool { probed++; return false }
			a := pcListen(t, EngineEpoll, fam.network, fam.addr)
			gsoProbe = real
			b := pcListen(t, EngineEpoll, fam.network, fam.addr)
			pcBigReadBuffer(t, b)
			const n, size, last = 10, 1200, 700
			out := pcSeqPackets(n, size, pcAddrPort(b))
			out[n-1].Data = out[n-1].Data[:last]
			if sent, err := a.WriteBatch(out); sent != n || err != nil {
				t.Fatalf("WriteBatch = %d, %v", sent, err)
			}
			batch := pcBatch(t, 64, maxPacketSize)
			pcDeadline(t, b)
			for got := 0; got < n; {
				ps, err := b.ReadBatch(batch)
				if err != nil {
					t.Fatalf("ReadBatch after %d datagrams: %v", got, err)
				}
				for _, p := range ps {
					want := size
					if got == n-1 {
						want = last
					}
					if p.Size != want || string(p.Data[:6]) != fmt.Sprintf("%06d", got) {
						t.Fatalf("datagram %d: %d bytes starting %q, want %d", got, p.Size, p.Data[:6], want)
					}
					got++
				}
			}
			if s := a.Stats(); s.GSOSends != 0 || s.SentPackets != n {
				t.Errorf("sender stats %v: want no GSO sends, %d datagrams", s, n)
			}
			if probed != 1 {
				t.Errorf("the GSO probe ran %d times for one socket, want once", probed)
			}
		})
	}
}

// gsoStandIn stands in for sendmmsg for the length of a test: it counts
// the segmented messages (those with a UDP_SEGMENT control message) that
// reach the kernel's door, refuses each with what refuse says for its
// destination (nil: it goes), and hands the rest to send, the real call
// or a stand-in that only pretends.
type gsoStandIn struct {
	segmented, refused int
	refuse             func(to netip.AddrPort) error
	send               func(h *mmsg.Headers, fd, from, n int) (int, error)
}

// pcStandIn installs s as sendmmsg until the test ends; a nil s.send is
// the real call.
func pcStandIn(t *testing.T, s *gsoStandIn) *gsoStandIn {
	real := sendmmsg
	t.Cleanup(func() { sendmmsg = real })
	if s.send == nil {
		s.send = real
	}
	sendmmsg = s.call
	return s
}

func (s *gsoStandIn) call(h *mmsg.Headers, fd, from, n int) (int, error) {
	if !pcSegmented(h, from) {
		// Up to the next segmented message, which comes first in a call
		// of its own.
		k := 1
		for k < n && !pcSegmented(h, from+k) {
			k++
		}
		return s.send(h, fd, from, k)
	}
	s.segmented++
	if err := s.refuse(pcDestination(h, from)); err != nil {
		s.refused++
		return 0, err
	}
	return s.send(h, fd, from, 1)
}

// pcSegmented reports whether message i of h asks the kernel to cut it.
func pcSegmented(h *mmsg.Headers, i int) bool { return h.Msghdr(i).Controllen > 0 }

// pcDestination is message i's destination.
func pcDestination(h *mmsg.Headers, i int) netip.AddrPort {
	m := h.Msghdr(i)
	return mmsg.DecodeAddr((*unix.RawSockaddrInet6)(unsafe.Pointer(m.Name)), m.Namelen)
}

// TestPacketGSOEIOEndsIt: EIO for a segmented message (the device cannot
// checksum, which is the socket's route, not the peer) has the run sent
// again datagram by datagram, and no run to any peer is offered
// segmented after.
func TestPacketGSOEIOEndsIt(t *testing.T) {
	a := pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0")
	b, c := pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0"), pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0")
	pcBigReadBuffer(t, b)
	pcBigReadBuffer(t, c)
	st := pcStandIn(t, &gsoStandIn{refuse: func(netip.AddrPort) error { return unix.EIO }})
	const n, size = 20, 500
	batch := pcBatch(t, 64, 2048)
	for i, to := range []*PacketConn{b, b, c} {
		if sent, err := a.WriteBatch(pcSeqPackets(n, size, pcAddrPort(to))); sent != n || err != nil {
			t.Fatalf("run %d: WriteBatch = %d, %v", i, sent, err)
		}
		pcReadSeq(t, to, batch, n, size)
	}
	if st.segmented != 1 {
		t.Errorf("%d segmented messages offered to the kernel; want 1, the one EIO refused", st.segmented)
	}
	if s := a.Stats(); s.GSOFallbacks != 1 || s.GSOSends != 0 || s.SentPackets != 3*n {
		t.Errorf("sender stats %v: want one fallback, no GSO send, %d datagrams", s, 3*n)
	}
}

// TestPacketGSORefusalForgotten: a segmented message refused with EINVAL,
// EMSGSIZE or EOPNOTSUPP is sent again datagram by datagram, and the next
// run to the same peer is offered segmented again: nothing is
// remembered.
func TestPacketGSORefusalForgotten(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EINVAL, unix.EMSGSIZE, unix.EOPNOTSUPP} {
		t.Run(errno.Error(), func(t *testing.T) {
			a, b := pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0"), pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0")
			pcBigReadBuffer(t, b)
			first := true
			st := pcStandIn(t, &gsoStandIn{refuse: func(netip.AddrPort) error {
				if first {
					first = false
					return errno
				}
				return nil
			}})
			const n, size = 20, 500
			batch := pcBatch(t, 64, 2048)
			for i := range 2 {
				if sent, err := a.WriteBatch(pcSeqPackets(n, size, pcAddrPort(b))); sent != n || err != nil {
					t.Fatalf("run %d: WriteBatch = %d, %v", i, sent, err)
				}
				pcReadSeq(t, b, batch, n, size)
			}
			if st.segmented != 2 || st.refused != 1 {
				t.Errorf("%d segmented messages offered, %d refused; want 2 and 1", st.segmented, st.refused)
			}
			if s := a.Stats(); s.GSOFallbacks != 1 || s.GSOSends != 1 || s.SentPackets != 2*n {
				t.Errorf("sender stats %v: want one fallback, one GSO send, %d datagrams", s, 2*n)
			}
		})
	}
}

// TestPacketGSORefusalsKeepNothing: 10,000 peers whose runs are refused
// (replies to spoofed sources, say) leave no memory behind: each is
// offered GSO again next time, and with the race detector off the
// refusals allocate nothing.
func TestPacketGSORefusalsKeepNothing(t *testing.T) {
	a := pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0")
	st := pcStandIn(t, &gsoStandIn{
		refuse: func(netip.AddrPort) error { return unix.EINVAL },
		send:   func(_ *mmsg.Headers, _, _, n int) (int, error) { return n, nil }, // pretends
	})
	const peers = 10000
	run := []Packet{{Data: []byte("0123456789")}, {Data: []byte("abcdefghij")}}
	round := func(base uint16, peers int) {
		for i := range peers {
			to := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), base+uint16(i))
			run[0].Addr, run[1].Addr = to, to
			if sent, err := a.WriteBatch(run); sent != 2 || err != nil {
				t.Fatalf("WriteBatch to %v = %d, %v", to, sent, err)
			}
		}
	}
	round(60000, 1) // warms the pools
	// TotalAlloc is the whole process's: a goroutine of an earlier test
	// may allocate during a round. State kept per peer would show in
	// every round, so the least of three counts.
	least := uint64(math.MaxUint64)
	for k := range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		round(uint16(20000+k*peers), peers)
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	round(20000, peers) // the first round's peers again
	if want := 4*peers + 1; st.segmented != want || st.refused != want {
		t.Errorf("%d segmented messages offered, %d refused; want %d each: every run offered segmented", st.segmented, st.refused, want)
	}
	if !raceEnabled && least >= peers {
		t.Errorf("%d peers refusing GSO cost at least %d bytes in each of three rounds: memory per peer", peers, least)
	}
}
