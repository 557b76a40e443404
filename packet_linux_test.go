package ringpoll

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/mmsg"
)

// pcFamilies are the address families the packet tests run on.
var pcFamilies = []struct{ network, addr string }{
	{"udp4", "127.0.0.1:0"},
	{"udp6", "[::1]:0"},
}

// forEachPacketSetup runs f per engine and address family.
func forEachPacketSetup(t *testing.T, f func(t *testing.T, e Engine, network, addr string)) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, fam := range pcFamilies {
			t.Run(fam.network, func(t *testing.T) {
				if fam.network == "udp6" && ipv6Loopback() != nil {
					t.Skipf("no IPv6 loopback here: %v", ipv6Loopback())
				}
				f(t, e, fam.network, fam.addr)
			})
		}
	})
}

// pcListen opens a PacketConn closed at the end of the test.
func pcListen(t testing.TB, e Engine, network, addr string, opts ...Option) *PacketConn {
	t.Helper()
	c, err := ListenPacket(network, addr, append([]Option{WithEngine(e)}, opts...)...)
	if err != nil {
		t.Fatalf("ListenPacket(%s, %s): %v", network, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func pcAddrPort(c *PacketConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

func pcBatch(t testing.TB, count, size int) *Batch {
	t.Helper()
	b, err := NewBatch(count, size)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pcDeadline bounds each test read, so that a lost datagram fails the
// test instead of hanging it.
func pcDeadline(t testing.TB, c *PacketConn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(tsTimeout)); err != nil {
		t.Fatal(err)
	}
}

func TestPacketConnRoundTrip(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		pcDeadline(t, b)
		if _, err := a.WriteTo([]byte("hello"), b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, from, err := b.ReadFrom(buf)
		if err != nil || string(buf[:n]) != "hello" {
			t.Fatalf("ReadFrom = %q, %v; want hello", buf[:n], err)
		}
		if from.String() != a.LocalAddr().String() {
			t.Errorf("sender %v, want %v", from, a.LocalAddr())
		}
		if _, err := b.WriteToAddrPort([]byte("back"), pcAddrPort(a)); err != nil {
			t.Fatal(err)
		}
		pcDeadline(t, a)
		n, ap, err := a.ReadFromAddrPort(buf)
		if err != nil || string(buf[:n]) != "back" || ap != pcAddrPort(b) {
			t.Fatalf("ReadFromAddrPort = %q, %v, %v; want back from %v", buf[:n], ap, err, pcAddrPort(b))
		}
		if a.RemoteAddr() != nil {
			t.Errorf("RemoteAddr of a listening PacketConn = %v, want nil", a.RemoteAddr())
		}
	})
}

func TestPacketConnBatchRoundTrip(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		const total = 200
		out := make([]Packet, 0, total)
		want := map[string]bool{}
		for i := range total {
			p := fmt.Sprintf("datagram %d %s", i, bytes.Repeat([]byte{'x'}, i%50))
			want[p] = true
			out = append(out, Packet{Data: []byte(p), Addr: pcAddrPort(b)})
		}
		batch := pcBatch(t, 16, 256)
		got := map[string]bool{}
		// In windows of 50, so that the receive buffer never overflows.
		for w := 0; w < total; w += 50 {
			n, err := a.WriteBatch(out[w : w+50])
			if n != 50 || err != nil {
				t.Fatalf("WriteBatch = %d, %v; want 50", n, err)
			}
			for seen := 0; seen < 50; {
				pcDeadline(t, b)
				ps, err := b.ReadBatch(batch)
				if err != nil {
					t.Fatalf("ReadBatch after %d: %v", len(got), err)
				}
				for _, p := range ps {
					if p.Addr != pcAddrPort(a) || p.Truncated || p.Size != len(p.Data) {
						t.Fatalf("packet %q from %v truncated=%v size=%d", p.Data, p.Addr, p.Truncated, p.Size)
					}
					if got[string(p.Data)] || !want[string(p.Data)] {
						t.Fatalf("unexpected or repeated datagram %q", p.Data)
					}
					got[string(p.Data)] = true
				}
				seen += len(ps)
			}
		}
		if len(got) != total {
			t.Fatalf("received %d datagrams, want %d", len(got), total)
		}
		sa, sb := a.Stats(), b.Stats()
		if sa.SentPackets != total || sb.Packets != total || sb.Batches == 0 || sb.Drops != 0 {
			t.Errorf("stats: sender %v; receiver %v", sa, sb)
		}
	})
}

// TestPacketConnBatchViewsStay: the views a ReadBatch returned keep their
// bytes while other datagrams arrive, until the Batch is read into again.
func TestPacketConnBatchViewsStay(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		b1, b2 := pcBatch(t, 4, 64), pcBatch(t, 4, 64)
		if _, err := a.WriteToAddrPort([]byte("first"), pcAddrPort(b)); err != nil {
			t.Fatal(err)
		}
		pcDeadline(t, b)
		held, err := b.ReadBatch(b1)
		if err != nil || len(held) != 1 {
			t.Fatalf("ReadBatch = %d packets, %v", len(held), err)
		}
		for i := range 20 {
			if _, err := a.WriteToAddrPort([]byte(fmt.Sprintf("other %d", i)), pcAddrPort(b)); err != nil {
				t.Fatal(err)
			}
			if ps, err := b.ReadBatch(b2); err != nil || len(ps) == 0 {
				t.Fatalf("ReadBatch into the second batch: %v", err)
			}
		}
		if string(held[0].Data) != "first" {
			t.Fatalf("held view changed to %q", held[0].Data)
		}
		b1.Release()
		if held[0].Data != nil {
			t.Errorf("Release left the packet's view in place")
		}
	})
}

