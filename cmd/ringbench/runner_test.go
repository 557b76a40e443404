//go:build linux

package main

import (
	"net"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestServerArgv: each ringpoll server name becomes the ringecho command
// line it stands for.
func TestServerArgv(t *testing.T) {
	r := &runner{bins: bins{ringecho: "/b/ringecho", ringload: "/b/ringload", peerecho: "/b/peerecho", cEcho: "/b/uring_echo"}}
	tail := []string{"-proto", "echo", "-stats-file", "/s.json"}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"uring", append([]string{"/b/ringecho", "-addr", "A", "-engine", "uring", "-api", "handler"}, tail...)},
		{"uring-inline", append([]string{"/b/ringecho", "-addr", "A", "-engine", "uring", "-api", "inline"}, tail...)},
		{"epoll-inline", append([]string{"/b/ringecho", "-addr", "A", "-engine", "epoll", "-api", "inline"}, tail...)},
		{"uring-busypoll", append(append([]string{"/b/ringecho", "-addr", "A", "-engine", "uring", "-api", "handler"}, tail...), "-busy-poll", "50us")},
		{"uring-1loop", append(append([]string{"/b/ringecho", "-addr", "A", "-engine", "uring", "-api", "handler"}, tail...), "-loops", "1")},
		{"std", []string{"/b/ringload", "-serve-std", "-addr", "A", "-proto", "echo"}},
	} {
		srv, ok := lookupServer(tc.name)
		if !ok {
			t.Fatalf("no server %q", tc.name)
		}
		if got := r.serverArgv(srv, "echo", "A", "/s.json"); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	// The twin runs the very command the default server runs.
	def, _ := lookupServer("uring")
	twin, ok := lookupServer("uring-twin")
	if !ok {
		t.Fatal("no server uring-twin")
	}
	if got, want := r.serverArgv(twin, "echo", "A", "/s.json"), r.serverArgv(def, "echo", "A", "/s.json"); !slices.Equal(got, want) {
		t.Errorf("uring-twin:\n got %q\nwant %q (uring's)", got, want)
	}
	// The C server takes the port alone.
	srv, _ := lookupServer("c-liburing")
	if got, want := r.serverArgv(srv, "echo", "127.0.0.1:7001", "/s.json"), []string{"/b/uring_echo", "7001"}; !slices.Equal(got, want) {
		t.Errorf("c-liburing:\n got %q\nwant %q", got, want)
	}
}

// TestListensOn: startServer trusts a dial only once the server's own
// process holds the listening socket, so that a port another program
// bound after freePort looked is not taken for the server's.
func TestListensOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if !listensOn(os.Getpid(), addr) {
		t.Fatalf("this process listens on %s, and listensOn says it does not", addr)
	}
	// PID 1 is not this test: another process's port is not ours.
	if listensOn(1, addr) {
		t.Fatalf("listensOn says PID 1 listens on this test's %s", addr)
	}
	ln.Close()
	if listensOn(os.Getpid(), addr) {
		t.Fatalf("listensOn still sees %s after the listener closed", addr)
	}
}

// TestBindsUDP: as TestListensOn, for a bound UDP socket.
func TestBindsUDP(t *testing.T) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	if !bindsUDP(os.Getpid(), addr) {
		t.Fatalf("this process is bound to %s, and bindsUDP says it is not", addr)
	}
	if bindsUDP(1, addr) || listensOn(os.Getpid(), addr) {
		t.Fatalf("bindsUDP says PID 1 is bound to %s, or listensOn takes it for TCP", addr)
	}
	c.Close()
	if bindsUDP(os.Getpid(), addr) {
		t.Fatalf("bindsUDP still sees %s after the socket closed", addr)
	}
}

// TestCoresPlacement: -cores K puts the server on the first K CPUs the
// process may use and the load on the rest, which keeps at least one.
func TestCoresPlacement(t *testing.T) {
	cpus := cpuSet{0, 2, 3, 5}
	srv, ld, err := coresPlacement(2, cpus)
	if err != nil || srv.String() != "0,2" || ld.String() != "3,5" {
		t.Errorf("coresPlacement(2, %s) = %s, %s, %v", cpus, srv, ld, err)
	}
	if srv, ld, err := coresPlacement(1, cpuSet{0, 1}); err != nil || srv.String() != "0" || ld.String() != "1" {
		t.Errorf("coresPlacement(1, 0,1) = %s, %s, %v", srv, ld, err)
	}
	for _, k := range []int{0, -1, 4, 5} {
		if _, _, err := coresPlacement(k, cpus); err == nil || !strings.Contains(err.Error(), "want 1 to 3") {
			t.Errorf("coresPlacement(%d, %s): %v", k, cpus, err)
		}
	}
	if _, _, err := coresPlacement(1, cpuSet{0}); err == nil {
		t.Error("coresPlacement on one CPU succeeded")
	}
}
