//go:build linux

package ringpoll

// Fault tests of the io_uring engines: a buffer ring that runs dry, a
// completion queue that overflows, a peer that resets while the loop sends,
// accepts that hit EMFILE, and io_uring forced unavailable. Helpers (ts*)
// are in stress_test.go; the ones here start with uf.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/ringpoll/ringpoll/internal/loopstats"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ufProactors are the engines that receive into provided buffers.
var ufProactors = []Engine{EngineUring, EngineUringHybrid, EngineUringSQPoll}

// ufUringEngines are every io_uring engine.
var ufUringEngines = []Engine{EngineUring, EngineUringHybrid, EngineUringReactor, EngineUringSQPoll}

// ufStats sums the counters of every loop of the engine serving ln.
func ufStats(ln *Listener) loopstats.LoopStats {
	var s loopstats.LoopStats
	for _, l := range loopStatsOf(ln) {
		s.Engine = l.Engine
		s.EnterSubmit += l.EnterSubmit
		s.EnterWait += l.EnterWait
		s.EnterGetEvents += l.EnterGetEvents
		s.EnterWakeSQ += l.EnterWakeSQ
		s.Parks += l.Parks
		s.ThreadMoves += l.ThreadMoves
		s.SQEs += l.SQEs
		s.CQEs += l.CQEs
		s.Wakeups += l.Wakeups
		s.ENOBUFS += l.ENOBUFS
		s.CQOverflows += l.CQOverflows
		s.Rearms += l.Rearms
		s.InputCancels += l.InputCancels
		s.InputMoves += l.InputMoves
		s.CancelRetries += l.CancelRetries
		s.Accepts += l.Accepts
		s.BytesIn += l.BytesIn
		s.BytesOut += l.BytesOut
		s.BuffersOut += l.BuffersOut
		s.BuffersRetired += l.BuffersRetired
		s.BuffersShared += l.BuffersShared
	}
	return s
}

// ufBuffersBack waits, after every connection of ln's engine closed, until
// each provided buffer is back in its loop's ring (BuffersOut 0 on every
// loop), and fails if a loop ever reports a negative count.
func ufBuffersBack(t testing.TB, ln *Listener) {
	t.Helper()
	tsEventually(t, "every provided buffer to return to the ring", func() bool {
		for _, s := range loopStatsOf(ln) {
			if s.BuffersOut < 0 {
				t.Fatalf("loop %d reports %d buffers out (returned twice?): %v", s.Loop, s.BuffersOut, s)
			}
			if s.BuffersOut != 0 {
				return false
			}
		}
		return true
	})
}

