//go:build linux

package hertz

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/cloudwego/hertz/pkg/app/server"
	"github.com/cloudwego/hertz/pkg/common/config"
	"github.com/cloudwego/hertz/pkg/common/hlog"
	"github.com/cloudwego/hertz/pkg/network"
	"github.com/ringpoll/ringpoll"
)

// bound is how long a test waits for something that should happen at
// once: a failure bound, never a synchronisation.
const bound = 20 * time.Second

// engineNames are the engines every server test runs on.
var engineNames = []string{"epoll", "uring", "uring-hybrid", "uring-reactor", "uring-sqpoll"}

func TestMain(m *testing.M) {
	// Hertz logs every request it cannot parse at error level, and some
	// tests send such requests on purpose.
	hlog.SetLevel(hlog.LevelFatal)
	os.Exit(m.Run())
}

// forEachEngine runs f as a subtest per engine, with the ringpoll options
// that select it. The io_uring engines are skipped, saying why, where
// io_uring cannot run.
func forEachEngine(t *testing.T, f func(t *testing.T, opts []ringpoll.Option)) {
	t.Helper()
	forEachEngineOf(t, func(t *testing.T, _ ringpoll.Engine, opts []ringpoll.Option) { f(t, opts) })
}

// forEachEngineOf is forEachEngine, telling f the engine too.
func forEachEngineOf(t *testing.T, f func(t *testing.T, e ringpoll.Engine, opts []ringpoll.Option)) {
	t.Helper()
	for _, name := range engineNames {
		t.Run(name, func(t *testing.T) {
			e, err := ringpoll.ParseEngine(name)
			if err != nil {
				t.Fatal(err)
			}
			if e != ringpoll.EngineEpoll {
				if err := ringpoll.UringStatus(); err != nil {
					t.Skipf("io_uring unavailable: %v", err)
				}
			}
			// One loop: the tests' connections share it, as a busy
			// server's do.
			f(t, e, []ringpoll.Option{ringpoll.WithEngine(e), ringpoll.WithLoops(1)})
		})
	}
}

// testServer is a running Hertz server on the ringpoll transport.
type testServer struct {
	h    *server.Hertz
	tr   *Transporter
	addr string        // where it listens
	done chan error    // Run's result
	down chan struct{} // closed once shut down
}

// startServer starts a Hertz server on a free loopback port with the
// transport and ringpoll options opts, lets routes register its handlers,
// and shuts it down at the end of the test.
func startServer(t *testing.T, opts []ringpoll.Option, routes func(h *server.Hertz), hopts ...config.Option) *testServer {
	t.Helper()
	return startServerOn(t, "tcp", "127.0.0.1:0", opts, routes, hopts...)
}

func startServerOn(t *testing.T, netw, addr string, opts []ringpoll.Option, routes func(h *server.Hertz), hopts ...config.Option) *testServer {
	t.Helper()
	s := &testServer{done: make(chan error, 1), down: make(chan struct{})}
	listening := make(chan net.Addr, 1)
	hopts = append([]config.Option{
		server.WithNetwork(netw),
		server.WithHostPorts(addr),
		server.WithDisablePrintRoute(true),
		server.WithExitWaitTime(bound),
		server.WithTransport(func(o *config.Options) network.Transporter {
			s.tr = newTransporter(o, opts)
			s.tr.onListen = func(a net.Addr) { listening <- a }
			return s.tr
		}),
	}, hopts...)
	s.h = server.New(hopts...)
	if routes != nil {
		routes(s.h)
	}
	go func() { s.done <- s.h.Run() }()
	select {
	case a := <-listening:
		s.addr = a.String()
	case err := <-s.done:
		t.Fatalf("the server did not start: %v", err)
	case <-time.After(bound):
		t.Fatal("the server did not start listening")
	}
	t.Cleanup(func() { s.shutdown(t) })
	return s
}

// shutdown shuts the server down, once, and checks that Run returned nil.
func (s *testServer) shutdown(t *testing.T) {
	t.Helper()
	select {
	case <-s.down:
		return
	default:
	}
	defer close(s.down)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := s.h.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("Run returned %v after Shutdown; want nil", err)
		}
	case <-time.After(bound):
		t.Error("Run did not return after Shutdown")
	}
}

// url returns the server's URL for path.
func (s *testServer) url(path string) string { return "http://" + s.addr + path }

// rawConn opens a plain TCP connection to the server, with a failure
// bound on its reads and writes, closed at the end of the test.
func (s *testServer) rawConn(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(bound))
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// httpClient returns a net/http client of its own, its idle connections
// closed at the end of the test.
func httpClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 100}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: bound}
}
