package ringpoll

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// TestMessageConnReadBatch: MessageConn's ReadBatch reads as x/net's does
// (datagrams, senders, control messages, MSG_TRUNC on a cut one), counts
// what it read in Stats, stops at the read deadline with a timeout, and
// fails with net.ErrClosed after Close; on udp4 and on a dual-stack
// socket, on every engine.
func TestMessageConnReadBatch(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, tc := range []struct{ network, listen, dial string }{
			{"udp4", "127.0.0.1:0", "127.0.0.1"},
			{"udp", "[::]:0", "::1"},
		} {
			t.Run(tc.network, func(t *testing.T) {
				c := pcListen(t, e, tc.network, tc.listen)
				mc := c.MessageConn()
				port := c.LocalAddr().(*net.UDPAddr).Port
				peer, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.ParseIP(tc.dial), Port: port})
				if err != nil {
					t.Fatal(err)
				}
				defer peer.Close()
				if err := c.SetReadBuffer(1 << 20); err != nil {
					t.Fatal(err)
				}
				for _, s := range []string{"one", "", "three is too long"} {
					if _, err := peer.Write([]byte(s)); err != nil {
						t.Fatal(err)
					}
				}
				ms := make([]ipv4.Message, 8)
				for i := range ms {
					ms[i].Buffers = [][]byte{make([]byte, 8)}
					ms[i].OOB = make([]byte, 64)
				}
				mc.SetReadDeadline(time.Now().Add(tsTimeout))
				got := 0
				want := []string{"one", "", "three is"}
				for got < len(want) {
					n, err := mc.ReadBatch(ms[got:], 0)
					if err != nil {
						t.Fatalf("ReadBatch after %d: %v", got, err)
					}
					for _, m := range ms[got : got+n] {
						a, ok := m.Addr.(*net.UDPAddr)
						if !ok || a.Port != peer.LocalAddr().(*net.UDPAddr).Port {
							t.Errorf("message %d from %v, want the peer %v", got, m.Addr, peer.LocalAddr())
						}
						if s := string(m.Buffers[0][:m.N]); s != want[got] {
							t.Errorf("message %d is %q, want %q", got, s, want[got])
						}
						if cut := m.Flags&unix.MSG_TRUNC != 0; cut != (got == 2) {
							t.Errorf("message %d: MSG_TRUNC %v", got, cut)
						}
						got++
					}
				}
				st := c.Stats()
				if st.Packets != 3 || st.Truncated != 1 || st.Batches == 0 {
					t.Errorf("Stats %v: want the 3 datagrams, 1 truncated", st)
				}
				mc.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
				_, err = mc.ReadBatch(ms, 0)
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("ReadBatch past the deadline: %v, want a timeout", err)
				}
				c.Close()
				if _, err := mc.ReadBatch(ms, 0); !errors.Is(err, net.ErrClosed) {
					t.Errorf("ReadBatch after Close: %v, want net.ErrClosed", err)
				}
			})
		}
	})
}

// TestMessageConnReadBatchWoken: a ReadBatch waiting for a datagram is
// ended by Close from another goroutine with net.ErrClosed.
func TestMessageConnReadBatchWoken(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		c := pcListen(t, e, "udp4", "127.0.0.1:0")
		mc := c.MessageConn()
		ms := []ipv4.Message{{Buffers: [][]byte{make([]byte, 64)}}}
		// Join the poller first, so that the read below waits there.
		mc.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := mc.ReadBatch(ms, 0); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("first ReadBatch: %v, want a timeout", err)
		}
		mc.SetReadDeadline(time.Time{})
		done := make(chan error, 1)
		go func() { _, err := mc.ReadBatch(ms, 0); done <- err }()
		// The reader may not be waiting yet: Close must end it either way.
		c.Close()
		if err := tsRecv(t, done, "ReadBatch to end"); !errors.Is(err, net.ErrClosed) {
			t.Errorf("ReadBatch ended by Close: %v, want net.ErrClosed", err)
		}
	})
}