// ufGatedEcho returns an echo server, in the net.Conn and the handler
// style, whose reader waits before each read until gate lets it go: a test
// that needs input to back up (a receive to pause, a ring to run dry)
// makes it back up this way, whatever the machine's pace.
func ufGatedEcho(gate func(c *Conn)) (func(c *Conn), Handler) {
	conn := func(c *Conn) {
		b := make([]byte, 64<<10)
		for {
			gate(c)
			n, err := c.Read(b)
			if n > 0 {
				if _, werr := c.Write(b[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	handler := func(ctx context.Context, c *Conn) error {
		gate(c)
		return tsEchoHandler(ctx, c)
	}
	return conn, handler
}

// ufPoll waits until cond holds, polling, for at most tsTimeout; it runs
// on server goroutines, where a test cannot fail, so a condition that
// never comes shows as the test's own failure later.
func ufPoll(cond func() bool) {
	for deadline := time.Now().Add(tsTimeout); !cond() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// ufHeldAtLeast is a gate for ufGatedEcho: before its first read, a
// connection's reader waits until the connection holds n bytes of input
// (its loop stops reading at the high-water mark, so n up to the mark is
// always reached), or the input ended. Later reads go at once: a reader
// that consumed part of a paused input may hold less than the mark, and
// input resumes only under the low-water mark.
func ufHeldAtLeast(n int) func(c *Conn) {
	var first sync.Map
	return func(c *Conn) {
		if _, again := first.LoadOrStore(c, true); !again {
			ufPoll(func() bool { return c.fd.InputHeld() >= n || c.fd.InputEnded() })
		}
	}
}

// TestUringTinyBufferRing runs an echo server on a ring of four 512-byte
// provided buffers while eight clients push 1-4 MiB each through it. Every
// echo must come back whole and in order, and once every connection
// closed every buffer must be back in the ring. In the blocking styles the
// readers first wait until the ring ran dry (ENOBUFS: with nobody reading,
// four connections hold the four buffers, and a fifth one's receive finds
// none), then receives must be re-armed as buffers come back. An inline
// handler cannot wait, so that style checks the bytes and the buffers
// only.
func TestUringTinyBufferRing(t *testing.T) {
	needUring(t)
	// Twice as many clients as buffers. One connection may hold at most a
	// quarter of the ring (one buffer here), so four clients alone would
	// drain it only when a released buffer has not yet been put back; eight
	// must contend for it.
	const clients = 8
	rng := rand.New(rand.NewPCG(7, 7))
	data := make([][]byte, clients)
	for i := range data {
		data[i] = tsRandom(uint64(100+i), 1<<20+rng.IntN(3<<20))
	}
	for _, e := range ufProactors {
		for _, ring := range ufTinyRings {
			for _, style := range tsStyles {
				t.Run(e.String()+"/"+ring.name+"/"+string(style), func(t *testing.T) {
					ufTinyRing(t, e, ring.size, style, data)
				})
			}
		}
	}
}

// ufTinyRings are the tiny provided-buffer rings of the fault tests: 512-byte
// buffers, each taken whole by a recv, and 16 KiB ones, consumed
// incrementally where the kernel can.
var ufTinyRings = []struct {
	name string
	size int
}{
	{"whole", 512},
	{"incremental", 16 << 10},
}

func ufTinyRing(t *testing.T, e Engine, size int, style tsStyle, data [][]byte) {
	const clients = 8
	ln := listen(t, e, "tcp", WithBufferRing(4, size), WithLoops(1), WithDrainTimeout(2*tsTimeout))
	defer tsNoDrainExpired(t, ln)()
	before := ufStats(ln) // the engine may linger from the last subtest
	dry := make(chan struct{})
	conn, handler := ufGatedEcho(func(*Conn) {
		select {
		case <-dry:
		case <-time.After(tsTimeout):
		}
	})
	if style == tsInline {
		close(dry)
	}
	srv := tsServe(t, ln, style, conn, handler)
	errs := make(chan error, clients)
	for i := range clients {
		c := tsDialStd(t, "tcp", ln.Addr().String())
		go func() {
			err := tsBulkRoundTrip(c, data[i], uint64(i))
			c.Close()
			if err != nil {
				err = fmt.Errorf("client %d (%d bytes): %w", i, len(data[i]), err)
			}
			errs <- err
		}()
	}
	if style != tsInline {
		tsEventually(t, "the ring to run dry", func() bool { return ufStats(ln).ENOBUFS > before.ENOBUFS })
		close(dry)
	}
	for range clients {
		select {
		case err := <-errs:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(tsTimeout):
			// Say where the buffers are: a hang with every
			// buffer out and ENOBUFS is the ring left dry.
			t.Fatalf("timed out waiting for the bulk round trips; %v", ufStats(ln))
		}
	}
	tsEventually(t, "the server to close every connection", func() bool { return srv.live() == 0 })
	ufBuffersBack(t, ln)
	s := ufStats(ln)
	t.Logf("%v", s)
	if style != tsInline && s.Rearms == before.Rearms {
		t.Errorf("no receive was re-armed after the ring ran dry (%v)", s)
	}
	var total uint64
	for _, d := range data {
		total += uint64(len(d))
	}
	if s.BytesIn-before.BytesIn != total {
		t.Errorf("the loop received %d bytes, want the %d bytes sent", s.BytesIn-before.BytesIn, total)
	}
}

// TestUringBufferRingOneBufferPerConn: with a ring of n provided buffers,
// n connections that each sent one message must still be served when they
// send a second. (A drained buffer kept as the tail of a connection's input
// pins it out of the ring: n idle connections then pin every buffer, and
// the next receive on any of them waits for a buffer for ever.)
func TestUringBufferRingOneBufferPerConn(t *testing.T) {
	needUring(t)
	for _, e := range ufProactors {
		for _, ring := range ufTinyRings {
			for _, n := range []int{1, 4} {
				t.Run(fmt.Sprintf("%s/%s/buffers=%d", e, ring.name, n), func(t *testing.T) {
					ufOneBufferPerConn(t, e, n, ring.size)
				})
			}
		}
	}
}

func ufOneBufferPerConn(t *testing.T, e Engine, n, size int) {
	ln := listen(t, e, "tcp", WithBufferRing(n, size), WithLoops(1))
	srv := tsServeEcho(t, ln, tsNetConn)
	var cs []net.Conn
	for i := range n {
		c := tsDialStd(t, "tcp", ln.Addr().String())
		if err := ufEchoWithin(c, fmt.Sprintf("first %d", i), tsTimeout); err != nil {
			t.Fatalf("conn %d, first message: %v (%v)", i, err, ufStats(ln))
		}
		cs = append(cs, c)
	}
	for i, c := range cs {
		if err := ufEchoWithin(c, fmt.Sprintf("second %d", i), tsTimeout); err != nil {
			t.Fatalf("conn %d, second message, with %d connections on %d buffers: %v (%v)", i, n, n, err, ufStats(ln))
		}
	}
	for _, c := range cs {
		c.Close()
	}
	tsEventually(t, "the server to close every connection", func() bool { return srv.live() == 0 })
	ufBuffersBack(t, ln)
}

// ufEchoWithin is tsEchoOnce bounded by d.
func ufEchoWithin(c net.Conn, msg string, d time.Duration) error {
	defer c.SetDeadline(time.Time{})
	return tsEchoWithin(c, msg, d)
}

// TestUringTinyCQ runs 1000 connections at once through an engine whose
// rings have 8 submission and 16 completion entries: each connection does
// three echo round trips, all connections at the same time. Every echo must
// be exact, and every engine must have overflowed the CQ: its
// loop is held up (an inline handler of a second listener on the same
// engine waits) until 64 clients have sent, so 64 multishot requests
// (receives, or polls on uring-reactor) complete at once into the CQ of
// 16.
func TestUringTinyCQ(t *testing.T) {
	needUring(t)
	const conns, rounds = 1000, 3
	tsNeedNoFile(t, 2200)
	for _, e := range ufUringEngines {
		t.Run(e.String(), func(t *testing.T) {
			ln := listen(t, e, "tcp", withRingEntries(8, 16), WithLoops(1))
			srv := tsServeEcho(t, ln, tsHandler)
			addr := ln.Addr().String()
			// The staller: the same engine (same loop), an inline handler
			// that holds the loop until released.
			stallLn := listen(t, e, "tcp", withRingEntries(8, 16), WithLoops(1))
			stalled, release := make(chan struct{}), make(chan struct{})
			var stallOnce sync.Once
			tsServeHandler(t, stallLn, func(ctx context.Context, c *Conn) error {
				stallOnce.Do(func() {
					close(stalled)
					select {
					case <-release:
					case <-time.After(tsTimeout):
					}
				})
				c.Reader().Skip(c.Reader().Len())
				return nil
			}, WithInlineHandler())
			before := ufStats(ln)
			cs := make([]net.Conn, conns)
			errs := make(chan error, conns)
			var wg sync.WaitGroup
			sem := make(chan struct{}, 64) // bounds the connect burst under the backlog
			for i := range conns {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					c, err := net.DialTimeout("tcp", addr, tsTimeout)
					if err != nil {
						errs <- fmt.Errorf("conn %d: dial: %w", i, err)
						return
					}
					cs[i] = c
				})
			}
			tsWait(t, "1000 connections to open", wg.Wait)
			defer func() {
				for _, c := range cs {
					if c != nil {
						c.Close()
					}
				}
			}()
			if len(errs) > 0 {
				t.Fatal(<-errs)
			}
			tsEventually(t, "the server to accept every connection", func() bool { return srv.live() == conns })
			staller := tsDialStd(t, "tcp", stallLn.Addr().String())
			if _, err := staller.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			tsRecv(t, stalled, "the loop to be held up")
			start := make(chan struct{})
			var sent atomic.Int32
			for i, c := range cs {
				wg.Go(func() {
					<-start
					for r := range rounds {
						// Sizes vary so that echoes of different rounds
						// cannot be mistaken for each other.
						msg := fmt.Sprintf("conn %d round %d %s", i, r, strings.Repeat("x", (i+r)%97))
						c.SetDeadline(time.Now().Add(2 * tsTimeout))
						if _, err := io.WriteString(c, msg); err != nil {
							errs <- fmt.Errorf("conn %d round %d: write: %w", i, r, err)
							return
						}
						sent.Add(1)
						got := make([]byte, len(msg))
						if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
							errs <- fmt.Errorf("conn %d round %d: echo %q, %v; want %q", i, r, got, err, msg)
							return
						}
					}
				})
			}
			close(start)
			tsEventually(t, "64 clients to send while the loop is held up", func() bool { return sent.Load() >= 64 })
			close(release)
			tsWait(t, "the round trips", wg.Wait)
			close(errs)
			tsReportErrors(t, errs)
			for _, c := range cs {
				c.Close()
			}
			tsEventually(t, "the server to close every connection", func() bool { return srv.live() == 0 })
			ufBuffersBack(t, ln)
			s := ufStats(ln)
			t.Logf("%v", s)
			overflows := s.CQOverflows - before.CQOverflows
			if overflows == 0 {
				t.Errorf("CQOverflows = 0 with 64 multishot requests completing at once on a CQ of 16 (%v)", s)
			}
			if got := s.Accepts - before.Accepts; got != conns+1 {
				t.Errorf("the loop counted %d accepts, want %d and the staller", got, conns)
			}
		})
	}
}

// ufSendResult is what a TestUringPeerResetDuringSend server connection
// saw: its 32 MiB write's error.
type ufSendResult struct {
	c   *Conn
	err error
}

// ufResetSendConn serves TestUringPeerResetDuringSend in the net.Conn
// style: the first byte 'W' makes it write 32 MiB in one Write and report
// the result; 'E' makes it echo (the 'E' included).
func ufResetSendConn(results chan<- ufSendResult) func(c *Conn) {
	return func(c *Conn) {
		mode := make([]byte, 1)
		if _, err := io.ReadFull(c, mode); err != nil {
			return
		}
		if mode[0] == 'W' {
			_, err := c.Write(tsBig[:32<<20])
			results <- ufSendResult{c, err}
			return
		}
		c.Write(mode)
		tsEchoConn(c)
	}
}

// ufResetSendHandler is ufResetSendConn as a Handler: one 32 MiB
// WriteBinary and Flush.
func ufResetSendHandler(results chan<- ufSendResult) Handler {
	return func(ctx context.Context, c *Conn) error {
		r, w := c.Reader(), c.Writer()
		mode, err := r.Peek(1)
		if err != nil {
			return err
		}
		if mode[0] == 'W' {
			r.Skip(1)
			w.WriteBinary(tsBig[:32<<20])
			err := w.Flush()
			results <- ufSendResult{c, err}
			return err
		}
		return tsEchoHandler(ctx, c)
	}
}

// TestUringPeerResetDuringSend: the server writes 32 MiB to a client that
// reads 64 KiB and then closes with SO_LINGER 0 (RST). The write must fail
// (ECONNRESET, EPIPE or net.ErrClosed) within the test's bound, without a
// panic; the connection must be finalized; a client connected all along and
// a new one must still get echoes; no provided buffer may stay out.
func TestUringPeerResetDuringSend(t *testing.T) {
	needUring(t)
	for _, e := range ufUringEngines {
		for _, style := range tsBlockingStyles {
			t.Run(e.String()+"/"+string(style), func(t *testing.T) {
				ln := listen(t, e, "tcp")
				results := make(chan ufSendResult, 1)
				srv := tsServe(t, ln, style, ufResetSendConn(results), ufResetSendHandler(results))
				healthy := tsDialStd(t, "tcp", ln.Addr().String())
				if err := tsEchoOnce(healthy, "Ebefore"); err != nil {
					t.Fatalf("healthy client before the reset: %v", err)
				}
				for round := range 3 {
					c := tsDialStd(t, "tcp", ln.Addr().String()).(*net.TCPConn)
					c.SetDeadline(time.Now().Add(tsTimeout))
					if _, err := c.Write([]byte{'W'}); err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadFull(c, make([]byte, 64<<10)); err != nil {
						t.Fatalf("round %d: reading the start of the response: %v", round, err)
					}
					if err := c.SetLinger(0); err != nil {
						t.Fatal(err)
					}
					c.Close()
					res := tsRecv(t, results, "the 32 MiB write to fail after the peer's reset")
					if res.err == nil {
						t.Errorf("round %d: writing 32 MiB to a reset peer succeeded", round)
					} else if !tsWriteReset(res.err) && !errors.Is(res.err, net.ErrClosed) {
						t.Errorf("round %d: the write failed with %v, want ECONNRESET, EPIPE or net.ErrClosed", round, res.err)
					}
					tsRecv(t, res.c.fd.Done(), "the reset connection to be finalized")
					if err := tsEchoOnce(healthy, fmt.Sprintf("still here %d", round)); err != nil {
						t.Errorf("round %d: the healthy client after the reset: %v", round, err)
					}
					nc := tsDialStd(t, "tcp", ln.Addr().String())
					if err := tsEchoOnce(nc, "Ehello"); err != nil {
						t.Errorf("round %d: a new client after the reset: %v", round, err)
					}
					nc.Close()
				}
				healthy.Close()
				tsEventually(t, "the server to close every connection", func() bool { return srv.live() == 0 })
				ufBuffersBack(t, ln)
			})
		}
	}
}

// ufChildEnv gates the helper tests that TestUringAcceptEMFILE and
// TestUringForcedUnavailable run in a child process: its value names the
// helper.
const ufChildEnv = "RINGPOLL_TEST_UF_CHILD"

// ufChild returns a command running the test binary's helper test name in
// a child process, with env added to the environment (RINGPOLL_ENGINE and
// RINGPOLL_URING_SETUP_ERRNO are dropped unless env sets them).
func ufChild(name string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v", "-test.timeout=2m")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RINGPOLL_ENGINE=") && !strings.HasPrefix(kv, "RINGPOLL_URING_SETUP_ERRNO=") &&
			!strings.HasPrefix(kv, ufChildEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// ufWaitChild waits for a started child, killing it (only it, by its
// process) if it runs past the bound, and returns Wait's error.
func ufWaitChild(t testing.TB, cmd *exec.Cmd, bound time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the child %v ran past %v and was killed", cmd.Args, bound)
		return nil
	}
}

// ufLockedBuffer is a bytes.Buffer for concurrent writers (a slog handler)
// and readers.
type ufLockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *ufLockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *ufLockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestUringForcedUnavailable runs TestUringForcedUnavailableChild in a
// child process with RINGPOLL_URING_SETUP_ERRNO set to EPERM and to ENOSYS,
// as on a kernel or in a sandbox without io_uring, and checks that it ran
// and passed.
func TestUringForcedUnavailable(t *testing.T) {
	for _, errno := range []string{"EPERM", "ENOSYS"} {
		t.Run(errno, func(t *testing.T) {
			var out ufLockedBuffer
			cmd := ufChild("TestUringForcedUnavailableChild", ufChildEnv+"=unavailable", "RINGPOLL_URING_SETUP_ERRNO="+errno)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Skipf("cannot start the test binary as a child: %v", err)
			}
			err := ufWaitChild(t, cmd, 2*tsTimeout)
			if err != nil || !strings.Contains(out.String(), "--- PASS: TestUringForcedUnavailableChild") ||
				!strings.Contains(out.String(), "uf-child: fallback to epoll ok") {
				t.Fatalf("child with RINGPOLL_URING_SETUP_ERRNO=%s: %v; output:\n%s", errno, err, out.String())
			}
		})
	}
}

// TestUringForcedUnavailableChild is TestUringForcedUnavailable's child:
// with io_uring_setup failing (RINGPOLL_URING_SETUP_ERRNO), UringStatus
// names the errno; EngineAuto falls back to epoll, logging the reason once,
// and serves; every io_uring engine fails with ErrEngineUnavailable.
func TestUringForcedUnavailableChild(t *testing.T) {
	if os.Getenv(ufChildEnv) != "unavailable" {
		t.Skip("the child of TestUringForcedUnavailable")
	}
	name := os.Getenv("RINGPOLL_URING_SETUP_ERRNO")
	errno := map[string]syscall.Errno{"EPERM": syscall.EPERM, "ENOSYS": syscall.ENOSYS}[name]
	if errno == 0 {
		t.Fatalf("RINGPOLL_URING_SETUP_ERRNO=%q: want EPERM or ENOSYS", name)
	}
	status := UringStatus()
	if status == nil {
		t.Fatalf("UringStatus() = nil with RINGPOLL_URING_SETUP_ERRNO=%s", name)
	}
	if !errors.Is(status, errno) {
		t.Errorf("UringStatus() = %v, want an error wrapping %s", status, name)
	}
	// On EPERM a non-zero kernel.io_uring_disabled is named instead.
	sysctl, _ := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
	if !strings.Contains(status.Error(), name) && !(errno == syscall.EPERM && strings.TrimSpace(string(sysctl)) != "0") {
		t.Errorf("UringStatus() = %q does not mention %s", status, name)
	}

	var logs ufLockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	for i := range 2 {
		ln := listen(t, EngineAuto, "tcp", WithLogger(logger))
		if got := ln.Stats().Engine; got != EngineEpoll {
			t.Fatalf("Listen #%d with EngineAuto runs %v, want epoll", i, got)
		}
		tsServeEcho(t, ln, tsStyles[i%len(tsStyles)])
		c := tsDialStd(t, "tcp", ln.Addr().String())
		if err := tsEchoOnce(c, fmt.Sprintf("hello over the fallback %d", i)); err != nil {
			t.Errorf("echo through the epoll fallback: %v", err)
		}
	}
	c, err := Dial("tcp", "127.0.0.1:1", WithLogger(logger))
	if c != nil {
		c.Close()
	}
	if err == nil || errors.Is(err, ErrEngineUnavailable) {
		t.Errorf("Dial with EngineAuto to a closed port returned %v, want a connection error", err)
	}

	for _, e := range ufUringEngines {
		ln, err := Listen("tcp", "127.0.0.1:0", WithEngine(e), WithLogger(logger))
		if ln != nil {
			ln.Close()
		}
		if !errors.Is(err, ErrEngineUnavailable) || !errors.Is(err, errno) {
			t.Errorf("Listen with %v returned %v, want an error wrapping ErrEngineUnavailable and %s", e, err, name)
		}
		srv, err := NewServer(tsEchoHandler, WithEngine(e))
		if srv != nil {
			tsShutdown(srv, time.Second)
		}
		if !errors.Is(err, ErrEngineUnavailable) {
			t.Errorf("NewServer with %v returned %v, want an error wrapping ErrEngineUnavailable", e, err)
		}
	}

	got := logs.String()
	if n := strings.Count(got, "io_uring unavailable"); n != 1 {
		t.Errorf("the fallback was logged %d times, want once; log:\n%s", n, got)
	} else {
		line := got[strings.Index(got, "io_uring unavailable"):]
		line, _, _ = strings.Cut(line, "\n")
		if !strings.Contains(line, errno.Error()) {
			t.Errorf("the fallback log line does not give the reason (%q): %s", errno.Error(), line)
		}
	}
	if !t.Failed() {
		fmt.Println("uf-child: fallback to epoll ok:", status)
	}
}

// TestUringAcceptEMFILE runs a Server (engine uring) in a child process
// whose RLIMIT_NOFILE leaves room for four connections, and connects eight
// clients. The four that fit must be served; the other four must wait in the
// listen backlog while Serve's accepts keep failing with EMFILE and are
// tried again after a growing backoff (not in a busy loop); the accepted clients
// must keep getting echoes meanwhile; and as clients close, the waiting
// ones must be accepted and served, two by two.
func TestUringAcceptEMFILE(t *testing.T) {
	needUring(t)
	const fits, waiting = 4, 4
	cmd := ufChild("TestUringAcceptEMFILEChild", ufChildEnv+"=emfile", fmt.Sprintf("RINGPOLL_TEST_UF_FITS=%d", fits))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr ufLockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start the test binary as a child: %v", err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var output ufLockedBuffer // everything the child printed, for failures
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			output.Write(append(sc.Bytes(), '\n'))
			if s := sc.Text(); strings.HasPrefix(s, "uf-child: ") {
				lines <- strings.TrimPrefix(s, "uf-child: ")
			}
		}
		close(lines)
	}()
	recvLine := func(what string) string {
		t.Helper()
		select {
		case s, ok := <-lines:
			if !ok {
				cmd.Process.Kill()
				cmd.Wait()
				exited = true
				t.Fatalf("the child ended while the test waited for %s; output:\n%s\nstderr:\n%s", what, output.String(), stderr.String())
			}
			return s
		case <-time.After(tsTimeout):
			t.Fatalf("timed out waiting for the child's %s; output:\n%s\nstderr:\n%s", what, output.String(), stderr.String())
			return ""
		}
	}
	// stats asks the child for its counters.
	type childStats struct {
		accepts, failed, live, free int
	}
	stats := func() childStats {
		t.Helper()
		if _, err := io.WriteString(stdin, "stats\n"); err != nil {
			t.Fatalf("asking the child for stats: %v", err)
		}
		var s childStats
		line := recvLine("stats")
		if _, err := fmt.Sscanf(line, "stats accepts=%d failed=%d live=%d free=%d", &s.accepts, &s.failed, &s.live, &s.free); err != nil {
			t.Fatalf("bad stats line %q: %v", line, err)
		}
		return s
	}

	addr, ok := strings.CutPrefix(recvLine("address"), "addr ")
	if !ok {
		t.Fatalf("the child did not print its address; output:\n%s", output.String())
	}
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)

	// The clients that fit are accepted and served.
	var served []net.Conn
	for i := range fits {
		c := tsDialStd(t, "tcp", addr)
		if err := tsEchoOnce(c, fmt.Sprintf("fits %d", i)); err != nil {
			t.Fatalf("client %d of the %d that fit: %v", i, fits, err)
		}
		served = append(served, c)
	}
	// An accept is counted once its Conn is made, which its echo may
	// beat: wait for the count, which must then be exact.
	tsEventually(t, "the child to count its accepts", func() bool { return stats().accepts >= fits })
	if s := stats(); s.accepts != fits || s.live != fits || s.free != 0 {
		t.Fatalf("with %d clients served the child counts %+v, want %d accepts and live connections and no free descriptor", fits, s, fits)
	}

	// The rest connect (the kernel completes the handshake) and send; they
	// wait in the backlog.
	type echoResult struct {
		i   int
		err error
	}
	echoed := make(chan echoResult, waiting)
	for i := range waiting {
		c := tsDialStd(t, "tcp", addr)
		msg := fmt.Sprintf("waited %d", i)
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatalf("waiting client %d: write: %v", i, err)
		}
		go func() {
			c.SetReadDeadline(time.Now().Add(2 * tsTimeout))
			got := make([]byte, len(msg))
			_, err := io.ReadFull(c, got)
			if err == nil && string(got) != msg {
				err = fmt.Errorf("echo %q, want %q", got, msg)
			}
			echoed <- echoResult{i, err}
		}()
	}
	var queued int
	tsEventually(t, "the waiting clients to queue in the listen backlog", func() bool {
		queued, err = ufAcceptQueue(port)
		if err != nil {
			t.Skipf("reading the listen backlog: %v", err)
		}
		if queued > waiting {
			t.Fatalf("%d connections in the backlog, want %d", queued, waiting)
		}
		return queued == waiting
	})
	// Each accept attempt fails with EMFILE, accepts nothing and is logged;
	// it is tried again after a backoff (5 ms, doubling), not at once. The
	// clock starts before the first count is asked for, so a slow answer
	// can only lengthen the time measured, never shorten it.
	t0 := time.Now()
	s0 := stats()
	const retries = 3
	var s1 childStats
	tsEventually(t, "the accept to be retried", func() bool {
		s1 = stats()
		return s1.failed-s0.failed >= retries
	})
	elapsed := time.Since(t0)
	if s1.accepts != fits || s1.live != fits {
		t.Fatalf("with no descriptor free the child accepted: %+v, want %d accepts", s1, fits)
	}
	if min := retries * 5 * time.Millisecond; elapsed < min {
		t.Errorf("%d accept attempts in %v: the EMFILE backoff is not applied (want at least %v)", s1.failed-s0.failed, elapsed, min)
	}
	t.Logf("under EMFILE: %d accept attempts in %v, %d connections in the backlog", s1.failed-s0.failed, elapsed, waiting)
	if n, _ := ufAcceptQueue(port); n != waiting {
		t.Errorf("%d connections in the backlog, want %d", n, waiting)
	}
	select {
	case r := <-echoed:
		t.Fatalf("waiting client %d was answered (%v) while no descriptor was free", r.i, r.err)
	default:
	}

	// The accepted clients are still served.
	for i, c := range served {
		if err := tsEchoOnce(c, fmt.Sprintf("still served %d", i)); err != nil {
			t.Errorf("accepted client %d while the accept fails with EMFILE: %v", i, err)
		}
	}

	// Closing clients frees descriptors: as many waiting clients are
	// accepted and served.
	for round := range 2 {
		for _, c := range served[2*round : 2*round+2] {
			c.Close()
		}
		for range 2 {
			r := tsRecv(t, echoed, "a waiting client to be served after two clients closed")
			if r.err != nil {
				t.Errorf("waiting client %d: %v", r.i, r.err)
			}
		}
		want := waiting - 2*(round+1)
		tsEventually(t, "the backlog to shrink", func() bool {
			n, _ := ufAcceptQueue(port)
			return n == want
		})
		tsEventually(t, "the child to count the accepts", func() bool { return stats().accepts >= fits+2*(round+1) })
		if s := stats(); s.accepts != fits+2*(round+1) {
			t.Errorf("after %d clients closed the child counts %+v, want %d accepts", 2*(round+1), s, fits+2*(round+1))
		}
	}
	select {
	case r := <-echoed:
		t.Errorf("a waiting client was answered twice? %+v", r)
	default:
	}

	// Closing stdin shuts the child down; it must pass.
	stdin.Close()
	err = ufWaitChild(t, cmd, tsTimeout)
	exited = true
	if err != nil || !strings.Contains(output.String(), "--- PASS: TestUringAcceptEMFILEChild") {
		t.Fatalf("the child: %v; output:\n%s\nstderr:\n%s", err, output.String(), stderr.String())
	}
}

