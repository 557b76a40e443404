//go:build linux

package main

import (
	"bytes"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

// hangBound bounds the tests' waits: long enough for a loaded machine, so
// that only a hang reaches it.
const hangBound = 20 * time.Second

// TestRingecho runs the server in-process for each API, echoes through it
// with a std client, then sends the process SIGTERM (which run catches) and
// expects a clean return.
func TestRingecho(t *testing.T) {
	for _, engine := range []string{"epoll", "uring"} {
		for _, api := range []string{"handler", "inline", "conn"} {
			for _, proto := range []string{"echo", "rpc"} {
				t.Run(engine+"/"+api+"/"+proto, func(t *testing.T) { testRingecho(t, engine, api, proto) })
			}
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

// rpcRequests is a pipelined batch of rpc frames, the zero-length one
// included; the replies are the same bytes.
func rpcRequests() []byte {
	var b []byte
	for _, n := range []int{0, 1, 100, 5000, 70000, 3} {
		f := make([]byte, rpcframe.HeaderLen+n)
		rpcframe.PutHeader(f, n)
		for i := range n {
			f[rpcframe.HeaderLen+i] = byte(i*7 + n)
		}
		b = append(b, f...)
	}
	return b
}

func testRingecho(t *testing.T, engine, api, proto string) {
	var logs syncBuffer
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"-addr", "127.0.0.1:0", "-engine", engine, "-api", api, "-proto", proto}, func(a net.Addr) { addrc <- a }, &logs)
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
	c.SetDeadline(time.Now().Add(hangBound))
	msg := bytes.Repeat([]byte("ringecho "), 1000)
	if proto == "rpc" {
		msg = rpcRequests()
	}
	go func() {
		// In odd pieces, so frames arrive split.
		for b := msg; len(b) > 0; {
			n := min(len(b), 777)
			if _, err := c.Write(b[:n]); err != nil {
				return
			}
			b = b[n:]
		}
	}()
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
	case <-time.After(hangBound):
		t.Fatal("run did not return after SIGTERM")
	}
	// The loop's counters are logged at exit, with the echoed
	// bytes in them.
	out := logs.String()
	if !strings.Contains(out, "ringecho loop stats") || !strings.Contains(out, "engine="+engine) {
		t.Errorf("no loop stats for %s in the log:\n%s", engine, out)
	}
	// At least the echoed bytes, summed over the loops (a line each):
	// the engine, kept for a moment after a server closes, may have
	// served the previous subtest too.
	ms := regexp.MustCompile(`bytes_in=(\d+)`).FindAllStringSubmatch(out, -1)
	if ms == nil {
		t.Fatalf("loop stats lack bytes_in:\n%s", out)
	}
	in := 0
	for _, m := range ms {
		n, _ := strconv.Atoi(m[1])
		in += n
	}
	if in < len(msg) {
		t.Errorf("loop stats count bytes_in=%d over %d loops, want at least the %d echoed:\n%s", in, len(ms), len(msg), out)
	}
}

func TestRingechoBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-engine", "kqueue"},
		{"-api", "both"},
		{"-network", "sctp"},
		{"-network", "udp", "-api", "both"},
		{"-network", "udp", "-api", "std", "-gro"},
		{"-loop-cpus", "first"},
		{"-loops", "-3"},
		{"-proto", "http"},
	} {
		// A run that accepts the flags serves until a signal: bounded,
		// so that such a run fails the test instead of hanging it.
		done := make(chan error, 1)
		go func() { done <- run(append([]string{"-addr", "127.0.0.1:0"}, args...), nil, io.Discard) }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("run(%v) succeeded", args)
			}
		case <-time.After(hangBound):
			t.Errorf("run(%v) accepted the flags and is serving", args)
			syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
			<-done
		}
	}
}

// TestRingechoRPCBadFrame: a frame announcing more than rpcframe allows
// closes that connection; the server goes on serving others.
func TestRingechoRPCBadFrame(t *testing.T) {
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"-addr", "127.0.0.1:0", "-engine", "uring", "-proto", "rpc"}, func(a net.Addr) { addrc <- a }, io.Discard)
	}()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("run returned before listening: %v", err)
	}
	defer func() {
		syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
		if err := <-done; err != nil {
			t.Errorf("run after SIGTERM: %v", err)
		}
	}()
	bad, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.SetDeadline(time.Now().Add(hangBound))
	h := make([]byte, rpcframe.HeaderLen)
	rpcframe.PutHeader(h, rpcframe.MaxPayload+1)
	if _, err := bad.Write(h); err != nil {
		t.Fatal(err)
	}
	if n, err := bad.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after an oversized frame: read %d, %v; want EOF (closed)", n, err)
	}
	good, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	good.SetDeadline(time.Now().Add(hangBound))
	req := rpcRequests()
	go good.Write(req)
	got := make([]byte, len(req))
	if _, err := io.ReadFull(good, got); err != nil || !bytes.Equal(got, req) {
		t.Fatalf("another connection after the bad one: err %v, equal %v", err, bytes.Equal(got, req))
	}
}

// TestRingechoStatsFile: on SIGUSR1 the server dumps its loop counters,
// each dump with a sequence number one higher than the last, and epoll_wait
// calls counted once the loop ran (it may not have when run reports the
// address: the test asks again until it did).
func TestRingechoStatsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stats.json")
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"-addr", "127.0.0.1:0", "-engine", "epoll", "-stats-file", path}, func(a net.Addr) { addrc <- a }, io.Discard)
	}()
	select {
	case <-addrc:
	case err := <-done:
		t.Fatalf("run returned before listening: %v", err)
	}
	defer func() {
		syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
		if err := <-done; err != nil {
			t.Errorf("run after SIGTERM: %v", err)
		}
	}()
	deadline := time.Now().Add(hangBound)
	var got benchfmt.LoopTotals
	for want := uint64(1); want <= 2 || got.EpollWaits == 0; want++ {
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		for got.Seq < want && time.Now().Before(deadline) {
			if t, err := benchfmt.ReadLoopTotals(path); err == nil {
				got = t
			}
			time.Sleep(time.Millisecond)
		}
		if got.Seq != want {
			t.Fatalf("dump %d: seq %d", want, got.Seq)
		}
		if got.Syscalls != got.Enters+got.EpollWaits {
			t.Errorf("dump %d: %+v; want the syscalls summed", want, got)
		}
		if got.EpollWaits == 0 && time.Now().After(deadline) {
			t.Fatalf("dump %d: %+v; no epoll_wait call counted in %v", want, got, hangBound)
		}
	}
}
