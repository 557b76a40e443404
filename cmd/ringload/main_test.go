//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

// echoMode picks how the test server misbehaves.
type echoMode int

const (
	echoGood    echoMode = iota
	echoCorrupt          // flips the last byte of every chunk it echoes
	echoStale            // always echoes the first message again
	echoHangUp           // closes each connection after 20 messages
)

// startEcho starts a std net echo server on 127.0.0.1:0 for the test and
// returns its address. msgSize is the message size echoStale and
// echoHangUp work in.
func startEcho(t *testing.T, mode echoMode, msgSize int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serveTestConn(c, mode, msgSize)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func serveTestConn(c net.Conn, mode echoMode, msgSize int) {
	switch mode {
	case echoGood, echoCorrupt:
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if mode == echoCorrupt {
					buf[n-1] ^= 0xff
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	case echoStale, echoHangUp:
		first := make([]byte, msgSize)
		buf := make([]byte, msgSize)
		for i := 0; ; i++ {
			if mode == echoHangUp && i == 20 {
				return
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if i == 0 {
				copy(first, buf)
			}
			out := buf
			if mode == echoStale {
				out = first
			}
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}
}

func testConfig(addr string) config {
	return config{
		addr:        addr,
		conns:       4,
		size:        1024,
		proto:       "echo",
		depth:       1,
		warmup:      200 * time.Millisecond,
		duration:    800 * time.Millisecond,
		dialTimeout: 5 * time.Second,
	}
}

// TestLoad runs the generator for about a second against a good echo
// server in this process, measuring this process as the server.
func TestLoad(t *testing.T) {
	addr := startEcho(t, echoGood, 0)
	cfg := testConfig(addr)
	cfg.serverPID = os.Getpid()
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *res)
	if res.Requests == 0 {
		t.Error("no requests completed")
	}
	if res.VerifyErrors != 0 {
		t.Errorf("%d verify errors: %s", res.VerifyErrors, res.FirstVerifyError)
	}
	if res.DialErrors != 0 || res.IOErrors != 0 {
		t.Errorf("conn errors: %d dial, %d I/O: %s", res.DialErrors, res.IOErrors, res.FirstError)
	}
	if res.P50us <= 0 || res.P99us < res.P50us {
		t.Errorf("latency p50 %v µs, p99 %v µs", res.P50us, res.P99us)
	}
	if res.WindowS < 0.8 {
		t.Errorf("window %vs, want at least 0.8s", res.WindowS)
	}
	// The server runs in this process, so this process used CPU for it.
	if res.ServerCPUns <= 0 || res.ServerCPUusPerReq <= 0 || res.ReqPerServerCPUs <= 0 || res.ServerThreads == 0 {
		t.Errorf("server CPU not measured: %d ns, %v µs/req, %d threads, note %q",
			res.ServerCPUns, res.ServerCPUusPerReq, res.ServerThreads, res.ServerNote)
	}
	if res.ClientCPUCores <= 0 || res.MachineCPUCores <= 0 {
		t.Errorf("client CPU %v cores, machine %v cores", res.ClientCPUCores, res.MachineCPUCores)
	}
	if res.CtxSwitches < 0 || res.CtxSwitchesPerReq < 0 {
		t.Errorf("context switches %d, %v per request", res.CtxSwitches, res.CtxSwitchesPerReq)
	}
	// The split is there exactly when ticks were sampled, and adds up.
	if res.ServerCPUTicks > 0 {
		if res.ServerUserUsPerReq < 0 || res.ServerKernelUsPerReq < 0 ||
			math.Abs(res.ServerUserUsPerReq+res.ServerKernelUsPerReq-res.ServerCPUusPerReq) > 1e-9*res.ServerCPUusPerReq {
			t.Errorf("CPU split %v + %v µs/req from %d ticks, want %v in all", res.ServerUserUsPerReq, res.ServerKernelUsPerReq, res.ServerCPUTicks, res.ServerCPUusPerReq)
		}
	} else if res.ServerUserUsPerReq != -1 || res.ServerKernelUsPerReq != -1 {
		t.Errorf("CPU split %v, %v µs/req without ticks, want -1", res.ServerUserUsPerReq, res.ServerKernelUsPerReq)
	}
	switch {
	case res.Syscalls == -1:
		if res.SyscallsNote == "" || res.SyscallsPerReq != -1 {
			t.Errorf("syscalls -1 with per request %v, note %q", res.SyscallsPerReq, res.SyscallsNote)
		}
		t.Logf("syscalls not measured: %s", res.SyscallsNote)
	case res.Syscalls <= 0 || res.SyscallsPerReq <= 0:
		t.Errorf("syscalls %d, %v per request", res.Syscalls, res.SyscallsPerReq)
	}
}

// TestLoadDetectsCorruption: a server that flips a byte is caught.
func TestLoadDetectsCorruption(t *testing.T) {
	addr := startEcho(t, echoCorrupt, 0)
	res, err := load(context.Background(), testConfig(addr))
	if err != nil {
		t.Fatal(err)
	}
	if res.VerifyErrors == 0 {
		t.Fatalf("corrupting server not detected: %+v", *res)
	}
	if !strings.Contains(res.FirstVerifyError, "byte") {
		t.Errorf("first verify error %q, want the byte that differs", res.FirstVerifyError)
	}
}

// TestLoadDetectsStaleEcho: a server that sends back an earlier message is
// caught by the sequence number in the header.
func TestLoadDetectsStaleEcho(t *testing.T) {
	for _, depth := range []int{1, 4} {
		cfg := testConfig(startEcho(t, echoStale, 1024))
		cfg.depth = depth
		res, err := load(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.VerifyErrors == 0 || !strings.Contains(res.FirstVerifyError, "reordered") {
			t.Fatalf("depth %d: stale echoes not detected: %d errors, first %q", depth, res.VerifyErrors, res.FirstVerifyError)
		}
	}
}

// TestLoadDetectsBadFrame: an rpc reply whose length prefix is wrong is
// named as such (the server here announces one byte less than it sends).
func TestLoadDetectsBadFrame(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, rpcframe.HeaderLen+64)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			rpcframe.PutHeader(buf, 63) // one byte short
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	cfg := testConfig(ln.Addr().String())
	cfg.conns, cfg.size, cfg.proto = 1, 64, "rpc"
	cfg.warmup, cfg.duration = 0, 200*time.Millisecond
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.VerifyErrors == 0 || !strings.Contains(res.FirstVerifyError, "announces 63 bytes") {
		t.Fatalf("bad frame not named: %d errors, first %q", res.VerifyErrors, res.FirstVerifyError)
	}
}

// startStd runs serveStd with proto on 127.0.0.1:0 until the test ends.
func startStd(t *testing.T, proto string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveStd(ctx, "127.0.0.1:0", proto, 16<<10, func(a net.Addr) { addrc <- a })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveStd %s: %v", proto, err)
		}
	})
	select {
	case a := <-addrc:
		return a.String()
	case err := <-done:
		t.Fatalf("serveStd %s: %v", proto, err)
		return ""
	}
}

