package ringpoll

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// TestPacketServerShutdownReplies: a reply owed when Shutdown starts
// reaches its client. A handler holds a request while Shutdown stops the
// readers (HookPacketShutdownWaits); then it replies; the reply arrives
// and is counted, Shutdown returns nil having closed the socket, and a
// datagram sent after reading stopped never reaches the handler.
func TestPacketServerShutdownReplies(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, mode := range []string{"pooled", "inline"} {
			t.Run(mode, func(t *testing.T) {
				psShutdownReplies(t, e, mode == "inline")
			})
		}
	})
}

func psShutdownReplies(t *testing.T, e Engine, inline bool) {
	c := pcListen(t, e, "udp4", "127.0.0.1:0")
	got := make(chan string, 4)
	release := make(chan struct{})
	h := PacketHandlerFunc(func(w *PacketWriter, in []Packet) {
		for _, p := range in {
			got <- string(p.Data)
			<-release
			if err := w.WriteTo(append([]byte("reply to "), p.Data...), p.Addr); err != nil {
				t.Errorf("WriteTo: %v", err)
			}
		}
	})
	opts := []Option{WithEngine(e)}
	if inline {
		opts = append(opts, WithInlineHandler())
	}
	s, served, client := psServeRequest(t, c, h, opts...)
	if m := tsRecv(t, got, "the handler"); m != "request" {
		t.Fatalf("handler got %q", m)
	}
	waiting := make(chan struct{})
	defer poll.SetTestHook(func(p poll.HookPoint, _ *poll.FD) {
		if p == poll.HookPacketShutdownWaits {
			close(waiting)
		}
	})()
	shut := psShutdown(s)
	tsRecv(t, waiting, "Shutdown to stop reading")
	if _, err := client.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	close(release)
	client.SetReadDeadline(time.Now().Add(tsTimeout))
	buf := make([]byte, 64)
	if n, err := client.Read(buf); err != nil || string(buf[:n]) != "reply to request" {
		t.Errorf("the client read %q, %v; want the reply owed when Shutdown started", buf[:n], err)
	}
	psShutdownReturned(t, shut, served)
	select {
	case m := <-got:
		t.Errorf("the handler got %q after Shutdown stopped reading", m)
	default:
	}
	if st := c.Stats(); st.SentPackets != 1 {
		t.Errorf("stats %v: want the reply counted", st)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Close after Shutdown returned: %v, want net.ErrClosed (Shutdown closes the sockets)", err)
	}
}

// TestPacketServerShutdownReadUnderWay: a read deadline ends a reader's
// wait, not a recvmmsg already under way. A pooled reader is held inside
// ReadBatch, past its deadline check (HookBatchRecv), while Shutdown stops
// reading and a datagram arrives; released, its recvmmsg gets that
// datagram, which must not reach the handler. The readiness engines (the
// io_uring ones read a PacketServer's sockets through a ring).
func TestPacketServerShutdownReadUnderWay(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		if e.ringsPackets() {
			t.Skipf("%v reads a PacketServer's sockets through a ring", e)
		}
		c := pcListen(t, e, "udp4", "127.0.0.1:0")
		var stopping atomic.Bool
		got := make(chan string, 8)
		release := make(chan struct{})
		h := PacketHandlerFunc(func(w *PacketWriter, in []Packet) {
			for _, p := range in {
				if stopping.Load() {
					t.Errorf("the handler got %q after Shutdown stopped reading", p.Data)
				}
				got <- string(p.Data)
			}
			<-release
		})
		s, served, client := psServeRequest(t, c, h, WithEngine(e))
		tsRecv(t, got, "the handler")

		// Hold the reader's next recvmmsg before it runs. A datagram
		// wakes the reader if it waits in the poller; if its own call
		// took it instead, the handler has it (before Shutdown), and
		// the read after it is held.
		held, proceed, waits := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var once sync.Once
		defer poll.SetTestHook(func(p poll.HookPoint, _ *poll.FD) {
			switch p {
			case poll.HookBatchRecv:
				once.Do(func() {
					close(held)
					<-proceed
				})
			case poll.HookPacketShutdownWaits:
				close(waits)
			}
		})()
		if _, err := client.Write([]byte("wake")); err != nil {
			t.Fatal(err)
		}
		tsRecv(t, held, "the reader to reach recvmmsg")
		stopping.Store(true)
		shut := psShutdown(s)
		tsRecv(t, waits, "Shutdown to stop reading") // the readers' deadline is set
		if _, err := client.Write([]byte("late")); err != nil {
			t.Fatal(err)
		}
		close(proceed)
		close(release)
		psShutdownReturned(t, shut, served)
	})
}

// psServeRequest serves c with a PacketServer of h and opts, and sends
// it "request" from a client of its own, closed at the test's end; it
// returns the server, where Serve's result comes, and the client.
func psServeRequest(t *testing.T, c *PacketConn, h PacketHandler, opts ...Option) (*PacketServer, <-chan error, *net.UDPConn) {
	t.Helper()
	s, err := NewPacketServer(h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(c) }()
	client, err := net.DialUDP("udp4", nil, c.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if _, err := client.Write([]byte("request")); err != nil {
		t.Fatal(err)
	}
	return s, served, client
}

// psShutdown starts s.Shutdown, given tsTimeout, and returns where its
// result comes.
func psShutdown(s *PacketServer) <-chan error {
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), tsTimeout)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	return shut
}

// psShutdownReturned checks that Shutdown returned nil, every handler
// done, and Serve ErrServerClosed.
func psShutdownReturned(t *testing.T, shut, served <-chan error) {
	t.Helper()
	if err := tsRecv(t, shut, "Shutdown to return"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := tsRecv(t, served, "Serve to return"); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve: %v, want ErrServerClosed", err)
	}
}
