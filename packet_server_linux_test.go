package ringpoll

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// psServe serves conns with a PacketServer for h until the test ends,
// checking that Serve returns ErrServerClosed.
func psServe(t *testing.T, h PacketHandler, conns []*PacketConn, opts ...Option) *PacketServer {
	t.Helper()
	s, err := NewPacketServer(h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(conns...) }()
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := tsRecv(t, served, "Serve to return"); !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return s
}

var psEcho = PacketHandlerFunc(func(w *PacketWriter, in []Packet) {
	for _, p := range in {
		if err := w.WriteTo(p.Data, p.Addr); err != nil {
			panic(err)
		}
	}
})

func TestPacketServerEcho(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		for _, mode := range []string{"pooled", "inline", "gro", "inline-one-slot", "pooled-one-slot"} {
			t.Run(mode, func(t *testing.T) {
				opts, connOpts := []Option{WithEngine(e)}, []Option{}
				switch mode {
				case "inline":
					opts = append(opts, WithInlineHandler())
				case "inline-one-slot":
					// A batch of one datagram: every read and every flight
					// of replies holds one.
					opts = append(opts, WithInlineHandler(), WithPacketBatch(1, defaultPacketSize))
				case "pooled-one-slot":
					opts = append(opts, WithPacketBatch(1, defaultPacketSize))
				case "gro":
					connOpts = append(connOpts, WithGRO())
				}
				c := pcListen(t, e, network, addr, connOpts...)
				psServe(t, psEcho, []*PacketConn{c}, opts...)
				errs := make(chan error, 4)
				for i := range 4 {
					go func() { errs <- psPingPong(c.LocalAddr().String(), network, e, i, 100) }()
				}
				for range 4 {
					if err := tsRecv(t, errs, "the clients"); err != nil {
						t.Error(err)
					}
				}
				// A ring reader never waits in Go's poller, so the socket
				// stays out of its epoll set; recvmmsg's reader waits there.
				ring := c.Stats().Ring
				if e.ringsPackets() && !ring {
					t.Logf("%s: no packet ring here (the kernel refused it): read with recvmmsg", e)
				}
				if in := pcInPoller(t, c); in == ring {
					t.Errorf("socket in Go's epoll set: %v, read through a ring: %v", in, ring)
				}
			})
		}
	})
}

// TestPacketServerSmallSlots: with slots smaller than some datagrams and
// fewer buffers than datagrams waiting, every datagram reaches the
// handler once, whole or cut with its full size, on every engine (the
// uring engines read through a PacketRing that runs dry here and is
// armed again).
func TestPacketServerSmallSlots(t *testing.T) {
	forEachPacketSetup(t, func(t *testing.T, e Engine, network, addr string) {
		const total = 60
		c := pcListen(t, e, network, addr)
		c.SetReadBuffer(1 << 20)
		client, err := DialPacket(network, c.LocalAddr().String(), WithEngine(e))
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		// All wait in the socket before the server reads.
		for i := range total {
			msg := bytes.Repeat([]byte{byte(i)}, 10+90*(i%2))
			if _, err := client.Write(msg); err != nil {
				t.Fatal(err)
			}
		}
		type seen struct {
			size, n int
			cut     bool
			first   byte
		}
		got := make(chan seen, total)
		psServe(t, PacketHandlerFunc(func(w *PacketWriter, in []Packet) {
			for _, p := range in {
				got <- seen{p.Size, len(p.Data), p.Truncated, p.Data[0]}
			}
		}), []*PacketConn{c}, WithEngine(e), WithPacketBatch(2, 64))
		count := make([]int, total)
		for range total {
			s := tsRecv(t, got, "the datagrams")
			i := int(s.first)
			if i >= total {
				t.Fatalf("datagram starting with %d: never sent", i)
			}
			count[i]++
			want := seen{size: 10, n: 10, first: s.first}
			if i%2 == 1 {
				want = seen{size: 100, n: 64, cut: true, first: s.first}
			}
			if s != want {
				t.Errorf("datagram %d: %+v, want %+v", i, s, want)
			}
		}
		for i, n := range count {
			if n != 1 {
				t.Errorf("datagram %d reached the handler %d times, want once", i, n)
			}
		}
		if st := c.Stats(); st.Drops != 0 || st.Truncated != total/2 || st.Ring != e.ringsPackets() {
			t.Errorf("stats %v: want no drops, %d truncated, ring %v", st, total/2, e.ringsPackets())
		}
	})
}