// TestLoadModes: both protocols, ping-pong and pipelined, every byte
// verified, against the reference server.
func TestLoadModes(t *testing.T) {
	for _, proto := range []string{"echo", "rpc"} {
		addr := startStd(t, proto)
		for _, depth := range []int{1, 16} {
			cfg := testConfig(addr)
			cfg.proto, cfg.depth, cfg.size = proto, depth, 512
			cfg.warmup, cfg.duration = 0, 300*time.Millisecond
			res, err := load(context.Background(), cfg)
			if err != nil {
				t.Fatalf("%s depth %d: %v", proto, depth, err)
			}
			if res.Requests == 0 || res.Requests%uint64(depth) != 0 || res.VerifyErrors != 0 || res.IOErrors != 0 {
				t.Errorf("%s depth %d: %d requests, %d verify errors (%s), %d I/O errors (%s)", proto, depth,
					res.Requests, res.VerifyErrors, res.FirstVerifyError, res.IOErrors, res.FirstError)
			}
			if res.Proto != proto || res.Depth != depth {
				t.Errorf("result says proto %q depth %d", res.Proto, res.Depth)
			}
			if !(res.P50us > 0 && res.P50us <= res.P99us && res.P99us <= res.P999us &&
				res.P999us <= res.P9999us && res.P9999us <= res.MaxUs) {
				t.Errorf("%s depth %d: latencies out of order: %+v", proto, depth, *res)
			}
		}
	}
}

