package ringpoll

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestPacketConnCloseStopsServer: Close of a PacketConn a PacketServer
// reads stops everything reading it, whatever the reader is doing
// (waiting for datagrams, or for a batch back from handlers that hold
// all of them), and whichever descriptors the socket has (its own, the
// poller's once it joined): when Close returns (with an inline handler, which may be
// running on the reader and may be Close's caller, when Serve does), no
// descriptor is left on the socket, its port can be bound again,
// datagrams to it go to the new socket, and Serve returns.
func TestPacketConnCloseStopsServer(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, mode := range []string{"pooled", "inline", "inline-closes", "pooled-closes", "pooled-all-out", "joined-before", "joins-while-served"} {
			t.Run(mode, func(t *testing.T) {
				pcCloseStopsServer(t, e, mode)
			})
		}
	})
}

func pcCloseStopsServer(t *testing.T, e Engine, mode string) {
	c := pcListen(t, e, "udp4", "127.0.0.1:0")
	laddr := c.LocalAddr().(*net.UDPAddr)
	ino := pcInode(t, c)
	got := make(chan string, 16)
	closed := make(chan error, 1)
	entered, release := make(chan struct{}, psDepth), make(chan struct{})
	h := PacketHandlerFunc(func(w *PacketWriter, in []Packet) {
		for _, p := range in {
			got <- string(p.Data)
			switch {
			case string(p.Data) == "close":
				closed <- w.Conn().Close()
			case mode == "pooled-all-out":
				entered <- struct{}{}
				<-release
			}
		}
	})
	opts := []Option{WithEngine(e)}
	if mode == "inline" || mode == "inline-closes" {
		opts = append(opts, WithInlineHandler())
	}
	s, err := NewPacketServer(h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	defer close(release) // first: Shutdown waits for the handlers
	// A socket that joined Go's poller (a deadline set) before it was
	// served, or while it is: a ring then reads a descriptor beside the
	// poller's, which Close closes too.
	join := func() {
		if err := c.SetReadDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if mode == "joined-before" {
		join()
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(c) }()
	client, err := net.DialUDP("udp4", nil, laddr)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	send := func(msg string) {
		t.Helper()
		if _, err := client.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	// The reader reads: a datagram reaches the handler.
	rounds := 1
	if mode == "pooled-all-out" {
		rounds = psDepth // every batch held by a handler
	}
	for i := range rounds {
		send(fmt.Sprint("before ", i))
		if m := tsRecv(t, got, "the handler"); m != fmt.Sprint("before ", i) {
			t.Fatalf("handler got %q", m)
		}
		if mode == "pooled-all-out" {
			tsRecv(t, entered, "the handler to hold its batch")
		}
	}
	if ring := c.Stats().Ring; ring != e.ringsPackets() {
		t.Logf("read through a ring: %v (the kernel refused it?)", ring)
	}
	if mode == "joins-while-served" {
		join()
	}
	switch mode {
	case "inline-closes", "pooled-closes":
		send("close")
		tsRecv(t, got, "the handler")
		if err := tsRecv(t, closed, "the handler's Close"); err != nil {
			t.Fatalf("Close in the handler: %v", err)
		}
	default:
		go func() { closed <- c.Close() }()
		if err := tsRecv(t, closed, "Close"); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	inline := strings.HasPrefix(mode, "inline")
	if inline {
		// A reader running its inline handler (which may have called
		// Close, or may not have returned yet) lets go when the handler
		// returns, before Serve does; Close does not wait for handlers.
		if err := tsRecv(t, served, "Serve to return"); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve after its PacketConn was closed: %v, want net.ErrClosed", err)
		}
	}
	pcNoDescriptors(t, ino)
	nc, err := net.ListenUDP("udp4", laddr)
	if err != nil {
		t.Fatalf("binding the closed PacketConn's port again: %v", err)
	}
	defer nc.Close()
	send("after")
	nc.SetReadDeadline(time.Now().Add(tsTimeout))
	buf := make([]byte, 16)
	if n, err := nc.Read(buf); err != nil || string(buf[:n]) != "after" {
		t.Fatalf("the new socket read %q, %v", buf[:n], err)
	}
	select {
	case m := <-got:
		t.Errorf("the closed PacketConn's handler got %q", m)
	default:
	}
	if !inline {
		if err := tsRecv(t, served, "Serve to return"); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve after its PacketConn was closed: %v, want net.ErrClosed", err)
		}
	}
}

// pcNoDescriptors fails the test if the process has a descriptor on the
// socket of inode ino.
func pcNoDescriptors(t *testing.T, ino uint64) {
	t.Helper()
	want := fmt.Sprintf("socket:[%d]", ino)
	pcEachFD(t, func(fd, link string) {
		if link == want {
			t.Errorf("descriptor %s still on the closed socket", fd)
		}
	})
}