// TestPacketServerReplyRuns: a handler's run of replies to one client
// goes out as GSO messages, inline (through the reader's ring on the
// uring engines) and pooled; where the kernel refuses to cut it
// (SO_NO_CHECK: EINVAL, which is not remembered), each run is sent again
// datagram by datagram at once, not when the next request comes.
func TestPacketServerReplyRuns(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, mode := range []string{"inline", "pooled", "inline-refused", "pooled-refused"} {
			t.Run(mode, func(t *testing.T) {
				const n, size = 40, 500
				srv := pcListen(t, e, "udp4", "127.0.0.1:0")
				refused := strings.HasSuffix(mode, "-refused")
				if refused {
					srv.control(func(fd int) {
						if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
							t.Fatal(err)
						}
					})
				}
				opts := []Option{WithEngine(e)}
				if strings.HasPrefix(mode, "inline") {
					opts = append(opts, WithInlineHandler())
				}
				psServe(t, PacketHandlerFunc(func(w *PacketWriter, in []Packet) {
					for _, p := range in {
						for _, r := range pcSeqPackets(n, size, p.Addr) {
							if err := w.WriteTo(r.Data, r.Addr); err != nil {
								panic(err)
							}
						}
					}
				}), []*PacketConn{srv}, opts...)
				client, err := DialPacket("udp4", srv.LocalAddr().String(), WithEngine(e))
				if err != nil {
					t.Fatal(err)
				}
				defer client.Close()
				pcBigReadBuffer(t, client)
				for range 2 {
					if _, err := client.Write([]byte("go")); err != nil {
						t.Fatal(err)
					}
					pcReadSeq(t, client, pcBatch(t, 64, 2048), n, size)
				}
				st := srv.Stats()
				switch {
				case refused && (st.GSOFallbacks < 2 || st.GSOSends != 0):
					t.Errorf("stats %v: want a GSO fallback per run (two requests, a run or more each) and no GSO send", st)
				case !refused && (st.GSOSends == 0 || st.GSOFallbacks != 0):
					t.Errorf("stats %v: want GSO sends and no fallback", st)
				}
				// The last flight may still be settling on the ring: its
				// count comes with the next flush.
				if st.SentPackets < n || st.SentPackets > 2*n {
					t.Errorf("stats %v: want %d to %d sent", st, n, 2*n)
				}
			})
		}
	})
}

// psPingPong sends n numbered datagrams to addr one at a time, each
// awaiting its exact echo.
func psPingPong(addr, network string, e Engine, id, n int) error {
	c, err := DialPacket(network, addr, WithEngine(e))
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 2048)
	for j := range n {
		msg := fmt.Sprintf("client %d ping %d %s", id, j, strings.Repeat("y", j))
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(tsTimeout))
		k, err := c.Read(buf)
		if err != nil {
			return fmt.Errorf("client %d, ping %d: %w", id, j, err)
		}
		if string(buf[:k]) != msg {
			return fmt.Errorf("client %d: echo %q, want %q", id, buf[:k], msg)
		}
	}
	return nil
}

// TestPacketServerServeNil: a nil PacketConn is refused with an error,
// not a panic on a reader goroutine.
func TestPacketServerServeNil(t *testing.T) {
	s, err := NewPacketServer(psEcho, WithEngine(EngineEpoll))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Serve(nil); err == nil || errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve(nil) = %v, want an error saying the PacketConn is nil", err)
	}
}

// TestPacketServerShutdownWaits: Shutdown waits for a running handler
// until its context ends, and returns nil once the handler is done.
func TestPacketServerShutdownWaits(t *testing.T) {
	c := pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0")
	entered, release := make(chan struct{}), make(chan struct{})
	h := PacketHandlerFunc(func(w *PacketWriter, in []Packet) {
		close(entered)
		<-release
	})
	s, err := NewPacketServer(h)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(c) }()
	client, err := DialPacket("udp4", c.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Write([]byte("hold on")); err != nil {
		t.Fatal(err)
	}
	tsRecv(t, entered, "the handler to start")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown with a handler running and an ended context: %v, want context.Canceled", err)
	}
	if err := tsRecv(t, served, "Serve to return"); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
	close(release)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after the handler returned: %v", err)
	}
	if err := s.Serve(pcListen(t, EngineEpoll, "udp4", "127.0.0.1:0")); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Shutdown: %v, want ErrServerClosed", err)
	}
}

// psCounter counts datagrams per socket of a group.
type psCounter struct {
	mu  sync.Mutex
	per map[*PacketConn]map[string]bool
	all chan struct{}
	n   int
}

func (pc *psCounter) ServePackets(w *PacketWriter, in []Packet) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, p := range in {
		pc.per[w.Conn()][string(p.Data)] = true
		if pc.n--; pc.n == 0 {
			close(pc.all)
		}
	}
}

func newPSCounter(conns []*PacketConn, n int) *psCounter {
	pc := &psCounter{per: map[*PacketConn]map[string]bool{}, all: make(chan struct{}), n: n}
	for _, c := range conns {
		pc.per[c] = map[string]bool{}
	}
	return pc
}