// ufAcceptQueue returns the number of connections waiting to be accepted on
// the IPv4 TCP listener on port (rx_queue of its LISTEN row in
// /proc/net/tcp).
func ufAcceptQueue(port int) (int, error) {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	local := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		// sl local_address rem_address st tx_queue:rx_queue ...
		if len(f) < 5 || !strings.HasSuffix(f[1], local) || f[3] != "0A" {
			continue
		}
		_, rx, _ := strings.Cut(f[4], ":")
		n, err := strconv.ParseInt(rx, 16, 64)
		return int(n), err
	}
	return 0, fmt.Errorf("no listener on port %d in /proc/net/tcp", port)
}

// TestUringAcceptEMFILEChild is TestUringAcceptEMFILE's child: an echo
// Server on engine uring whose RLIMIT_NOFILE leaves RINGPOLL_TEST_UF_FITS
// descriptors free. It prints "uf-child: addr ADDR", answers each "stats"
// line on stdin, and shuts down when stdin closes.
func TestUringAcceptEMFILEChild(t *testing.T) {
	if os.Getenv(ufChildEnv) != "emfile" {
		t.Skip("the child of TestUringAcceptEMFILE")
	}
	fits, err := strconv.Atoi(os.Getenv("RINGPOLL_TEST_UF_FITS"))
	if err != nil {
		t.Fatal(err)
	}
	// A first listener starts the engine, so that its ring and
	// descriptors exist before the limit is lowered.
	listen(t, EngineUring, "tcp", WithLoops(1))
	// The lowest free descriptor is taken first, so a limit with exactly n
	// unused numbers under it admits n more descriptors: the listener's two
	// (its socket and the engine's duplicate) and fits connections.
	const listenerFDs = 2
	limit := 0
	for free := 0; free < fits+listenerFDs || ufFDOpen(limit); limit++ {
		if !ufFDOpen(limit) {
			free++
		}
	}
	freeFDs := func() int {
		free := 0
		for fd := range limit {
			if !ufFDOpen(fd) {
				free++
			}
		}
		return free
	}
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: uint64(limit), Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
		}
	}
	defer restore()
	ln := listen(t, EngineUring, "tcp", WithLoops(1))
	var failed atomic.Int64
	srv := tsServeHandler(t, ln, tsEchoHandler, WithLogger(slog.New(emfileLog{&failed})))
	if free := freeFDs(); free != fits {
		t.Fatalf("%d descriptors free under RLIMIT_NOFILE %d after Listen, want %d", free, limit, fits)
	}
	fmt.Printf("uf-child: addr %s\n", ln.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() != "stats" {
			continue
		}
		s := ufStats(ln)
		fmt.Printf("uf-child: stats accepts=%d failed=%d live=%d free=%d\n", s.Accepts, failed.Load(), srv.live(), freeFDs())
	}
	restore()
}