func TestPacketConnDeadlines(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		batch := pcBatch(t, 4, 64)
		buf := make([]byte, 64)
		checkTimeout := func(what string, err error) {
			t.Helper()
			var ne net.Error
			if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("%s: %v, want a timeout wrapping os.ErrDeadlineExceeded", what, err)
			}
		}
		b.SetReadDeadline(time.Now().Add(-time.Second))
		_, _, err := b.ReadFrom(buf)
		checkTimeout("ReadFrom past the deadline", err)
		_, err = b.ReadBatch(batch)
		checkTimeout("ReadBatch past the deadline", err)
		b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		_, err = b.ReadBatch(batch)
		checkTimeout("ReadBatch waiting for a deadline", err)
		// Cleared, the deadline lets the next datagram through.
		b.SetReadDeadline(time.Time{})
		if _, err := a.WriteTo([]byte("late"), b.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		ps, err := b.ReadBatch(batch)
		if err != nil || len(ps) != 1 || string(ps[0].Data) != "late" {
			t.Fatalf("ReadBatch after clearing the deadline: %d packets, %v", len(ps), err)
		}
		a.SetWriteDeadline(time.Now().Add(-time.Second))
		_, err = a.WriteBatch([]Packet{{Data: []byte("x"), Addr: pcAddrPort(b)}})
		checkTimeout("WriteBatch past the deadline", err)
		_, err = a.WriteTo([]byte("x"), b.LocalAddr())
		checkTimeout("WriteTo past the deadline", err)
	})
}

// TestPacketConnCloseUnblocks: Close returns blocked readers of both kinds
// with net.ErrClosed, and later calls fail the same way.
func TestPacketConnCloseUnblocks(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		c := pcListen(t, e, network, addr)
		errs := make(chan error, 2)
		go func() {
			_, _, err := c.ReadFrom(make([]byte, 16))
			errs <- err
		}()
		go func() {
			_, err := c.ReadBatch(pcBatch(t, 4, 16))
			errs <- err
		}()
		c.Close()
		for range 2 {
			if err := tsRecv(t, errs, "a blocked reader"); !errors.Is(err, net.ErrClosed) {
				t.Errorf("blocked read after Close: %v, want net.ErrClosed", err)
			}
		}
		if _, err := c.WriteBatch([]Packet{{Data: []byte("x"), Addr: pcAddrPort(c)}}); !errors.Is(err, net.ErrClosed) {
			t.Errorf("WriteBatch after Close: %v, want net.ErrClosed", err)
		}
	})
}

