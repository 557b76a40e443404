package ringpoll

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
)

// TestPacketDualStackSizes: a dual-stack socket ("udp" on [::]) limits
// each datagram by its destination's family: to an IPv4 peer, mapped or
// not, IPv4's 65,507 bytes (one more fails with ErrMessageTooLong, not a
// bare EMSGSIZE from the kernel), to an IPv6 one IPv6's 65,527; a GSO
// run to an IPv4 peer keeps its total within IPv4's limit, so the kernel
// never refuses it; and the two forms of an IPv4 address are one peer,
// whose datagrams make one run.
func TestPacketDualStackSizes(t *testing.T) {
	if err := ipv6Loopback(); err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	a := pcListen(t, EngineEpoll, "udp", "[::]:0")
	b4, b6 := pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0"), pcListen(t, EngineEpoll, "udp6", "[::1]:0")
	pcBigReadBuffer(t, b4)
	pcBigReadBuffer(t, b6)
	port4 := pcAddrPort(b4).Port()
	mapped := netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.0.0.1"), port4)
	plain := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port4)
	batch := pcBatch(t, 64, maxPacketSize)
	for _, peer := range []struct {
		to  netip.AddrPort
		b   *PacketConn
		max int
	}{
		{mapped, b4, maxPayload(false)},
		{plain, b4, maxPayload(false)},
		{pcAddrPort(b6), b6, maxPayload(true)},
	} {
		t.Run(peer.to.Addr().String(), func(t *testing.T) {
			largest := bytes.Repeat([]byte{7}, peer.max)
			if n, err := a.WriteToAddrPort(largest, peer.to); n != peer.max || err != nil {
				t.Fatalf("WriteToAddrPort of %d bytes = %d, %v", peer.max, n, err)
			}
			if n, err := a.WriteBatch([]Packet{{Data: largest, Addr: peer.to}}); n != 1 || err != nil {
				t.Fatalf("WriteBatch of %d bytes = %d, %v", peer.max, n, err)
			}
			pcDeadline(t, peer.b)
			for got := 0; got < 2; {
				ps, err := peer.b.ReadBatch(batch)
				if err != nil {
					t.Fatalf("ReadBatch: %v", err)
				}
				for _, p := range ps {
					if p.Size != peer.max {
						t.Fatalf("the largest datagram arrived with %d bytes, want %d", p.Size, peer.max)
					}
				}
				got += len(ps)
			}
			over := append(largest, 7)
			tooLong := func(what string, n int, err error) {
				t.Helper()
				if n != 0 || !errors.Is(err, ErrMessageTooLong) || !errors.Is(err, syscall.EMSGSIZE) {
					t.Errorf("%s of %d bytes to %v = %d, %v; want ErrMessageTooLong", what, len(over), peer.to, n, err)
				}
			}
			n, err := a.WriteToAddrPort(over, peer.to)
			tooLong("WriteToAddrPort", n, err)
			n, err = a.WriteTo(over, net.UDPAddrFromAddrPort(peer.to))
			tooLong("WriteTo", n, err)
			n, err = a.WriteBatch([]Packet{{Data: over, Addr: peer.to}})
			tooLong("WriteBatch", n, err)
			w := &PacketWriter{conn: a}
			tooLong("PacketWriter.WriteTo", 0, w.WriteTo(over, peer.to))
		})
	}
	t.Run("runs", func(t *testing.T) {
		// 52 datagrams of 1,260 bytes: 65,520 in all, within IPv6's limit
		// and over IPv4's. Then ten to the IPv4 peer by both its names.
		const n, size = 52, 1260
		if sent, err := a.WriteBatch(pcSeqPackets(n, size, mapped)); sent != n || err != nil {
			t.Fatalf("WriteBatch = %d, %v", sent, err)
		}
		pcReadSeq(t, b4, batch, n, size)
		mixed := pcSeqPackets(10, 100, plain)
		for i := 1; i < len(mixed); i += 2 {
			mixed[i].Addr = mapped
		}
		before := a.Stats().GSOSends
		if sent, err := a.WriteBatch(mixed); sent != len(mixed) || err != nil {
			t.Fatalf("WriteBatch = %d, %v", sent, err)
		}
		pcReadSeq(t, b4, batch, len(mixed), 100)
		s := a.Stats()
		if s.GSOFallbacks != 0 {
			t.Errorf("stats %v: a run to an IPv4 peer was refused", s)
		}
		if s.GSOSends-before != 1 {
			t.Errorf("ten datagrams to %v and %v went as %d GSO messages, want one", plain, mapped, s.GSOSends-before)
		}
	})
}
