//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll"
)

// testArgs are the flags of the short soaks: a small mix, so a run takes
// about a second even under the race detector.
func testArgs(extra ...string) []string {
	return append([]string{"-clients", "6", "-slowloris", "60", "-burst", "150", "-seed", "7"}, extra...)
}

// testEngineList is epoll, and uring where io_uring works.
func testEngineList(t *testing.T) string {
	if err := ringpoll.UringStatus(); err != nil {
		t.Logf("io_uring unavailable, epoll only: %v", err)
		return "epoll"
	}
	return "epoll,uring"
}

// TestShortSoak runs the whole tool, as the command line does, on epoll and
// uring with both APIs, and wants every run to pass with verified bytes.
//
// Its input limits are 4 MiB (the buffer ring 4096 x 4 KiB, so a
// connection's quarter does not lower them), more than any client of the
// mix sends: no connection pauses its input, which keeps the run clear of
// the library bug TestReproLostReset reproduces (a paused and resumed
// connection reset by its peer can hang on uring). The tool's defaults
// (256 KiB) do hit it, about once a minute.
func TestShortSoak(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(testArgs("-engine", testEngineList(t), "-api", "both", "-duration", "4s", "-json",
		"-input-hw", "4194304", "-ring-count", "4096"), &stdout, &stderr)
	t.Logf("text verdict:\n%s", stderr.String())
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("the JSON report does not parse: %v\n%s", err, stdout.String())
	}
	if code != exitPass || !rep.Passed {
		t.Fatalf("exit status %d, passed %v; want 0 and a pass", code, rep.Passed)
	}
	want := 4
	if testEngineList(t) == "epoll" {
		want = 2
	}
	if len(rep.Runs) != want {
		t.Fatalf("%d runs, want %d", len(rep.Runs), want)
	}
	for _, r := range rep.Runs {
		name := runName(r)
		if r.Skipped != "" || !r.Passed {
			t.Errorf("%s: skipped %q, passed %v, failures %q", name, r.Skipped, r.Passed, r.Failures)
		}
		if r.BytesVerified == 0 {
			t.Errorf("%s: no byte verified", name)
		}
		if n := sum(r.Unexpected); n != 0 {
			t.Errorf("%s: %d unexpected errors: %v", name, n, r.ErrorSamples)
		}
		for _, k := range []clientKind{kindEcho, kindHalfClose, kindSlowloris, kindBurst} {
			if s := r.Kinds[k]; s == nil || s.BytesVerified == 0 {
				t.Errorf("%s: no %s client verified a byte", name, k)
			}
		}
		if r.FDs == nil || !r.FDs.OK || r.Goroutines == nil || !r.Goroutines.OK || r.Stats == nil || !r.Stats.OK {
			t.Errorf("%s: leak checks missing or failed: fds %+v goroutines %+v stats %+v", name, r.FDs, r.Goroutines, r.Stats)
		}
	}
}

// corruptEvery returns a corruption hook that flips the middle byte of
// every nth chunk the server echoes.
func corruptEvery(n int64) func([]byte) {
	var calls atomic.Int64
	return func(b []byte) {
		if calls.Add(1)%n == 0 && len(b) > 0 {
			b[len(b)/2] ^= 0x5a
		}
	}
}

