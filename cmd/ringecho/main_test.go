package main

import (
	"bytes"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRingecho runs the server in-process for each API, echoes through it
// with a std client, then sends the process SIGTERM (which run catches) and
// expects a clean return.
func TestRingecho(t *testing.T) {
	for _, engine := range []string{"epoll", "uring"} {
		for _, api := range []string{"handler", "conn"} {
			t.Run(engine+"/"+api, func(t *testing.T) { testRingecho(t, engine, api) })
		}
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testRingecho(t *testing.T, engine, api string) {
	var logs syncBuffer
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"-addr", "127.0.0.1:0", "-engine", engine, "-api", api}, func(a net.Addr) { addrc <- a }, &logs)
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
	// The loop's counters are logged at exit, with the echoed
	// bytes in them.
	out := logs.String()
	if !strings.Contains(out, "ringecho loop stats") || !strings.Contains(out, "engine="+engine) {
		t.Errorf("no loop stats for %s in the log:\n%s", engine, out)
	}
	// At least the echoed bytes: the engine, kept for a moment after a
	// server closes, may have served the previous subtest too.
	m := regexp.MustCompile(`bytes_in=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("loop stats lack bytes_in:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n < len(msg) {
		t.Errorf("loop stats count bytes_in=%d, want at least the %d echoed:\n%s", n, len(msg), out)
	}
}

func TestRingechoBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-engine", "kqueue"},
		{"-api", "both"},
		{"-network", "udp"},
		{"-loops", "-3"},
	} {
		if err := run(append([]string{"-addr", "127.0.0.1:0"}, args...), nil, io.Discard); err == nil {
			t.Errorf("run(%v) succeeded", args)
		}
	}
}