// TestPacketConnConcurrent: writers and readers of both kinds share two
// PacketConns; every datagram arrives exactly once. A window of credits
// keeps the datagrams in flight under what the receive buffer holds.
func TestPacketConnConcurrent(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		src, dst := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		const writers, each = 4, 100
		credits := make(chan struct{}, 32)
		for range cap(credits) {
			credits <- struct{}{}
		}
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					<-credits
					p := []byte(fmt.Sprintf("w%d-%d", w, i))
					var err error
					if i%2 == 0 {
						_, err = src.WriteBatch([]Packet{{Data: p, Addr: pcAddrPort(dst)}})
					} else {
						_, err = src.WriteToAddrPort(p, pcAddrPort(dst))
					}
					if err != nil {
						t.Errorf("write: %v", err)
						return
					}
				}
			})
		}
		var mu sync.Mutex
		got := map[string]int{}
		count := func(p []byte) bool {
			mu.Lock()
			defer mu.Unlock()
			got[string(p)]++
			credits <- struct{}{}
			return len(got) == writers*each
		}
		dst.SetReadDeadline(time.Now().Add(tsTimeout))
		done := make(chan struct{})
		var once sync.Once
		finish := func() { once.Do(func() { close(done); dst.SetReadDeadline(time.Unix(1, 0)) }) }
		var rg sync.WaitGroup
		rg.Go(func() {
			buf := make([]byte, 64)
			for {
				n, _, err := dst.ReadFromAddrPort(buf)
				if err != nil {
					return
				}
				if count(buf[:n]) {
					finish()
				}
			}
		})
		rg.Go(func() {
			b := pcBatch(t, 8, 64)
			for {
				ps, err := dst.ReadBatch(b)
				if err != nil {
					return
				}
				for _, p := range ps {
					if count(p.Data) {
						finish()
					}
				}
			}
		})
		wg.Wait()
		rg.Wait()
		select {
		case <-done:
		default:
			t.Fatalf("readers stopped with %d of %d datagrams", len(got), writers*each)
		}
		for k, n := range got {
			if n != 1 {
				t.Errorf("datagram %s arrived %d times", k, n)
			}
		}
	})
}

func TestPacketConnTruncation(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		long := bytes.Repeat([]byte("0123456789"), 10)
		send := func() {
			if _, err := a.WriteToAddrPort(long, pcAddrPort(b)); err != nil {
				t.Fatal(err)
			}
		}
		send()
		pcDeadline(t, b)
		buf := make([]byte, 10)
		// As net's: the first bytes, and no error.
		n, from, err := b.ReadFrom(buf)
		if n != 10 || err != nil || from == nil || string(buf) != "0123456789" {
			t.Errorf("ReadFrom of 100 bytes into 10 = %d, %v, %v; want 10, the sender, no error", n, from, err)
		}
		send()
		ps, err := b.ReadBatch(pcBatch(t, 2, 10))
		if err != nil || len(ps) != 1 {
			t.Fatalf("ReadBatch = %d, %v", len(ps), err)
		}
		if p := ps[0]; !p.Truncated || p.Size != 100 || string(p.Data) != "0123456789" {
			t.Errorf("truncated packet: Truncated=%v Size=%d Data=%q", p.Truncated, p.Size, p.Data)
		}
		if s := b.Stats(); s.Truncated != 2 {
			t.Errorf("Stats().Truncated = %d, want 2", s.Truncated)
		}
	})
}