// ufFDOpen reports whether descriptor fd is open, without opening one.
func ufFDOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// TestUringRearmAfterThreadMove: a parked loop that moves to another
// thread arms its connections' input requests anew from there (cancel,
// then arm again), while traffic flows. Each loop here acts as if it moved
// every other turn (movingLoops), so the requests are cancelled and armed
// again over and over, some cancels lost and sent again, under 8 clients
// doing 300 exchanges each: every echo must be exact, requests must have
// been moved, and every provided buffer must return.
func TestUringRearmAfterThreadMove(t *testing.T) {
	needUring(t)
	for _, e := range []Engine{EngineUring, EngineUringHybrid, EngineUringReactor} {
		for _, style := range tsStyles {
			t.Run(e.String()+"/"+string(style), func(t *testing.T) {
				ln := listen(t, e, "tcp", movingLoops(2), WithLoops(1))
				before := ufStats(ln)
				srv := tsServeEcho(t, ln, style)
				errs := make(chan error, 8)
				for i := range 8 {
					c := tsDialStd(t, "tcp", ln.Addr().String())
					go func() {
						defer c.Close()
						for j := range 300 {
							if err := tsEchoOnce(c, fmt.Sprintf("client %d echo %d %s", i, j, strings.Repeat("x", j))); err != nil {
								errs <- err
								return
							}
						}
						errs <- nil
					}()
				}
				for range 8 {
					if err := tsRecv(t, errs, "the clients"); err != nil {
						t.Errorf("echo while the loop moves: %v", err)
					}
				}
				tsEventually(t, "the server to close the connections", func() bool { return srv.live() == 0 })
				ufBuffersBack(t, ln)
				s := ufStats(ln)
				if s.Parks == before.Parks {
					// Locked, as on a kernel whose multishot recv ignores
					// its byte limit: a loop that never parks never moves.
					t.Skipf("the loop never parked, so it is locked to its thread and cannot move (%v)", s)
				}
				if s.InputMoves == before.InputMoves {
					t.Errorf("no input request was armed anew (%v)", s)
				}
			})
		}
	}
}

