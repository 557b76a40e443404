//go:build linux

package ringpoll

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnackedBytesAfterReset: a connection the peer reset while replies
// were in flight reports nothing unacknowledged, although SIOCOUTQ still
// counts those bytes. Shutdown lingers while bytes are unacknowledged, so
// a count that never drains would keep it waiting for a peer that is gone.
func TestUnackedBytesAfterReset(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	raw, err := srv.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := func(f func(int)) {
		if err := raw.Control(func(s uintptr) { f(int(s)) }); err != nil {
			t.Fatal(err)
		}
	}

	// Fill the client's receive window and the server's send queue: the
	// client never reads, so bytes stay unacknowledged.
	chunk := make([]byte, 64<<10)
	fd(func(s int) {
		for range 1 << 12 { // the socket is non-blocking: EAGAIN once full
			if _, err := unix.Write(s, chunk); err == unix.EAGAIN {
				return
			} else if err != nil && err != unix.EINTR {
				t.Fatal(err)
			}
		}
		t.Fatal("256 MiB went into a connection whose peer never reads")
	})
	var live int
	fd(func(s int) { live = unackedBytes(s) })
	if live == 0 {
		t.Fatal("unackedBytes is 0 with the peer's window full; want the queued bytes")
	}

	// The client resets the connection (linger 0), with the bytes still
	// unacknowledged.
	if err := client.(*net.TCPConn).SetLinger(0); err != nil {
		t.Fatal(err)
	}
	client.Close()
	state := func() uint8 {
		var st uint8
		fd(func(s int) {
			ti, err := unix.GetsockoptTCPInfo(s, unix.IPPROTO_TCP, unix.TCP_INFO)
			if err != nil {
				t.Fatal(err)
			}
			st = ti.State
		})
		return st
	}
	// Wait for the reset to arrive (it travels through loopback's
	// softirq): the socket then reports an error and a hang-up.
	fd(func(s int) {
		pfd := []unix.PollFd{{Fd: int32(s), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(pfd, 10_000)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		if pfd[0].Revents&unix.POLLHUP == 0 {
			t.Fatalf("no hang-up 10 s after the reset (revents %#x)", pfd[0].Revents)
		}
	})
	if st := state(); st != tcpClose {
		t.Fatalf("server socket in TCP state %d after the reset, want CLOSE (%d)", st, tcpClose)
	}
	var outq, got int
	fd(func(s int) {
		outq, err = unix.IoctlGetInt(s, unix.SIOCOUTQ)
		got = unackedBytes(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	if outq == 0 {
		t.Fatal("SIOCOUTQ is 0 after the reset: the case this test guards did not arise")
	}
	if got != 0 {
		t.Errorf("unackedBytes = %d after the peer reset (SIOCOUTQ %d), want 0", got, outq)
	}
}

// TestAcceptSocketNoAlloc: accepting a TCP connection reports the peer
// std net reports and allocates nothing.
func TestAcceptSocketNoAlloc(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 11 // AllocsPerRun's warm-up call and 10 runs
	peers := map[netip.AddrPort]bool{}
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		peers[c.LocalAddr().(*net.TCPAddr).AddrPort()] = true
	}
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got []remote
	var allocs float64
	raw.Control(func(lfd uintptr) {
		got = make([]remote, 0, n)
		allocs = testing.AllocsPerRun(n-1, func() {
			fd, peer, err := acceptSocket(int(lfd), "tcp")
			if err != nil {
				return // counted below: too few accepted
			}
			unix.Close(fd)
			got = append(got, peer)
		})
	})
	if len(got) != n {
		t.Fatalf("accepted %d of %d queued connections", len(got), n)
	}
	for _, r := range got {
		if !peers[r.ap] || r.addr != nil {
			t.Errorf("accepted a peer %v (%v), not one of the clients", r.ap, r.addr)
		}
	}
	if allocs != 0 {
		t.Errorf("acceptSocket allocates %v times, want 0", allocs)
	}
}