// TestPacketConnCountsDrops: datagrams that arrive while the receive
// buffer is full are dropped by the kernel, and Stats().Drops counts them:
// every datagram sent is either read or counted.
func TestPacketConnCountsDrops(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		if err := b.SetReadBuffer(1); err != nil { // the kernel's smallest
			t.Fatal(err)
		}
		const sent = 200
		msg := bytes.Repeat([]byte{1}, 100)
		for range sent {
			if _, err := a.WriteToAddrPort(msg, pcAddrPort(b)); err != nil {
				t.Fatal(err)
			}
		}
		got := 0
		batch := pcBatch(t, 16, 200)
		tsEventually(t, "every datagram read or counted as dropped", func() bool {
			b.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			ps, _ := b.ReadBatch(batch)
			got += len(ps)
			return uint64(got)+b.Stats().Drops >= sent
		})
		if d := b.Stats().Drops; d == 0 || got == 0 || uint64(got)+d != sent {
			t.Errorf("%d datagrams sent into the smallest receive buffer: %d read, %d counted dropped; want some of each, %d in all", sent, got, d, sent)
		}
	})
}

// TestPacketConnSendBufferFull: a send buffer that takes part of a batch
// and then nothing (EAGAIN, here from a stand-in for sendmmsg that sends
// one datagram a call and refuses every other call) makes WriteBatch
// wait in Go's poller and go on where the kernel stopped: it reports
// every datagram sent, and each arrives once.
func TestPacketConnSendBufferFull(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		if err := b.SetReadBuffer(1 << 20); err != nil {
			t.Fatal(err)
		}
		// While WriteBatch runs, this test's sender is the package's only
		// one (the socket's descriptor changes when it joins the poller).
		real := sendmmsg
		defer func() { sendmmsg = real }()
		calls, refused := 0, 0
		sendmmsg = func(h *mmsg.Headers, fd, from, n int) (int, error) {
			calls++
			switch {
			case calls > 40:
				return real(h, fd, from, n)
			case calls%2 == 1:
				return real(h, fd, from, 1) // room for one
			default:
				refused++
				return 0, unix.EAGAIN
			}
		}
		// Lengths that grow, so that no two datagrams share a GSO message.
		const total = 30
		out := make([]Packet, total)
		for i := range out {
			out[i] = Packet{Data: []byte(fmt.Sprintf("datagram %02d %s", i, bytes.Repeat([]byte{'x'}, i))), Addr: pcAddrPort(b)}
		}
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			n, err := a.WriteBatch(out) // on a socket outside the poller until the buffer is full
			done <- result{n, err}
		}()
		select {
		case r := <-done:
			if r.n != total || r.err != nil {
				t.Fatalf("WriteBatch through a full send buffer = %d, %v; want %d, nil", r.n, r.err, total)
			}
		case <-time.After(tsTimeout):
			t.Fatal("WriteBatch through a full send buffer did not return")
		}
		sendmmsg = real
		if refused == 0 || a.polled.Load() == nil {
			t.Fatalf("the send buffer was full %d times, the socket joined the poller: %v", refused, a.polled.Load() != nil)
		}
		got := map[string]int{}
		batch := pcBatch(t, 16, 256)
		for len(got) < total {
			pcDeadline(t, b)
			ps, err := b.ReadBatch(batch)
			if err != nil {
				t.Fatalf("ReadBatch after %d datagrams: %v", len(got), err)
			}
			for _, p := range ps {
				got[string(p.Data)]++
			}
		}
		for _, p := range out {
			if got[string(p.Data)] != 1 {
				t.Errorf("%q arrived %d times", p.Data, got[string(p.Data)])
			}
		}
		if s := a.Stats(); s.SentPackets != total {
			t.Errorf("Stats().SentPackets = %d, want %d", s.SentPackets, total)
		}
	})
}