// TestUringPauseByCancel runs input backpressure the way kernels without a
// multishot recv byte limit need it (before Linux 6.16 or so): at the
// high-water mark the loop cancels the recv and re-arms it on Resume. The
// reader waits before its first read until its connection holds the 64 KiB
// mark and the paused recv ended, so input surely pauses there (a cancel
// that misses the recv is tried again with the next completion over the
// mark); it must still get every byte in order, the recv must have been
// re-armed after it ended, and every buffer must come back.
//
// The ring holds 1 MiB (64 buffers of 16 KiB), an eighth of the data: on
// Linux 6.18 a cancel of a busy multishot recv can be lost again and
// again, and with the default 16 MiB ring a recv on uring-sqpoll was seen
// to take all 8 MiB and the end of input before any cancel landed (about
// one run in eight on 2 vCPUs), so input never paused. With a ring that
// small, a recv whose cancels all miss ends for want of buffers (ENOBUFS),
// which pauses it as surely.
func TestUringPauseByCancel(t *testing.T) {
	needUring(t)
	data := tsRandom(11, 8<<20)
	for _, e := range ufProactors {
		for _, style := range tsBlockingStyles {
			t.Run(e.String()+"/"+string(style), func(t *testing.T) {
				ln := listen(t, e, "tcp", withoutRecvLimit(), WithInputHighWater(64<<10), WithBufferRing(64, 16<<10), WithLoops(1), WithDrainTimeout(2*tsTimeout))
				defer tsNoDrainExpired(t, ln)()
				before := ufStats(ln)
				// The reader starts once input reached the mark and the
				// paused recv ended (by a cancel, or the ring ran dry), so
				// that reading must re-arm it.
				held := ufHeldAtLeast(64 << 10)
				conn, handler := ufGatedEcho(func(c *Conn) {
					held(c)
					ufPoll(func() bool {
						s := ufStats(ln)
						return s.InputCancels > before.InputCancels || s.ENOBUFS > before.ENOBUFS || c.fd.InputEnded()
					})
				})
				srv := tsServe(t, ln, style, conn, handler)
				c := tsDialStd(t, "tcp", ln.Addr().String())
				if err := tsBulkRoundTrip(c, data, 1); err != nil {
					t.Fatalf("bulk round trip with pausing by cancel: %v", err)
				}
				c.Close()
				tsEventually(t, "the server to close the connection", func() bool { return srv.live() == 0 })
				ufBuffersBack(t, ln)
				s := ufStats(ln)
				if s.InputCancels == before.InputCancels && s.ENOBUFS == before.ENOBUFS {
					t.Errorf("the recv never ended while paused at the 64 KiB mark (%v)", s)
				}
				if s.Rearms == before.Rearms {
					t.Errorf("the recv was never re-armed after it ended (%v)", s)
				}
				if got := s.BytesIn - before.BytesIn; got != uint64(len(data)) {
					t.Errorf("the loop received %d bytes, want %d", got, len(data))
				}
			})
		}
	}
}

