package ringpoll

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// TestPacketBatchNoAllocs: in steady state, a WriteBatch and the
// ReadBatch that receives it allocate nothing, however many datagrams.
func TestPacketBatchNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items on purpose")
	}
	a, b := pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0"), pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0")
	out := make([]Packet, 32)
	for i := range out {
		out[i] = Packet{Data: make([]byte, 100), Addr: pcAddrPort(b)}
	}
	batch := pcBatch(t, 32, 256)
	pcDeadline(t, b)
	exchange := func() {
		if n, err := a.WriteBatch(out); n != len(out) || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		for got := 0; got < len(out); {
			ps, err := b.ReadBatch(batch)
			if err != nil {
				t.Fatal(err)
			}
			got += len(ps)
		}
	}
	exchange()
	if allocs := testing.AllocsPerRun(100, exchange); allocs != 0 {
		t.Errorf("a batch of %d datagrams sent and received: %.1f allocations, want 0", len(out), allocs)
	}
}

// The receive benchmarks measure the CPU a reader spends per datagram
// (ns/op is per datagram), apart from the sender's: with the timer
// stopped, a sender fills the reader's socket with pbQueued datagrams of
// 32 bytes; the timer runs while the reader drains them.
const pbQueued = 2000

// pbSetup returns a reader, with a receive buffer the queue fits in, and
// a function that queues pbQueued datagrams to it.
func pbSetup(b *testing.B) (*PacketConn, func()) {
	r, s := pcListen(b, EngineEpoll, "udp4", "127.0.0.1:0"), pcListen(b, EngineEpoll, "udp4", "127.0.0.1:0")
	r.control(func(fd int) {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20); err != nil {
			b.Skipf("SO_RCVBUFFORCE (needs CAP_NET_ADMIN): %v", err)
		}
	})
	out := make([]Packet, 64)
	for i := range out {
		out[i] = Packet{Data: make([]byte, 32), Addr: pcAddrPort(r)}
	}
	fill := func() {
		for sent := 0; sent < pbQueued; sent += len(out) {
			if _, err := s.WriteBatch(out[:min(len(out), pbQueued-sent)]); err != nil {
				b.Fatal(err)
			}
		}
	}
	return r, fill
}

// pbDrain runs read until pbQueued datagrams arrived, per b.N/pbQueued
// rounds, timing only the reads.
func pbDrain(b *testing.B, fill func(), read func() int) {
	b.ReportAllocs()
	b.StopTimer()
	for done := 0; done < b.N; done += pbQueued {
		fill()
		b.StartTimer()
		for got := 0; got < pbQueued; {
			got += read()
		}
		b.StopTimer()
	}
}

func BenchmarkPacketRecv(b *testing.B) {
	b.Run("std-ReadFromUDPAddrPort", func(b *testing.B) {
		r, fill := pbSetup(b)
		buf := make([]byte, 2048)
		pbDrain(b, fill, func() int {
			if _, _, err := pcUDP(b, r).ReadFromUDPAddrPort(buf); err != nil {
				b.Fatal(err)
			}
			return 1
		})
	})
	b.Run("x-net-ipv4-ReadBatch-64", func(b *testing.B) {
		r, fill := pbSetup(b)
		pc := ipv4.NewPacketConn(pcUDP(b, r))
		ms := make([]ipv4.Message, 64)
		for i := range ms {
			ms[i].Buffers = [][]byte{make([]byte, 2048)}
		}
		pbDrain(b, fill, func() int {
			n, err := pc.ReadBatch(ms, 0)
			if err != nil {
				b.Fatal(err)
			}
			return n
		})
	})
	b.Run("ringpoll-ReadFromAddrPort", func(b *testing.B) {
		r, fill := pbSetup(b)
		buf := make([]byte, 2048)
		pbDrain(b, fill, func() int {
			if _, _, err := r.ReadFromAddrPort(buf); err != nil {
				b.Fatal(err)
			}
			return 1
		})
	})
	b.Run("ringpoll-ReadBatch-64", func(b *testing.B) {
		r, fill := pbSetup(b)
		batch := pcBatch(b, 64, 2048)
		pbDrain(b, fill, func() int {
			ps, err := r.ReadBatch(batch)
			if err != nil {
				b.Fatal(err)
			}
			return len(ps)
		})
	})
}

// BenchmarkPacketSend: ns/op per datagram of 32 bytes sent to a reader
// that never reads (its socket drops what overflows; the send side's cost
// is what is measured, loopback delivery included). With GSO the kernel
// carries 64 datagrams as one message, and drops one at the full socket
// at once, which flatters it here: the UDP scenario of ringbench is the
// fair comparison.
func BenchmarkPacketSend(b *testing.B) {
	setup := func(b *testing.B) (*PacketConn, netip.AddrPort) {
		r, s := pcListen(b, EngineEpoll, "udp4", "127.0.0.1:0"), pcListen(b, EngineEpoll, "udp4", "127.0.0.1:0")
		b.ReportAllocs()
		return s, pcAddrPort(r)
	}
	payload := make([]byte, 32)
	b.Run("std-WriteToUDPAddrPort", func(b *testing.B) {
		s, to := setup(b)
		su := pcUDP(b, s)
		for range b.N {
			if _, err := su.WriteToUDPAddrPort(payload, to); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("x-net-ipv4-WriteBatch-64", func(b *testing.B) {
		s, to := setup(b)
		pc := ipv4.NewPacketConn(pcUDP(b, s))
		ms := make([]ipv4.Message, 64)
		dst := net.UDPAddrFromAddrPort(to)
		for i := range ms {
			ms[i] = ipv4.Message{Buffers: [][]byte{payload}, Addr: dst}
		}
		for done := 0; done < b.N; done += len(ms) {
			if _, err := pc.WriteBatch(ms[:min(len(ms), b.N-done)], 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	ringpollSend := func(gso bool) func(*testing.B) {
		return func(b *testing.B) {
			s, to := setup(b)
			s.gso.Store(gso)
			out := make([]Packet, 64)
			for i := range out {
				out[i] = Packet{Data: payload, Addr: to}
			}
			for done := 0; done < b.N; done += len(out) {
				if _, err := s.WriteBatch(out[:min(len(out), b.N-done)]); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("ringpoll-WriteBatch-64-noGSO", ringpollSend(false))
	b.Run("ringpoll-WriteBatch-64", ringpollSend(true))
}

// pcUDP returns c's socket as a net.UDPConn in Go's poller, for the std
// benchmarks' loops.
func pcUDP(tb testing.TB, c *PacketConn) *net.UDPConn {
	tb.Helper()
	p, err := c.poller()
	if err != nil {
		tb.Fatal(err)
	}
	return p.uc
}