// TestPacketConnSizes: the largest datagram a family carries goes through
// whole; one byte more is refused with ErrMessageTooLong, by every write.
func TestPacketConnSizes(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		max := maxPayload(network == "udp6")
		big := bytes.Repeat([]byte{7}, max)
		if err := b.SetReadBuffer(4 * max); err != nil {
			t.Fatal(err)
		}
		if n, err := a.WriteBatch([]Packet{{Data: big, Addr: pcAddrPort(b)}}); n != 1 || err != nil {
			t.Fatalf("WriteBatch of %d bytes = %d, %v", max, n, err)
		}
		pcDeadline(t, b)
		ps, err := b.ReadBatch(pcBatch(t, 1, maxPacketSize))
		if err != nil || len(ps) != 1 || !bytes.Equal(ps[0].Data, big) {
			t.Fatalf("ReadBatch of the largest datagram: %d packets, %v", len(ps), err)
		}
		over := append(big, 7)
		checkTooLong := func(what string, n int, err error) {
			t.Helper()
			if n != 0 || !errors.Is(err, ErrMessageTooLong) || !errors.Is(err, syscall.EMSGSIZE) {
				t.Errorf("%s of %d bytes = %d, %v; want ErrMessageTooLong", what, len(over), n, err)
			}
		}
		n, err := a.WriteTo(over, b.LocalAddr())
		checkTooLong("WriteTo", n, err)
		n, err = a.WriteToAddrPort(over, pcAddrPort(b))
		checkTooLong("WriteToAddrPort", n, err)
		n, err = a.WriteBatch([]Packet{{Data: over, Addr: pcAddrPort(b)}})
		checkTooLong("WriteBatch", n, err)
		// A bad packet in the middle: those before it go, it fails.
		n, err = a.WriteBatch([]Packet{{Data: []byte("ok"), Addr: pcAddrPort(b)}, {Data: over, Addr: pcAddrPort(b)}})
		if n != 1 || !errors.Is(err, ErrMessageTooLong) {
			t.Errorf("WriteBatch of a good and a too-long packet = %d, %v; want 1, ErrMessageTooLong", n, err)
		}
	})
}

// TestPacketConnConnected: DialPacket's PacketConn reads and writes its
// peer only, refuses addressed writes, and surfaces the peer host's ICMP
// port unreachable as syscall.ECONNREFUSED.
func TestPacketConnConnected(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		srv := pcListen(t, e, network, addr)
		c, err := DialPacket(network, srv.LocalAddr().String(), WithEngine(e))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.RemoteAddr().String() != srv.LocalAddr().String() {
			t.Errorf("RemoteAddr = %v, want %v", c.RemoteAddr(), srv.LocalAddr())
		}
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if n, err := c.WriteBatch([]Packet{{Data: []byte("ping2")}}); n != 1 || err != nil {
			t.Fatalf("WriteBatch to the peer = %d, %v", n, err)
		}
		pcDeadline(t, srv)
		batch := pcBatch(t, 4, 64)
		var got []string
		for len(got) < 2 {
			ps, err := srv.ReadBatch(batch)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				got = append(got, string(p.Data))
				if _, err := srv.WriteToAddrPort([]byte("pong"), p.Addr); err != nil {
					t.Fatal(err)
				}
			}
		}
		pcDeadline(t, c)
		buf := make([]byte, 16)
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "pong" {
			t.Fatalf("Read = %q, %v", buf[:n], err)
		}
		if _, err := c.WriteBatch([]Packet{{Data: []byte("x"), Addr: pcAddrPort(srv)}}); !errors.Is(err, net.ErrWriteToConnected) {
			t.Errorf("addressed WriteBatch on a connected PacketConn: %v, want net.ErrWriteToConnected", err)
		}
		// The peer goes away: the next exchange fails with ECONNREFUSED.
		srv.Close()
		for _, read := range []func() error{
			func() error { _, err := c.Read(buf); return err },
			func() error { _, err := c.ReadBatch(batch); return err },
		} {
			if _, err := c.Write([]byte("anyone?")); err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("Write to a closed port: %v", err)
			} else if err != nil {
				continue // the error was reported here
			}
			pcDeadline(t, c)
			if err := read(); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("read after writing to a closed port: %v, want ECONNREFUSED", err)
			}
		}
	})
}