// ufEchoLoneAndCrowd runs a lone client doing 200 strict ping-pong echoes
// against ln's echo server, then 16 clients doing 100 each at once; every
// echo must come back exact.
func ufEchoLoneAndCrowd(t *testing.T, ln *Listener) {
	t.Helper()
	lone := tsDialStd(t, "tcp", ln.Addr().String())
	for i := range 200 {
		if err := tsEchoOnce(lone, fmt.Sprintf("lone %d", i)); err != nil {
			t.Fatalf("lone client, echo %d: %v", i, err)
		}
	}
	errs := make(chan error, 16)
	for c := range 16 {
		nc := tsDialStd(t, "tcp", ln.Addr().String())
		go func() {
			for i := range 100 {
				if err := tsEchoOnce(nc, fmt.Sprintf("client %d echo %d", c, i)); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 16 {
		if err := tsRecv(t, errs, "the clients"); err != nil {
			t.Error(err)
		}
	}
}

// TestUringBusyPoll: with WithBusyPoll(200µs) an idle loop polls before it
// sleeps, on a parked loop (the default) and on a locked one (pinned by
// WithLoopCPUs): a lone client doing strict ping-pong and 16 clients at
// once must get every echo, bytes exact. The counters must show that the
// loops polled, and that once the traffic stopped a poll ran out without
// work and the loop went to sleep, so an idle server does not spin.
// uring-sqpoll polls its own way (spinFor) and refuses the option.
func TestUringBusyPoll(t *testing.T) {
	needUring(t)
	cpus := threadCPUs(t)
	if len(cpus) == 0 {
		t.FailNow() // threadCPUs said why
	}
	for _, e := range []Engine{EngineUring, EngineUringHybrid, EngineUringReactor} {
		for _, locked := range []bool{false, true} {
			for _, style := range tsStyles {
				name := e.String() + "/" + string(style)
				opts := []Option{WithBusyPoll(200 * time.Microsecond)}
				if locked {
					name += "/pinned"
					opts = append(opts, WithLoopCPUs(cpus[len(cpus)-1]))
				}
				t.Run(name, func(t *testing.T) {
					ln := listen(t, e, "tcp", opts...)
					tsServeEcho(t, ln, style)
					ufEchoLoneAndCrowd(t, ln)
					sum := func() (polls, hits, sleeps uint64) {
						for _, s := range loopStatsOf(ln) {
							polls += s.BusyPolls
							hits += s.BusyPollHits
							sleeps += s.Parks + s.EnterWait
						}
						return
					}
					// Counters have no event to wait on: the project's
					// bounded poll of a condition (tsEventually).
					t.Cleanup(func() {
						if t.Failed() {
							t.Logf("loop stats: %v", ln.Stats())
						}
					})
					tsEventually(t, "an idle loop's poll to run out without work, then a sleep", func() bool {
						polls, hits, sleeps := sum()
						return polls > hits && sleeps > 0
					})
				})
			}
		}
	}
}
