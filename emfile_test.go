//go:build linux

package ringpoll

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAcceptStormEMFILE: with every descriptor RLIMIT_NOFILE allows in
// use, a storm of clients connects. The Server's accepts fail with EMFILE;
// it must keep serving the connections it has, and accept and serve the
// whole storm once descriptors are free again (that the accepts back off
// rather than spin is TestUringAcceptEMFILE's part). The limit is lowered
// before the Server starts, the storm's sockets are made before the table
// is filled (connect needs no new descriptor), and the table is filled
// with /dev/null until open fails; closing those frees the descriptors.
func TestAcceptStormEMFILE(t *testing.T) {
	// An engine of an earlier subtest lingering would close its
	// descriptors in the middle of the storm, letting clients in: stop
	// engines as soon as they are unused, before any baseline is taken.
	defer engineLinger.Store(engineLinger.Swap(0))
	forEachEngine(t, func(t *testing.T, e Engine) {
		const existing, storm = 4, 64
		var old syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Fatal(err)
		}
		restore := func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) }
		defer restore()
		low := old
		low.Cur = uint64(countFDs() + 2*existing + storm + 64)
		if low.Cur > old.Cur {
			t.Skipf("RLIMIT_NOFILE %d is too low to start with", old.Cur)
		}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Skipf("lowering RLIMIT_NOFILE: %v", err)
		}
		var emfileLogged atomic.Int64
		srv, ln, _ := tsStartServer(t, e, tsEchoHandler, WithEngine(e),
			WithLogger(slog.New(emfileLog{&emfileLogged})))
		addr := ln.Addr().(*net.TCPAddr)
		var served []net.Conn
		for range existing {
			c := tsDialStd(t, "tcp", ln.Addr().String())
			if err := tsEchoOnce(c, "hello"); err != nil {
				t.Fatal(err)
			}
			served = append(served, c)
		}
		socks := make([]int, storm)
		for i := range socks {
			fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			socks[i] = fd
			tv := syscall.NsecToTimeval(int64(2 * tsTimeout))
			syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
			syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv)
		}
		defer func() {
			for _, fd := range socks {
				syscall.Close(fd)
			}
		}()

		// No descriptor left to accept into.
		var fillers []int
		freeFillers := func() {
			for _, fd := range fillers {
				syscall.Close(fd)
			}
			fillers = nil
		}
		defer freeFillers()
		for {
			fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err == syscall.EMFILE {
				break
			}
			if err != nil {
				freeFillers()
				t.Fatalf("filling the descriptor table: %v", err)
			}
			fillers = append(fillers, fd)
		}
		sa := &syscall.SockaddrInet4{Port: addr.Port}
		copy(sa.Addr[:], addr.IP.To4())
		for i, fd := range socks {
			if err := connectIgnoringEINTR(fd, sa); err != nil {
				freeFillers()
				t.Fatalf("storm client %d: connect: %v", i, err)
			}
		}
		// The storm waits in the backlog (each connect returned once its
		// connection was in the accept queue); the Server keeps trying to
		// accept it and failing. Wait for evidence of that, then check
		// that the existing connections are served meanwhile.
		tsAcceptsFail(t, &emfileLogged)
		for i, c := range served {
			if err := tsEchoOnce(c, fmt.Sprintf("still here %d", i)); err != nil {
				t.Errorf("existing connection %d while accepts fail with EMFILE: %v", i, err)
			}
		}
		// Descriptors other code frees meanwhile (an engine of an earlier
		// test closing) may let a few in, not the storm.
		during := len(srvConns(srv)) - existing
		if during >= storm/2 {
			t.Errorf("the Server accepted %d of the %d storm clients with no descriptor free", during, storm)
		}

		// Descriptors come back: the whole storm is accepted and served.
		t.Logf("%d descriptors filled; %d storm clients got in meanwhile; freeing them", len(fillers), during)
		freeFillers()
		restore()
		for i, fd := range socks {
			msg := "storm " + strconv.Itoa(i)
			if _, err := ignoringEINTR(func() (int, error) { return syscall.Write(fd, []byte(msg)) }); err != nil {
				t.Fatalf("storm client %d: write: %v", i, err)
			}
			got := make([]byte, 0, len(msg))
			buf := make([]byte, len(msg))
			for len(got) < len(msg) {
				n, err := ignoringEINTR(func() (int, error) { return syscall.Read(fd, buf[:len(msg)-len(got)]) })
				if err != nil || n == 0 {
					t.Fatalf("storm client %d: read after the limit was lifted: %d, %v", i, n, err)
				}
				got = append(got, buf[:n]...)
			}
			if string(got) != msg {
				t.Fatalf("storm client %d: echo %q, want %q", i, got, msg)
			}
		}
		if n := len(srvConns(srv)); n != existing+storm {
			t.Errorf("the Server has %d connections, want %d", n, existing+storm)
		}
	})
}

// tsAcceptsFail waits until the Server's accepts were seen to fail (with
// no descriptor free) and to be tried again: Serve calls accept4 and logs
// each EMFILE before it backs off, so wait for two such logs.
func tsAcceptsFail(t *testing.T, logged *atomic.Int64) {
	t.Helper()
	tsEventually(t, "Serve to log two accepts failing with EMFILE", func() bool { return logged.Load() >= 2 })
}

// emfileLog is a slog.Handler that counts the records carrying an error
// that wraps EMFILE.
type emfileLog struct{ n *atomic.Int64 }

func (h emfileLog) Enabled(context.Context, slog.Level) bool { return true }

func (h emfileLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, syscall.EMFILE) {
			h.n.Add(1)
			return false
		}
		return true
	})
	return nil
}

func (h emfileLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h emfileLog) WithGroup(string) slog.Handler      { return h }

// ignoringEINTR retries a raw socket syscall that a signal interrupted. The
// storm clients' sockets have SO_RCVTIMEO and SO_SNDTIMEO, and a blocked call
// on such a socket is not restarted after a handler (socket(7)), so the Go
// runtime's preemption signal can make it fail with EINTR, as can io_uring
// task work for a loop that ran on the same thread (docs/ARCHITECTURE.md).
func ignoringEINTR(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// connectIgnoringEINTR is a blocking connect(2) that a signal or task work
// may interrupt (EINTR: the socket has a send timeout, so the call is not
// restarted; the connection goes on in the background): it waits until the
// connection is made or fails.
func connectIgnoringEINTR(fd int, sa syscall.Sockaddr) error {
	err := syscall.Connect(fd, sa)
	for err == syscall.EINTR || err == syscall.EALREADY {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if _, perr := ignoringEINTR(func() (int, error) { return unix.Poll(pfd, int(tsTimeout/time.Millisecond)) }); perr != nil {
			return perr
		}
		err = syscall.Connect(fd, sa)
	}
	if err == syscall.EISCONN {
		return nil
	}
	return err
}

// srvConns lists the Server's open connections.
func srvConns(s *Server) []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns.appendTo(nil)
}
