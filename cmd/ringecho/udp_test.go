//go:build linux

package main

import (
	"fmt"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// TestRingechoUDP runs the UDP server in-process for each API, with
// replies: every datagram comes back whole, the stats file counts them,
// and SIGTERM ends the server cleanly.
func TestRingechoUDP(t *testing.T) {
	for _, api := range []string{"inline", "handler", "conn", "std", "xnet"} {
		t.Run(api, func(t *testing.T) {
			stats := filepath.Join(t.TempDir(), "stats")
			var logs syncBuffer
			addrc := make(chan net.Addr, 1)
			done := make(chan error, 1)
			go func() {
				done <- run([]string{"-network", "udp4", "-addr", "127.0.0.1:0", "-api", api, "-reply", "-stats-file", stats},
					func(a net.Addr) { addrc <- a }, &logs)
			}()
			var addr net.Addr
			select {
			case addr = <-addrc:
			case err := <-done:
				t.Fatalf("run returned before listening: %v", err)
			}
			c, err := net.Dial("udp4", addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(hangBound))
			buf := make([]byte, 2048)
			const n = 50
			for i := range n {
				msg := fmt.Sprintf("datagram %d", i)
				if _, err := c.Write([]byte(msg)); err != nil {
					t.Fatal(err)
				}
				k, err := c.Read(buf)
				if err != nil || string(buf[:k]) != msg {
					t.Fatalf("reply %d: %q, %v", i, buf[:k], err)
				}
			}
			tot, err := benchfmt.AskLoopTotals(syscall.Getpid(), stats, 0, hangBound)
			if err != nil || tot.Packets != n {
				t.Errorf("stats file: %+v, %v; want %d packets", tot, err, n)
			}
			if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run after SIGTERM: %v\n%s", err, logs.String())
				}
			case <-time.After(hangBound):
				t.Fatal("run did not return after SIGTERM")
			}
		})
	}
}