// TestPacketBadInput: malformed arguments fail clearly, naming what to fix.
func TestPacketBadInput(t *testing.T) {
	for _, args := range [][2]int{{0, 10}, {maxBatchPackets + 1, 10}, {1, 0}, {1, maxPacketSize + 1}} {
		if _, err := NewBatch(args[0], args[1]); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("NewBatch(%d, %d): %v, want ErrInvalidOption", args[0], args[1], err)
		}
	}
	var une net.UnknownNetworkError
	if _, err := ListenPacket("tcp", "127.0.0.1:0"); !errors.As(err, &une) || !strings.Contains(err.Error(), "Listen or Dial") {
		t.Errorf("ListenPacket(tcp): %v, want a net.UnknownNetworkError pointing to Listen", err)
	}
	if _, err := DialPacket("unixgram", "/x"); !errors.As(err, &une) {
		t.Errorf("DialPacket(unixgram): %v, want a net.UnknownNetworkError", err)
	}
	if _, err := ListenPacket("udp", "127.0.0.1:0", WithReusePort(0)); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("WithReusePort(0): %v, want ErrInvalidOption", err)
	}
	c := pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0")
	if _, err := c.WriteBatch([]Packet{{Data: []byte("x")}}); err == nil {
		t.Error("WriteBatch without an address on an unconnected PacketConn succeeded")
	}
	v6 := netip.MustParseAddrPort("[::1]:53")
	if _, err := c.WriteBatch([]Packet{{Data: []byte("x"), Addr: v6}}); !errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Errorf("IPv6 destination on an IPv4 socket: %v, want EAFNOSUPPORT", err)
	}
}

// pcSeqPackets returns n packets of size bytes to addr, each starting with
// its number.
func pcSeqPackets(n, size int, to netip.AddrPort) []Packet {
	ps := make([]Packet, n)
	for i := range ps {
		d := bytes.Repeat([]byte{byte(i)}, size)
		copy(d, fmt.Sprintf("%06d", i))
		ps[i] = Packet{Data: d, Addr: to}
	}
	return ps
}

// pcBigReadBuffer gives c a receive buffer that holds what a test sends
// at once (SO_RCVBUFFORCE, past net.core.rmem_max: needs CAP_NET_ADMIN).
func pcBigReadBuffer(t testing.TB, c *PacketConn) {
	t.Helper()
	var serr error
	c.control(func(fd int) {
		serr = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	})
	if serr != nil {
		t.Skipf("SO_RCVBUFFORCE: %v (needs CAP_NET_ADMIN)", serr)
	}
}

// pcReadSeq reads n datagrams of size bytes, numbered in order, with
// ReadBatch into batch.
func pcReadSeq(t *testing.T, c *PacketConn, batch *Batch, n, size int) {
	t.Helper()
	pcDeadline(t, c)
	for got := 0; got < n; {
		ps, err := c.ReadBatch(batch)
		if err != nil {
			t.Fatalf("ReadBatch after %d datagrams: %v", got, err)
		}
		for _, p := range ps {
			if len(p.Data) != size || p.Size != size || string(p.Data[:6]) != fmt.Sprintf("%06d", got) {
				t.Fatalf("datagram %d: %d bytes starting %q", got, len(p.Data), p.Data[:min(6, len(p.Data))])
			}
			got++
		}
	}
}

// TestPacketGSO: a run of equal datagrams to one destination leaves as
// segmented messages and arrives as the same datagrams, in order; with
// WithoutGSO, as single ones.
func TestPacketGSO(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		for _, off := range []bool{false, true} {
			t.Run(fmt.Sprintf("without=%v", off), func(t *testing.T) {
				var opts []Option
				if off {
					opts = append(opts, WithoutGSO())
				}
				a, b := pcListen(t, e, network, addr, opts...), pcListen(t, e, network, addr)
				pcBigReadBuffer(t, b)
				const n, size = 300, 1200
				if sent, err := a.WriteBatch(pcSeqPackets(n, size, pcAddrPort(b))); sent != n || err != nil {
					t.Fatalf("WriteBatch = %d, %v", sent, err)
				}
				pcReadSeq(t, b, pcBatch(t, 64, 2048), n, size)
				s := a.Stats()
				if s.SentPackets != n || (s.GSOSends > 0) == off {
					t.Errorf("sender stats %v (WithoutGSO=%v)", s, off)
				}
			})
		}
	})
}

