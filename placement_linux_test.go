package ringpoll

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPUs returns the CPUs the calling thread may run on.
func threadCPUs(t testing.TB) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Error(err)
		return nil
	}
	var cpus []int
	for i := range 1024 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}

// TestLoopCPUsPinsUringLoop: with WithLoopCPUs, an io_uring loop runs on
// a thread pinned to the CPU given, where an inline handler sees it.
func TestLoopCPUsPinsUringLoop(t *testing.T) {
	needUring(t)
	cpu := runtime.NumCPU() - 1
	for _, e := range []Engine{EngineUring, EngineUringHybrid, EngineUringReactor} {
		t.Run(e.String(), func(t *testing.T) {
			ln := listen(t, e, "tcp", WithLoops(1), WithLoopCPUs(cpu))
			seen := make(chan []int, 1)
			srv, err := NewServer(func(ctx context.Context, c *Conn) error {
				select {
				case seen <- threadCPUs(t):
				default:
				}
				r := c.Reader()
				b, err := r.Next(r.Len())
				if err != nil {
					return err
				}
				c.Writer().WriteBinary(b)
				return c.Writer().Flush()
			}, WithInlineHandler(), WithEngine(e), WithLoops(1), WithLoopCPUs(cpu))
			if err != nil {
				t.Fatal(err)
			}
			go srv.Serve(ln)
			defer srv.Shutdown(context.Background())
			c := tsDialStd(t, "tcp", ln.Addr().String())
			if err := tsEchoOnce(c, "where do you run?"); err != nil {
				t.Fatal(err)
			}
			if got := tsRecv(t, seen, "the handler"); len(got) != 1 || got[0] != cpu {
				t.Errorf("the loop's thread may run on CPUs %v, want only %d", got, cpu)
			}
		})
	}
}

// TestLoopCPUsPinsPacketReaders: a PacketServer's reader of socket i runs
// on CPU i of WithLoopCPUs.
func TestLoopCPUsPinsPacketReaders(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	conns, err := ListenPacketGroup("udp4", "127.0.0.1:0", WithReusePort(2))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[*PacketConn][]int{}
	h := PacketHandlerFunc(func(w *PacketWriter, in []Packet) {
		cpus := threadCPUs(t)
		mu.Lock()
		seen[w.Conn()] = cpus
		mu.Unlock()
		for _, p := range in {
			w.WriteTo(p.Data, p.Addr)
		}
	})
	psServe(t, h, conns, WithInlineHandler(), WithLoopCPUs(1, 0))
	// Datagrams from many source ports, until both sockets have had some.
	for i := 0; ; i++ {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == 2 {
			break
		}
		if i == 1000 {
			t.Fatalf("after %d peers, only %d socket(s) got datagrams", i, n)
		}
		if err := psPingPong(conns[0].LocalAddr().String(), "udp4", EngineEpoll, i, 1); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		if want := 1 - i; fmt.Sprint(seen[c]) != fmt.Sprint([]int{want}) {
			t.Errorf("socket %d's reader may run on CPUs %v, want only %d", i, seen[c], want)
		}
		// A pinned reader keeps its thread, so its RECVMSG never moves.
		if st := c.Stats(); st.RingMoves != 0 {
			t.Errorf("socket %d: a pinned reader's RECVMSG moved threads %d times (%v)", i, st.RingMoves, st)
		}
	}
}

func TestLoopCPUsInvalid(t *testing.T) {
	for _, cpus := range [][]int{nil, {-1}, {1 << 20}} {
		if _, err := Listen("tcp", "127.0.0.1:0", WithLoopCPUs(cpus...)); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("WithLoopCPUs(%v): %v, want ErrInvalidOption", cpus, err)
		}
	}
}

// TestLoopCPUsPinsSQThread: a uring-sqpoll loop's kernel SQ thread goes to
// its loop's CPU: the kernel creates it with the mask of the thread that
// sets the ring up, which the loop pinned first.
func TestLoopCPUsPinsSQThread(t *testing.T) {
	needUring(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to tell pinned from not")
	}
	cpu := runtime.NumCPU() - 1
	ln := listen(t, EngineUringSQPoll, "tcp", WithLoops(1), WithLoopCPUs(cpu))
	c := tsDialStd(t, "tcp", ln.Addr().String())
	tsServeEcho(t, ln, "handler")
	if err := tsEchoOnce(c, "wake the SQ thread"); err != nil {
		t.Fatal(err)
	}
	var lists []string
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, e := range tasks {
		comm, err := os.ReadFile("/proc/self/task/" + e.Name() + "/comm")
		if err != nil || !strings.HasPrefix(string(comm), "iou-sqp") {
			continue
		}
		status, err := os.ReadFile("/proc/self/task/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(status)) {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				lists = append(lists, strings.TrimSpace(v))
			}
		}
	}
	if !slices.Contains(lists, fmt.Sprint(cpu)) {
		t.Errorf("SQ threads may run on %q; none on CPU %d alone", lists, cpu)
	}
}