// TestLoadRate: with -rate the pacer never sends ahead of its schedule
// and catches up on at most maxPaceLag (2 ms) of it, so the generator
// cannot exceed the offered rate by more than two batches per connection
// here (a connection's turns 2 ms apart: one due at the window's edge,
// one sent late).
func TestLoadRate(t *testing.T) {
	cfg := testConfig(startStd(t, "echo"))
	cfg.rate = 2000
	cfg.warmup, cfg.duration = 100*time.Millisecond, 500*time.Millisecond
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	limit := cfg.rate*res.WindowS + 2*float64(cfg.conns)
	if float64(res.Requests) > limit || res.Requests == 0 {
		t.Errorf("%d requests in %.3fs at %v req/s offered: want 1 to %.0f", res.Requests, res.WindowS, cfg.rate, limit)
	}
	if res.OfferedRate != cfg.rate || res.VerifyErrors != 0 {
		t.Errorf("result %+v", *res)
	}
}

// TestLoadRequestBudget: -requests ends the window once reached, well
// before -duration.
func TestLoadRequestBudget(t *testing.T) {
	cfg := testConfig(startStd(t, "echo"))
	cfg.requests = 500
	cfg.warmup, cfg.duration = 0, 30*time.Second
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests < cfg.requests || res.WindowS >= 30 {
		t.Errorf("%d requests in %.3fs, want at least %d and the window cut short", res.Requests, res.WindowS, cfg.requests)
	}
}

// TestLoadServerHangsUp: connections the server closes are counted as
// errors; the run still ends and reports.
func TestLoadServerHangsUp(t *testing.T) {
	cfg := testConfig(startEcho(t, echoHangUp, 1024))
	cfg.warmup = 0
	cfg.serverPID = os.Getpid()
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.IOErrors != cfg.conns || res.FirstError == "" {
		t.Errorf("I/O errors %d (first %q), want %d", res.IOErrors, res.FirstError, cfg.conns)
	}
	if res.VerifyErrors != 0 {
		t.Errorf("%d verify errors", res.VerifyErrors)
	}
}

// TestLoadPacedServerStopsReading: a paced run against a server that
// accepts and never reads ends soon after its window, though the pacer is
// blocked in a write to a full socket (the connections' deadlines, set
// in the past at the end, free it), not at the run's last-resort
// deadline ten seconds later.
func TestLoadPacedServerStopsReading(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	cfg := testConfig(ln.Addr().String())
	cfg.conns, cfg.size, cfg.rate = 1, 4<<20, 1000 // a batch fills both sockets' buffers
	cfg.warmup, cfg.duration = 0, 200*time.Millisecond
	begin := time.Now()
	load(context.Background(), cfg) // its result is the server's failure; what counts here is when it returns
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("a 200 ms paced run against a server that does not read took %v", d)
	}
}

func TestLoadDialFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = load(context.Background(), testConfig(addr))
	if err == nil || !strings.Contains(err.Error(), "connections failed") {
		t.Fatalf("load against a closed port: %v", err)
	}
}

// TestRunJSON goes through the flags and checks the JSON and exit status.
func TestRunJSON(t *testing.T) {
	addr := startEcho(t, echoGood, 0)
	var out, errb bytes.Buffer
	code := run([]string{"-addr", addr, "-conns", "2", "-warmup", "0s", "-duration", "300ms", "-json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if res.Requests == 0 || res.Conns != 2 || res.Size != 1024 || res.VerifyErrors != 0 {
		t.Errorf("result %+v", res)
	}
	if res.Syscalls != -1 || res.ServerCPUusPerReq != -1 {
		t.Errorf("without -server-pid: syscalls %d, CPU µs/req %v; want -1", res.Syscalls, res.ServerCPUusPerReq)
	}
}

func TestRunTextAndVerifyExit(t *testing.T) {
	addr := startEcho(t, echoCorrupt, 0)
	var out, errb bytes.Buffer
	code := run([]string{"-addr", addr, "-conns", "2", "-warmup", "0s", "-duration", "200ms"}, &out, &errb)
	if code != 1 {
		t.Errorf("exit %d against a corrupting server, want 1", code)
	}
	if !strings.Contains(out.String(), "verify errors") || !strings.Contains(errb.String(), "failed verification") {
		t.Errorf("output:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-size", "8"},
		{"-conns", "0"},
		{"-duration", "0s"},
		{"-warmup", "-1s"},
		{"-server-pid", "-2"},
		{"-serve-std", "-buf", "100"},
		{"-serve-std", "-proto", "http"},
		{"-proto", "http"},
		{"-depth", "0"},
		{"-depth", "2000"},
		{"-rate", "-5"},
		{"-rate", "NaN"},
		{"-proto", "rpc", "-size", "20000000"},
		{"-server-stats", "/tmp/x.json"},
		{"-slowloris", "-1"},
		{"-proto", "kv", "-kv-records", "10", "-prime"},
		{"-nosuchflag"},
		{"extra"},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"-addr", "127.0.0.1:1"}, args...), &out, &errb); code != 2 {
			t.Errorf("run(%q) exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

// TestServeStd loads the reference server, then stops it through its
// context.
func TestServeStd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveStd(ctx, "127.0.0.1:0", "echo", 1024, func(a net.Addr) { addrc <- a })
	}()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("serveStd: %v", err)
	}
	cfg := testConfig(addr.String())
	cfg.warmup, cfg.duration = 0, 300*time.Millisecond
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.VerifyErrors != 0 || res.IOErrors != 0 {
		t.Errorf("against serveStd: %+v", *res)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serveStd after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serveStd did not return after cancel")
	}
}