// TestPacketGroupSpreads: a WithReusePort group shares one port, and the
// kernel's hash spreads 64 peers over both sockets.
func TestPacketGroupSpreads(t *testing.T) {
	conns, err := ListenPacketGroup("udp4", "127.0.0.1:0", WithReusePort(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(conns) != 2 || conns[0].LocalAddr().String() != conns[1].LocalAddr().String() {
		t.Fatalf("group: %d sockets", len(conns))
	}
	const peers = 64
	counter := newPSCounter(conns, peers)
	psServe(t, counter, conns, WithInlineHandler())
	for i := range peers {
		c, err := DialPacket("udp4", conns[0].LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(fmt.Sprint("peer ", i))); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	tsRecv(t, counter.all, "every peer's datagram")
	a, b := len(counter.per[conns[0]]), len(counter.per[conns[1]])
	t.Logf("64 peers over 2 sockets by hash: %d and %d", a, b)
	if a == 0 || b == 0 {
		t.Errorf("one socket took every peer: %d and %d", a, b)
	}
}

// TestPacketGroupCPUSteering: with WithCPUSteering, datagrams sent from
// CPU k (whose softirq receives them on loopback) land on socket k mod n.
func TestPacketGroupCPUSteering(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	if rps, err := os.ReadFile("/sys/class/net/lo/queues/rx-0/rps_cpus"); err == nil && strings.Trim(string(rps), "0,\n") != "" {
		t.Skipf("RPS on lo (%s) moves receiving off the sending CPU", strings.TrimSpace(string(rps)))
	}
	conns, err := ListenPacketGroup("udp4", "127.0.0.1:0", WithReusePort(2), WithCPUSteering())
	if err != nil {
		t.Fatal(err)
	}
	const each = 20
	counter := newPSCounter(conns, 2*each)
	psServe(t, counter, conns, WithInlineHandler())
	for cpu := range 2 {
		if err := sendFromCPU(cpu, conns[0].LocalAddr().String(), each); err != nil {
			t.Fatal(err)
		}
	}
	tsRecv(t, counter.all, "every datagram")
	for i, c := range conns {
		for msg := range counter.per[c] {
			if !strings.HasPrefix(msg, fmt.Sprintf("cpu %d ", i)) {
				t.Errorf("socket %d got %q", i, msg)
			}
		}
	}
}

// sendFromCPU sends n datagrams from a thread pinned to cpu.
func sendFromCPU(cpu int, addr string, n int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, its mask changed, ends with the goroutine
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- err
			return
		}
		c, err := DialPacket("udp4", addr)
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		for i := range n {
			if _, err := c.Write([]byte(fmt.Sprintf("cpu %d datagram %d", cpu, i))); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	return <-errc
}

// TestPacketServerAddr: a PacketServer told to listen on port 0 says
// where it listens once it serves (Addr is nil before, and stays set
// after Shutdown), and a client sending there gets the reply; with
// WithCPUSteering alone ListenAndServe opens a group of GOMAXPROCS
// sockets on that address, as ListenPacketGroup does.
func TestPacketServerAddr(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, mode := range []string{"one", "steering"} {
			t.Run(mode, func(t *testing.T) {
				opts, sockets := []Option{WithEngine(e)}, 1
				if mode == "steering" {
					opts, sockets = append(opts, WithCPUSteering()), runtime.GOMAXPROCS(0)
				}
				s, err := NewPacketServer(psEcho, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if a := s.Addr(); a != nil {
					t.Fatalf("Addr before ListenAndServe = %v, want nil", a)
				}
				serving := make(chan struct{}, 1)
				defer poll.SetTestHook(func(p poll.HookPoint, _ *poll.FD) {
					if p == poll.HookPacketServing {
						select {
						case serving <- struct{}{}:
						default:
						}
					}
				})()
				served := make(chan error, 1)
				go func() { served <- s.ListenAndServe("udp4", "127.0.0.1:0") }()
				tsRecv(t, serving, "ListenAndServe to serve")
				a, ok := s.Addr().(*net.UDPAddr)
				if !ok || a.Port == 0 || !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
					t.Fatalf("Addr while serving = %v, want 127.0.0.1 and the port it got", s.Addr())
				}
				s.mu.Lock()
				n := len(s.conns)
				s.mu.Unlock()
				if n != sockets {
					t.Errorf("ListenAndServe serves %d sockets, want %d", n, sockets)
				}
				client, err := net.DialUDP("udp4", nil, a)
				if err != nil {
					t.Fatal(err)
				}
				defer client.Close()
				if err := tsEchoOnce(client, "where are you?"); err != nil {
					t.Fatal(err)
				}
				if err := s.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := tsRecv(t, served, "ListenAndServe to return"); !errors.Is(err, ErrServerClosed) {
					t.Errorf("ListenAndServe returned %v, want ErrServerClosed", err)
				}
				if s.Addr() != a {
					t.Errorf("Addr after Shutdown = %v, want %v", s.Addr(), a)
				}
			})
		}
	})
}
