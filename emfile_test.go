//go:build linux

package ringpoll

import (
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestAcceptStormEMFILE: with every descriptor RLIMIT_NOFILE allows in
// use, a storm of clients connects. The Server's accepts fail with EMFILE;
// it must keep serving the connections it has, and accept and serve the
// whole storm once descriptors are free again (that the io_uring accept
// backs off rather than spin is TestUringAcceptEMFILE's part). The limit is lowered before the Server starts (io_uring reads it
// when an accept is armed), the storm's sockets are made before the table
// is filled (connect needs no new descriptor), and the table is filled
// with /dev/null until open fails; closing those frees the descriptors.
func TestAcceptStormEMFILE(t *testing.T) {
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
		srv, ln, _ := tsStartServer(t, e, tsEchoHandler, WithEngine(e))
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
			if err := syscall.Connect(fd, sa); err != nil {
				freeFillers()
				t.Fatalf("storm client %d: connect: %v", i, err)
			}
		}
		// The storm waits in the backlog; the Server keeps failing to
		// accept it. (There is no descriptor left to watch the backlog
		// through /proc, so the test gives the accepts 200 ms to fail
		// rather than wait for an event.) Meanwhile the existing
		// connections are served.
		time.Sleep(200 * time.Millisecond)
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

// ignoringEINTR retries a raw socket syscall that a signal interrupted. The
// storm clients' sockets have SO_RCVTIMEO and SO_SNDTIMEO, and a blocked call
// on such a socket is not restarted after a handler (socket(7)), so the Go
// runtime's preemption signal can make it fail with EINTR.
func ignoringEINTR(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// srvConns lists the Server's open connections.
func srvConns(s *Server) []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cs []*Conn
	for c := range s.conns {
		cs = append(cs, c)
	}
	return cs
}