func TestParsePerf(t *testing.T) {
	r := parsePerf("\n2057361,,raw_syscalls:sys_enter,1001027674,100.00,,\n")
	if r.err != nil || r.count != 2057361 {
		t.Errorf("parsePerf: %+v", r)
	}
	for _, out := range []string{
		"<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n",
		"<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n",
		"event syntax error: 'raw_syscalls:sys_enter'\n",
		"",
	} {
		if r := parsePerf(out); r.err == nil {
			t.Errorf("parsePerf(%q) = %+v, want an error", out, r)
		}
	}
}

func TestSampleProc(t *testing.T) {
	s, err := sampleProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.threads) == 0 {
		t.Fatal("no threads")
	}
	cpu, ctxsw, gone := s.since(procSample{})
	if cpu <= 0 || ctxsw < 0 || gone != 0 {
		t.Errorf("since zero: cpu %d, ctxsw %d, gone %d", cpu, ctxsw, gone)
	}
	if _, err := sampleProc(1 << 30); err == nil {
		t.Error("sampleProc of a PID that cannot exist succeeded")
	}
	for tid, ts := range s.threads {
		if ts.user < 0 || ts.sys < 0 {
			t.Errorf("thread %d: %d user and %d system ticks", tid, ts.user, ts.sys)
		}
	}
}

func TestParseStatTimes(t *testing.T) {
	for _, tc := range []struct {
		line      string
		user, sys int64
		bad       bool
	}{
		{line: "4242 (ringecho) S 1 4242 4242 0 -1 4194560 611 0 0 0 1234 5678 0 0 20 0 9 0 100 0 0\n", user: 1234, sys: 5678},
		// A command may hold spaces and parentheses.
		{line: "7 (a) b (c) R 1 7 7 0 -1 0 0 0 0 0 12 34 0 0\n", user: 12, sys: 34},
		{line: "7 ringecho S 1 7 7 0 -1 0 0 0 0 0 12 34\n", bad: true},
		{line: "7 (x) S 1 7 7 0 -1 0 0 0 0 0 12\n", bad: true},
		{line: "7 (x) S 1 7 7 0 -1 0 0 0 0 0 12 z 0\n", bad: true},
	} {
		user, sys, err := parseStatTimes([]byte(tc.line))
		switch {
		case tc.bad && err == nil:
			t.Errorf("%q: %d, %d, want an error", tc.line, user, sys)
		case !tc.bad && (err != nil || user != tc.user || sys != tc.sys):
			t.Errorf("%q: %d, %d, %v; want %d, %d", tc.line, user, sys, err, tc.user, tc.sys)
		}
	}
}

func TestCPUSplit(t *testing.T) {
	before := procSample{threads: map[int]threadSample{1: {user: 10, sys: 100}, 2: {user: 5, sys: 5}}}
	// Thread 2 exited; thread 3 was born.
	after := procSample{threads: map[int]threadSample{1: {user: 30, sys: 160}, 3: {user: 10, sys: 10}}}
	user, sys := after.ticksSince(before)
	if user != 30 || sys != 70 {
		t.Fatalf("ticksSince: %d user, %d system; want 30, 70", user, sys)
	}
	u, k := splitCPU(8, user, sys)
	if math.Abs(u-2.4) > 1e-12 || math.Abs(k-5.6) > 1e-12 {
		t.Errorf("splitCPU(8 µs, 30, 70) = %v, %v; want 2.4, 5.6", u, k)
	}
}

func TestReadCPUStat(t *testing.T) {
	s, err := readCPUStat()
	if err != nil {
		t.Fatal(err)
	}
	if s.ncpu < 1 || s.total == 0 || s.busy > s.total {
		t.Errorf("readCPUStat: %+v", s)
	}
}