// TestPacketGSOFallback: a socket whose sends the kernel will not segment
// (SO_NO_CHECK: no UDP checksum, which GSO needs; EINVAL) still delivers
// every datagram, each run sent again datagram by datagram. EINVAL is not
// remembered, so each round's run falls back.
func TestPacketGSOFallback(t *testing.T) {
	a, b := pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0"), pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0")
	a.control(func(fd int) {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
			t.Fatal(err)
		}
	})
	pcBigReadBuffer(t, b)
	const n, size = 40, 500
	for round := range 2 {
		if sent, err := a.WriteBatch(pcSeqPackets(n, size, pcAddrPort(b))); sent != n || err != nil {
			t.Fatalf("round %d: WriteBatch = %d, %v", round, sent, err)
		}
		pcReadSeq(t, b, pcBatch(t, 64, 2048), n, size)
	}
	if s := a.Stats(); s.GSOFallbacks != 2 || s.GSOSends != 0 || s.SentPackets != 2*n {
		t.Errorf("sender stats %v: want two fallbacks, no GSO send, %d sent", s, 2*n)
	}
}

// TestPacketGRO: with WithGRO, datagrams the kernel coalesced come out of
// ReadBatch and ReadFrom one by one, whole and in order; a Batch too small
// for a coalesced receive is refused with a clear error.
func TestPacketGRO(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr, WithGRO())
		if !b.Stats().GRO {
			t.Skip("no UDP_GRO in this kernel")
		}
		pcBigReadBuffer(t, b)
		const n, size = 200, 1000
		to := pcAddrPort(b)
		if sent, err := a.WriteBatch(pcSeqPackets(n, size, to)); sent != n || err != nil {
			t.Fatalf("WriteBatch = %d, %v", sent, err)
		}
		pcReadSeq(t, b, pcBatch(t, 4, maxPacketSize), n, size)
		if s := b.Stats(); s.Packets != n || s.Batches >= n {
			t.Errorf("receiver stats %v: want %d datagrams in fewer receives", s, n)
		}
		if _, err := b.ReadBatch(pcBatch(t, 4, 2048)); !errors.Is(err, errGROBatch) {
			t.Errorf("ReadBatch with 2 KiB slots on a GRO socket: %v", err)
		}
		if sent, err := a.WriteBatch(pcSeqPackets(10, size, to)); sent != 10 || err != nil {
			t.Fatalf("WriteBatch = %d, %v", sent, err)
		}
		buf := make([]byte, 2048)
		pcDeadline(t, b)
		for i := range 10 {
			k, from, err := b.ReadFromAddrPort(buf)
			if err != nil || k != size || from != pcAddrPort(a) || string(buf[:6]) != fmt.Sprintf("%06d", i) {
				t.Fatalf("ReadFromAddrPort %d on a GRO socket = %d bytes %q from %v, %v", i, k, buf[:6], from, err)
			}
		}
	})
}

// pcInode returns the inode of c's socket.
func pcInode(t testing.TB, c *PacketConn) uint64 {
	t.Helper()
	var st unix.Stat_t
	var serr error
	if err := c.control(func(fd int) { serr = unix.Fstat(fd, &st) }); err != nil || serr != nil {
		t.Fatalf("fstat: %v %v", err, serr)
	}
	return st.Ino
}

// pcEachFD calls f with each of the process's descriptors and what it
// links to.
func pcEachFD(t testing.TB, f func(fd, link string)) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		link, _ := os.Readlink("/proc/self/fd/" + e.Name())
		f(e.Name(), link)
	}
}

// pcInPoller reports whether c's socket is in one of the process's epoll
// sets, by its inode in the sets' /proc fdinfo.
func pcInPoller(t testing.TB, c *PacketConn) bool {
	t.Helper()
	ino := fmt.Sprintf(" ino:%x ", pcInode(t, c))
	in := false
	pcEachFD(t, func(fd, link string) {
		if link != "anon_inode:[eventpoll]" {
			return
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + fd)
		in = in || err == nil && strings.Contains(string(info), ino)
	})
	return in
}

