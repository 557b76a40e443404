package main

import (
	"bytes"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestRingecho runs the server in-process for each API, echoes through it
// with a std client, then sends the process SIGTERM (which run catches) and
// expects a clean return.
func TestRingecho(t *testing.T) {
	for _, api := range []string{"handler", "conn"} {
		t.Run(api, func(t *testing.T) {
			addrc := make(chan net.Addr, 1)
			done := make(chan error, 1)
			go func() {
				done <- run([]string{"-addr", "127.0.0.1:0", "-engine", "epoll", "-api", api}, func(a net.Addr) { addrc <- a })
			}()
			var addr net.Addr
			select {
			case addr = <-addrc:
			case err := <-done:
				t.Fatalf("run returned before listening: %v", err)
			}
			c, err := net.Dial("tcp", addr.String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			msg := bytes.Repeat([]byte("ringecho "), 1000)
			go c.Write(msg)
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("echo: err %v, equal %v", err, bytes.Equal(got, msg))
			}
			c.Close()
			if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run after SIGTERM: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("run did not return after SIGTERM")
			}
		})
	}
}

func TestRingechoBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-engine", "kqueue"},
		{"-api", "both"},
		{"-engine", "uring"},
		{"-loops", "-3"},
	} {
		if err := run(append([]string{"-addr", "127.0.0.1:0"}, args...), nil); err == nil {
			t.Errorf("run(%v) succeeded", args)
		}
	}
}