func TestRunPerfMissing(t *testing.T) {
	r := runPerf(context.Background(), "/nonexistent/perf", os.Getpid(), 10*time.Millisecond)
	if r.err == nil {
		t.Fatalf("runPerf with a missing binary: %+v", r)
	}
}

// TestLoopTotals plays ringecho's part of -stats-file in this process:
// on SIGUSR1 it writes a dump with a growing sequence number, and the
// load's window gets the difference of two dumps.
func TestLoopTotals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stats.json")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	defer signal.Stop(sig)
	done := make(chan struct{})
	defer close(done)
	go func() {
		var seq uint64
		for {
			select {
			case <-done:
				return
			case <-sig:
			}
			seq++
			benchfmt.WriteLoopTotals(path, benchfmt.LoopTotals{Seq: seq, Syscalls: 1000 * seq})
		}
	}()
	cfg := testConfig(startStd(t, "echo"))
	cfg.serverPID, cfg.serverStats = os.Getpid(), path
	cfg.warmup, cfg.duration = 0, 200*time.Millisecond
	// The dumps come: the bound only has to outlast a loaded machine.
	cfg.statsWait = 20 * time.Second
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Two dumps, 1000 apart.
	if res.LoopSyscalls != 1000 || res.LoopSyscallsPerReq <= 0 {
		t.Errorf("loop syscalls %d (%v per request), want 1000; note %q", res.LoopSyscalls, res.LoopSyscallsPerReq, res.ServerNote)
	}
	// A second run finds the old dump and waits for newer ones.
	res, err = load(context.Background(), cfg)
	if err != nil || res.LoopSyscalls != 1000 {
		t.Errorf("second run: %v, loop syscalls %d", err, res.LoopSyscalls)
	}
	// A server that never answers: the counters are missing, said why.
	stale := filepath.Join(t.TempDir(), "none.json")
	signal.Ignore(syscall.SIGUSR1)
	defer signal.Reset(syscall.SIGUSR1)
	cfg.serverStats = stale
	cfg.statsWait = 100 * time.Millisecond // no dump ever comes
	res, err = load(context.Background(), cfg)
	if err != nil || res.LoopSyscalls != -1 || !strings.Contains(res.ServerNote, "library counters") {
		t.Errorf("no dump: %v, loop syscalls %d, note %q", err, res.LoopSyscalls, res.ServerNote)
	}
}

// TestLoadSlowloris: the slowloris crowd connects, dribbles bytes whose
// echoes are checked, and is not counted in the measurement.
func TestLoadSlowloris(t *testing.T) {
	cfg := testConfig(startStd(t, "echo"))
	cfg.slowloris = 50
	// Each connection sends its first byte at once, and the load starts
	// once its echo came back; the later ones come every 1-2 s.
	cfg.slowlorisFirst = 0
	cfg.warmup, cfg.duration = 0, 2500*time.Millisecond
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Every connection had at least its first byte echoed.
	if res.SlowlorisConns != 50 || res.SlowlorisBytes < 50 || res.SlowlorisErrors != 0 {
		t.Errorf("slowloris: %d conns, %d bytes, %d errors (%s)", res.SlowlorisConns, res.SlowlorisBytes, res.SlowlorisErrors, res.FirstSlowlorisError)
	}
	if res.Requests == 0 || res.VerifyErrors != 0 {
		t.Errorf("the measured load: %+v", *res)
	}
}

// TestLoadWindowWaitsForTheFirstRequest: with -first-wait, a window in
// which no request completed goes on until one does, rather than report
// nothing. The
// server holds every reply until the window has ended empty (the hook).
func TestLoadWindowWaitsForTheFirstRequest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	release := make(chan struct{})
	var once sync.Once
	testWindowEmpty = func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { testWindowEmpty = nil; once.Do(func() { close(release) }) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				<-release
				io.Copy(c, c)
			}()
		}
	}()
	cfg := testConfig(ln.Addr().String())
	cfg.conns = 1
	cfg.warmup, cfg.duration, cfg.firstWait = 0, 50*time.Millisecond, firstLimit
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !chanClosed(release) {
		t.Fatal("the window saw a request complete before the server replied")
	}
	if res.Requests == 0 || res.WindowS < cfg.duration.Seconds() || res.VerifyErrors != 0 {
		t.Errorf("%d requests in %.3fs, %d verify errors; want some, in a window of at least %v", res.Requests, res.WindowS, res.VerifyErrors, cfg.duration)
	}
}