// pcDescriptors counts the process's descriptors on c's socket.
func pcDescriptors(t testing.TB, c *PacketConn) int {
	t.Helper()
	want := fmt.Sprintf("socket:[%d]", pcInode(t, c))
	n := 0
	pcEachFD(t, func(_, link string) {
		if link == want {
			n++
		}
	})
	return n
}

// TestPacketConnJoinsPollerToWait: a PacketConn's socket enters Go's
// poller only when something must wait on it (a read, a deadline), not
// for writes that go out at once or for socket options, with one
// descriptor throughout, and leaves it on Close.
func TestPacketConnJoinsPollerToWait(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		a, b := pcListen(t, e, network, addr), pcListen(t, e, network, addr)
		steps := []struct {
			what string
			do   func() error
			in   bool
		}{
			{"listening", func() error { return nil }, false},
			{"after SetReadBuffer", func() error { return a.SetReadBuffer(1 << 20) }, false},
			{"after WriteBatch", func() error {
				_, err := a.WriteBatch([]Packet{{Data: []byte("one"), Addr: pcAddrPort(b)}})
				return err
			}, false},
			{"after Stats", func() error { a.Stats(); return nil }, false},
			{"after ReadFrom", func() error {
				if _, err := b.WriteBatch([]Packet{{Data: []byte("two"), Addr: pcAddrPort(a)}}); err != nil {
					return err
				}
				pcDeadline(t, a)
				buf := make([]byte, 16)
				n, _, err := a.ReadFrom(buf)
				if err == nil && string(buf[:n]) != "two" {
					err = fmt.Errorf("read %q, want %q", buf[:n], "two")
				}
				return err
			}, true},
		}
		for _, s := range steps {
			if err := s.do(); err != nil {
				t.Fatalf("%s: %v", s.what, err)
			}
			if got := pcInPoller(t, a); got != s.in {
				t.Fatalf("%s: socket in Go's epoll set: %v, want %v", s.what, got, s.in)
			}
			if n := pcDescriptors(t, a); n != 1 {
				t.Fatalf("%s: %d descriptors on the socket, want 1", s.what, n)
			}
		}
		var st unix.Stat_t
		var fd int
		a.control(func(f int) { fd = f; unix.Fstat(f, &st) })
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("second Close: %v, want net.ErrClosed", err)
		}
		if err := a.SetReadBuffer(1 << 20); !errors.Is(err, net.ErrClosed) {
			t.Errorf("SetReadBuffer after Close: %v, want net.ErrClosed", err)
		}
		if _, err := a.WriteBatch([]Packet{{Data: []byte("x"), Addr: pcAddrPort(b)}}); !errors.Is(err, net.ErrClosed) {
			t.Errorf("WriteBatch after Close: %v, want net.ErrClosed", err)
		}
		var now unix.Stat_t
		if err := unix.Fstat(fd, &now); err == nil && now.Ino == st.Ino {
			t.Errorf("fd %d still open on the socket after Close", fd)
		}
	})
}

// TestReadSize: how many datagrams a read offers to take doubles after
// each read that took all it offered (up to the batch's count), falls to
// what came when a read emptied the socket, and halves, down to one, on a
// read that found it empty.
func TestReadSize(t *testing.T) {
	r := readSize{n: 1, max: 64}
	for i, s := range []struct{ got, want int }{
		{1, 2}, {2, 4}, {4, 8}, {8, 16}, {16, 32}, {32, 64}, {64, 64}, // busy: to the count and there
		{10, 10}, // the socket ran dry after 10
		{0, 5},   // found nothing
		{0, 2},
		{0, 1},
		{0, 1}, // never below one
		{1, 2}, // a lone datagram filled its one slot
		{1, 1}, // and one of two came
	} {
		r.next(s.got)
		if r.n != s.want {
			t.Fatalf("step %d: after a read of %d, n = %d, want %d", i, s.got, r.n, s.want)
		}
	}
	one := readSize{n: 1, max: 1}
	one.next(1)
	if one.n != 1 {
		t.Fatalf("a batch of one offers %d", one.n)
	}
}
