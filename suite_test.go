//go:build linux

package ringpoll

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testEngines is every engine the suite runs against. Each engine issue adds
// its rows here; every test that exercises connections goes through
// forEachEngine, so a new engine passes exactly the same tests.
var testEngines = []Engine{EngineEpoll, EngineUring, EngineUringHybrid, EngineUringReactor, EngineUringSQPoll}

// forEachEngine runs f as a subtest per engine. The io_uring engines are
// skipped, with the reason, where io_uring cannot run (UringStatus).
func forEachEngine(t *testing.T, f func(t *testing.T, e Engine)) {
	t.Helper()
	for _, e := range testEngines {
		t.Run(e.String(), func(t *testing.T) {
			if e != EngineEpoll {
				needUring(t)
			}
			f(t, e)
		})
	}
}

// needUring skips the test when the io_uring engines cannot run here.
func needUring(t testing.TB) {
	t.Helper()
	if err := UringStatus(); err != nil {
		t.Skipf("io_uring unavailable: %v", err)
	}
}

// listen opens a loopback listener for engine e on a free port, closed at
// the end of the test.
func listen(t testing.TB, e Engine, network string, opts ...Option) *Listener {
	t.Helper()
	addr := "127.0.0.1:0"
	switch network {
	case "tcp6":
		addr = "[::1]:0"
	case "unix":
		addr = fmt.Sprintf("%s/rp%d.sock", t.TempDir(), time.Now().UnixNano()%1e6)
	}
	ln, err := Listen(network, addr, append([]Option{WithEngine(e)}, opts...)...)
	if err != nil {
		t.Fatalf("Listen(%s, %s, %v): %v", network, addr, e, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestMain checks, after the whole suite, that goroutines and descriptors
// are back to what the process had before it: no loop, handler or timer
// goroutine and no socket outlives its test.
func TestMain(m *testing.M) {
	// Go's own poller opens its epoll and eventfd on first use and keeps
	// them: start it before taking the baseline.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	// So does os/signal its loop goroutine on the first Notify (the fuzzing
	// engine calls it): start that too.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2)
	signal.Stop(sig)
	g0, fd0 := runtime.NumGoroutine(), countFDs()
	code := m.Run()
	closeIdlePipes() // ReadFrom's splice pipes, kept for the next splice
	if code == 0 {
		if err := waitBaseline(g0, fd0, 10*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "leak check:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitBaseline waits until goroutines and fds are at most their baseline,
// polling because closes complete on loop goroutines asynchronously.
func waitBaseline(g0, fd0 int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		g, fd := runtime.NumGoroutine(), countFDs()
		if g <= g0 && fd <= fd0 {
			return nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return fmt.Errorf("goroutines %d (baseline %d), fds %d (baseline %d)\n%s", g, g0, fd, fd0, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

func TestParseEngine(t *testing.T) {
	for _, name := range []string{"auto", "epoll", "uring", "uring-hybrid", "uring-reactor", "uring-sqpoll"} {
		e, err := ParseEngine(name)
		if err != nil {
			t.Fatalf("ParseEngine(%q): %v", name, err)
		}
		if e.String() != name {
			t.Errorf("ParseEngine(%q).String() = %q", name, e.String())
		}
	}
	for _, bad := range []string{"", "EPOLL", "io_uring", "uring-", "kqueue"} {
		_, err := ParseEngine(bad)
		if err == nil {
			t.Fatalf("ParseEngine(%q) succeeded", bad)
		}
		if !strings.Contains(err.Error(), "uring-sqpoll") || !strings.Contains(err.Error(), "epoll") {
			t.Errorf("ParseEngine(%q) error does not list the valid names: %v", bad, err)
		}
	}
}