// TestCatchesCorruptingServer injects a corruption into the ringpoll echo
// server, on both APIs: the tool must see the mismatches and fail.
func TestCatchesCorruptingServer(t *testing.T) {
	cfg, err := parseFlags(testArgs("-engine", "epoll", "-api", "both", "-duration", "1500ms"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg.corrupt = corruptEvery(5)
	var text bytes.Buffer
	rep := soak(context.Background(), cfg, &text)
	t.Logf("text verdict:\n%s", text.String())
	if rep.Passed {
		t.Fatal("a corrupting server passed")
	}
	for _, r := range rep.Runs {
		if r.Passed || r.Unexpected[errMismatch] == 0 {
			t.Errorf("%s: passed %v with %d mismatches; want a failure with mismatches", runName(r), r.Passed, r.Unexpected[errMismatch])
		}
		if !strings.Contains(strings.Join(r.Failures, "\n"), "verify-mismatch") {
			t.Errorf("%s: failures do not name the mismatches: %q", runName(r), r.Failures)
		}
	}
}

// stdEchoServer is a std net echo server for the checker's own tests: it
// echoes each connection through mangle, which gets the stream offset of
// each chunk and returns what to send back.
type stdEchoServer struct {
	ln net.Listener
	wg sync.WaitGroup
}

func startStdEcho(t *testing.T, mangle func(off int64, b []byte) []byte) *stdEchoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stdEchoServer{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 32<<10)
				var off int64
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, err := c.Write(mangle(off, buf[:n])); err != nil {
							return
						}
						off += int64(n)
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

// testEnv returns a client environment against addr whose traffic time
// is d.
func testEnv(t *testing.T, addr string, d time.Duration) *clientEnv {
	cfg, err := parseFlags(testArgs("-io-timeout", "2s"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return &clientEnv{addr: addr, cfg: cfg, ctx: ctx, tally: newTally(),
		dialer: net.Dialer{Timeout: time.Second}, nrCap: neverReadCap(cfg)}
}

// TestCheckerCatchesStdServerFaults runs clients against std net servers
// that flip a byte, drop a byte or add a byte: every kind of damage must
// come out as an unexpected error of the right kind.
func TestCheckerCatchesStdServerFaults(t *testing.T) {
	faults := []struct {
		name   string
		mangle func(off int64, b []byte) []byte
		want   errKind
	}{
		{"flip", func(off int64, b []byte) []byte {
			if off <= 100 && off+int64(len(b)) > 100 {
				b[100-off] ^= 1
			}
			return b
		}, errMismatch},
		{"drop", func(off int64, b []byte) []byte {
			if off <= 100 && off+int64(len(b)) > 100 {
				return append(b[:100-off:100-off], b[101-off:]...)
			}
			return b
		}, errMismatch}, // the stream shifts by one
		{"extra", func(off int64, b []byte) []byte {
			return append(b, b[0]) // one byte too many per chunk
		}, errMismatch},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			s := startStdEcho(t, f.mangle)
			env := testEnv(t, s.ln.Addr().String(), time.Second)
			rng := rand.New(rand.NewPCG(1, 2))
			for range 5 {
				r := env.echo(rng, rng.Uint64(), kindHalfClose)
				if r.sent <= 101 {
					continue // too short to be damaged
				}
				if len(r.errs) == 0 || r.errs[0].kind != f.want || r.errs[0].expected {
					t.Fatalf("%d bytes sent, %d verified, errors %+v; want an unexpected %s", r.sent, r.verified, r.errs, f.want)
				}
				return
			}
			t.Fatal("no client sent enough to be damaged")
		})
	}
	t.Run("clean", func(t *testing.T) {
		s := startStdEcho(t, func(_ int64, b []byte) []byte { return b })
		env := testEnv(t, s.ln.Addr().String(), time.Second)
		rng := rand.New(rand.NewPCG(3, 4))
		for _, k := range []clientKind{kindEcho, kindPingPong, kindHalfClose} {
			if r := env.echo(rng, rng.Uint64(), k); len(r.errs) != 0 || r.verified != r.sent || r.sent == 0 {
				t.Errorf("%s against a correct server: sent %d, verified %d, errors %+v", k, r.sent, r.verified, r.errs)
			}
		}
	})
}

// TestBadFlags wants exit status 2 for every malformed command line and 0
// for -h.
func TestBadFlags(t *testing.T) {
	bad := [][]string{
		{"-engine", "kqueue"},
		{"-engine", "epoll,"},
		{"-api", "grpc"},
		{"-duration", "0s"},
		{"-duration", "soon"},
		{"-clients", "-1"},
		{"-slowloris", "100000"},
		{"-burst", "-5"},
		{"-clients", "0", "-slowloris", "0", "-burst", "0"},
		{"-max-msg", "0"},
		{"-input-hw", "100"},
		{"-output-hw", "1"},
		{"-ring-count", "3"},
		{"-ring-size", "100"},
		{"-idle-timeout", "-1s"},
		{"-io-timeout", "0s"},
		{"-no-such-flag"},
		{"extra-argument"},
	}
	for _, args := range bad {
		var stderr bytes.Buffer
		if code := run(args, io.Discard, &stderr); code != exitBadFlag {
			t.Errorf("ringsoak %q: exit status %d, want %d; stderr %s", args, code, exitBadFlag, stderr.String())
		} else if stderr.Len() == 0 {
			t.Errorf("ringsoak %q: no message", args)
		}
	}
	if code := run([]string{"-h"}, io.Discard, io.Discard); code != exitPass {
		t.Errorf("ringsoak -h: exit status %d, want 0", code)
	}
}

// TestLeakChecksCatchLeaks shows the descriptor and goroutine checks fail
// when something is left over, and name it: the descriptors of a pipe left
// open, and a goroutine left running.
func TestLeakChecksCatchLeaks(t *testing.T) {
	// What an engine of an earlier test holds (loop goroutines, epoll or
	// io_uring descriptors, sockets) goes away ~200 ms after its last
	// connection, by itself: a baseline taken before then would see it go
	// during the checks and hide the leaks. Wait until none of the
	// library's goroutines runs (an engine closes its descriptors before
	// its loops return).
	warmUp()
	deadline := time.Now().Add(20 * time.Second)
	for lib := libraryGoroutines(); lib != ""; lib = libraryGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("the library's goroutines of earlier tests never ended:\n%s", lib)
		}
		time.Sleep(pollEvery)
	}
	base := takeBaseline()

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	rfd, wfd := sysFD(t, r), sysFD(t, w)
	// As many leaked goroutines as the baseline counted: however many of
	// the others (clients of earlier tests, still returning) end
	// meanwhile, the count ends above the baseline.
	stop := make(chan struct{})
	var dones []chan struct{}
	for range max(1, base.goroutines) {
		started, done := make(chan struct{}), make(chan struct{})
		go leakedGoroutine(started, stop, done)
		<-started
		dones = append(dones, done)
	}
	fds := checkFDs(base.fds, 50*time.Millisecond)
	gs := checkGoroutines(base.goroutines, 50*time.Millisecond)
	r.Close()
	w.Close()
	close(stop)
	for _, done := range dones {
		<-done
	}
	if fds.OK || fds.After <= fds.Before || !hasFD(fds.Extra, rfd, "pipe:") || !hasFD(fds.Extra, wfd, "pipe:") {
		t.Errorf("fd check with a pipe (descriptors %d and %d) left open: %+v", rfd, wfd, fds)
	}
	if gs.OK || gs.After <= gs.Before || !strings.Contains(gs.Dump, ".leakedGoroutine+") {
		t.Errorf("goroutine check with a goroutine left running: ok %v, %d -> %d, dump:\n%s", gs.OK, gs.Before, gs.After, gs.Dump)
	}
	// Both are gone now (the goroutine may still be returning): the
	// checks, which poll, must come back to the baseline.
	if c := checkFDs(base.fds, 20*time.Second); !c.OK {
		t.Errorf("fd check after closing the pipe: %+v", c)
	}
	if c := checkGoroutines(base.goroutines, 20*time.Second); !c.OK {
		t.Errorf("goroutine check after the goroutine ended: %+v", c)
	}
}

