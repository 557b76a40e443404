package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestGnetUDP: gnet's UDP server sends each datagram back with
// udp-reply, and its stats file counts them.
func TestGnetUDP(t *testing.T) {
	stats := filepath.Join(t.TempDir(), "stats")
	srv, err := startServer(config{impl: implGnet, proto: protoUDPReply, addr: "127.0.0.1:0", statsFile: stats})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	c, err := net.Dial("udp4", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 256)
	const n = 20
	for i := range n {
		msg := fmt.Sprint("datagram ", i)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		k, err := c.Read(buf)
		if err != nil || string(buf[:k]) != msg {
			t.Fatalf("reply %d: %q, %v", i, buf[:k], err)
		}
	}
	g := srv.(*gnetUDP)
	if err := g.dump(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(stats)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Seq, Packets uint64 }
	if err := json.Unmarshal(b, &got); err != nil || got.Packets != n || got.Seq < 2 {
		t.Errorf("stats file %s: %+v, %v; want %d packets", b, got, err, n)
	}
}