// leakedGoroutine is the goroutine TestLeakChecksCatchLeaks leaves running
// (its name in the dump identifies it): it says it started and waits for
// stop.
func leakedGoroutine(started chan<- struct{}, stop <-chan struct{}, done chan<- struct{}) {
	close(started)
	<-stop
	close(done)
}

// libraryGoroutines returns the stacks of the goroutines running the
// library's code (its loops, linger timers, handler pools), or "".
func libraryGoroutines() string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var lib []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/ringpoll/ringpoll.") || strings.Contains(g, "github.com/ringpoll/ringpoll/internal/") {
			lib = append(lib, g)
		}
	}
	return strings.Join(lib, "\n\n")
}

// sysFD returns f's descriptor, leaving its mode alone (unlike Fd).
func sysFD(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	if err := rc.Control(func(p uintptr) { fd = int(p) }); err != nil {
		t.Fatal(err)
	}
	return fd
}

// hasFD reports whether the fd check's extra descriptors list fd as a kind
// ("pipe:").
func hasFD(extra []string, fd int, kind string) bool {
	prefix := fmt.Sprintf("%d %s", fd, kind)
	for _, e := range extra {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

// TestVerifier checks the stream is the same however it is cut, and that a
// wrong byte is reported at its offset.
func TestVerifier(t *testing.T) {
	const n = 100000
	want := make([]byte, n)
	newStream(42).Read(want)
	got := make([]byte, 0, n)
	g := newStream(42)
	for i := 1; len(got) < n; i = i*7%40000 + 1 {
		p := make([]byte, min(i, n-len(got)))
		g.Read(p)
		got = append(got, p...)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the stream depends on how it is read")
	}
	v := newVerifier(42)
	if err := v.check(want[:5000]); err != nil || v.off != 5000 {
		t.Fatalf("check of a correct prefix: %v, off %d", err, v.off)
	}
	bad := bytes.Clone(want[5000:9000])
	bad[1234] ^= 0x80
	err := v.check(bad)
	var me *mismatchError
	if !errors.As(err, &me) || me.Off != 6234 || me.Got != want[6234]^0x80 || me.Want != want[6234] {
		t.Fatalf("check of a corrupted chunk: %v", err)
	}
	if v.off != 6234 {
		t.Fatalf("verified %d bytes, want the 6234 before the mismatch", v.off)
	}
}

// TestClassify checks the error kinds.
func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want errKind
	}{
		{&mismatchError{Off: 3}, errMismatch},
		{&dialError{syscall.ECONNREFUSED}, errDial},
		{errWritesNeverBlocked, errNoBackpressure},
		{&net.OpError{Op: "read", Err: net.ErrClosed}, errClosedSelf},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, errTimeout},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, errReset},
		{&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, errBrokenPipe},
		{io.ErrUnexpectedEOF, errEOF},
		{io.EOF, errEOF},
		{fmt.Errorf("wrapped: %w", syscall.EINVAL), errOther},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
