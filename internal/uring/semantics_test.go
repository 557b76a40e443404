//go:build linux

package uring

// Kernel-semantics regression tests: each turns a behaviour of io_uring
// that the engines rely on (verified on Linux 6.18) into an assert, and
// skips with the reason when the kernel lacks the feature.
//
// Threads: the rings have the engines' loop flags (testLoopFlags:
// SINGLE_ISSUER|DEFER_TASKRUN), which only the creating thread may enter
// or register with. Each test
// locks its own goroutine to its OS thread for its whole run, cleanups
// included (the testing package runs them on the test's goroutine), so
// every ring operation, BufRing.Close included, happens on the owner
// thread. t.Fatal stays legal because it is called from the test goroutine.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testLoopFlags are the setup flags the engines' loops try, best first
// (uringp's loopFlags).
var testLoopFlags = []uint32{
	SetupSingleIssuer | SetupDeferTaskrun | SetupTaskrunFlag | SetupSubmitAll | SetupNoSQArray | SetupCQSize,
	SetupSingleIssuer | SetupDeferTaskrun | SetupTaskrunFlag | SetupSubmitAll | SetupCQSize,
}

// reapTimeout bounds every wait for a CQE that must come.
const reapTimeout = 5 * time.Second

// harness owns one ring and everything a test opens, and closes it all in
// a cleanup on the (locked) test goroutine.
type harness struct {
	t      *testing.T
	r      *Ring
	fds    []int
	brs    []*BufRing
	arenas []*Arena
}

// newHarness locks the test goroutine to its thread, records the open
// descriptors, and sets up a loop ring with sq and cq entries.
func newHarness(t *testing.T, sq, cq uint32) *harness {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread) // runs last: after the ring is closed
	checkFDLeak(t)
	r, err := NewRingFallback(sq, Params{CQEntries: cq}, testLoopFlags)
	if err != nil {
		if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
			t.Skipf("io_uring unavailable: %v", err)
		}
		t.Fatalf("a loop ring (%d, %d): %v", sq, cq, err)
	}
	h := &harness{t: t, r: r}
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() {
	for i := len(h.brs) - 1; i >= 0; i-- {
		if err := h.brs[i].Close(); err != nil {
			h.t.Errorf("BufRing.Close: %v", err)
		}
	}
	if err := h.r.Close(); err != nil {
		h.t.Errorf("Ring.Close: %v", err)
	}
	for _, a := range h.arenas {
		if err := a.Free(); err != nil {
			h.t.Errorf("Arena.Free: %v", err)
		}
	}
	for _, fd := range h.fds {
		unix.Close(fd)
	}
}

// track makes the harness close fd at the end of the test.
func (h *harness) track(fd int) int {
	h.fds = append(h.fds, fd)
	return fd
}

// closeFD closes a tracked fd now.
func (h *harness) closeFD(fd int) {
	h.t.Helper()
	i := slices.Index(h.fds, fd)
	if i < 0 {
		h.t.Fatalf("closeFD(%d): not tracked", fd)
	}
	h.fds = slices.Delete(h.fds, i, i+1)
	if err := unix.Close(fd); err != nil {
		h.t.Fatalf("close(%d): %v", fd, err)
	}
}

// socketpair returns a connected non-blocking AF_UNIX stream pair.
func (h *harness) socketpair() (a, b int) {
	h.t.Helper()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		h.t.Fatalf("socketpair: %v", err)
	}
	return h.track(sp[0]), h.track(sp[1])
}

func (h *harness) write(fd int, s string) {
	h.t.Helper()
	if n, err := unix.Write(fd, []byte(s)); err != nil || n != len(s) {
		h.t.Fatalf("write(%d, %q) = %d, %v", fd, s, n, err)
	}
}

// requireOps skips the test unless the kernel supports every opcode.
func (h *harness) requireOps(ops ...uint8) {
	h.t.Helper()
	p, err := h.r.Probe()
	if err != nil {
		h.t.Skipf("cannot probe opcodes (IORING_REGISTER_PROBE, Linux 5.6): %v", err)
	}
	for _, op := range ops {
		if !p.Supported(op) {
			h.t.Skipf("kernel lacks opcode %d (last_op %d)", op, p.LastOp)
		}
	}
}

// bufRing registers a buffer ring of n buffers of size bytes as group
// bgid, fills it with buffer i (bid i) at ring position i, and publishes
// them all.
func (h *harness) bufRing(n, size int, bgid uint16) (*BufRing, *Arena) {
	h.t.Helper()
	return h.bufRingFlags(n, size, bgid, 0)
}

// bufRingFlags is bufRing with registration flags.
func (h *harness) bufRingFlags(n, size int, bgid, flags uint16) (*BufRing, *Arena) {
	h.t.Helper()
	arena, err := NewArena(n, size)
	if err != nil {
		h.t.Fatalf("NewArena: %v", err)
	}
	h.arenas = append(h.arenas, arena)
	br, err := NewBufRingFlags(h.r, n, bgid, flags)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) {
			h.t.Skipf("no provided-buffer rings with flags %#x (IORING_REGISTER_PBUF_RING 5.19, IOU_PBUF_RING_INC 6.12): %v", flags, err)
		}
		h.t.Fatalf("NewBufRing: %v", err)
	}
	h.brs = append(h.brs, br)
	for i := range n {
		br.Add(arena.Buf(i), uint16(i), i)
	}
	br.Advance(n)
	return br, arena
}

func (h *harness) sqe() *SQE {
	h.t.Helper()
	s := h.r.GetSQE()
	if s == nil {
		h.t.Fatal("GetSQE: submission queue full")
	}
	return s
}

func (h *harness) submit() {
	h.t.Helper()
	if _, err := h.r.Enter(h.r.Flush(), 0, 0, nil, 0); err != nil {
		h.t.Fatalf("Submit: %v", err)
	}
}

// reapUntil enters the ring (submitting anything pending) and collects
// CQEs until done accepts what was collected; it fails the test after
// reapTimeout.
func (h *harness) reapUntil(what string, done func([]CQE) bool) []CQE {
	h.t.Helper()
	deadline := time.Now().Add(reapTimeout)
	var got []CQE
	var buf [64]CQE
	for {
		n := h.r.PeekCQE(buf[:])
		got = append(got, buf[:n]...)
		if done(got) {
			return got
		}
		left := time.Until(deadline)
		if left <= 0 {
			h.t.Fatalf("timed out after %v waiting for %s; got %s", reapTimeout, what, fmtCQEs(got))
		}
		if _, err := h.r.SubmitAndWaitTimeout(1, left); err != nil && !IsTemporary(err) {
			h.t.Fatalf("io_uring_enter: %v", err)
		}
	}
}

// reapN collects at least n CQEs.
func (h *harness) reapN(n int) []CQE {
	h.t.Helper()
	return h.reapUntil(fmt.Sprintf("%d CQEs", n), func(c []CQE) bool { return len(c) >= n })
}

// reapFinal collects CQEs until the final one (no F_MORE) of request ud.
func (h *harness) reapFinal(ud uint64) []CQE {
	h.t.Helper()
	return h.reapUntil(fmt.Sprintf("the final CQE of %#x", ud), func(cs []CQE) bool {
		_, ok := finalOf(cs, ud)
		return ok
	})
}

// quiet collects whatever CQEs arrive within d. Tests use it only to check
// that nothing arrives, which a correct kernel makes deterministic.
func (h *harness) quiet(d time.Duration) []CQE {
	h.t.Helper()
	deadline := time.Now().Add(d)
	var got []CQE
	var buf [64]CQE
	for {
		n := h.r.PeekCQE(buf[:])
		got = append(got, buf[:n]...)
		left := time.Until(deadline)
		if left <= 0 {
			return got
		}
		if _, err := h.r.SubmitAndWaitTimeout(1, left); err != nil && !IsTemporary(err) {
			h.t.Fatalf("io_uring_enter: %v", err)
		}
	}
}

// cancel cancels request ud by user_data and returns the cancel's own CQE
// and the target's CQEs up to and including its final one (last).
func (h *harness) cancel(ud uint64) (cc CQE, target []CQE) {
	h.t.Helper()
	const cancelUD = 0xcace1
	s := h.sqe()
	s.PrepCancel64(ud, 0)
	s.UserData = cancelUD
	cs := h.reapUntil(fmt.Sprintf("cancel of %#x", ud), func(cs []CQE) bool {
		_, fin := finalOf(cs, ud)
		return fin && slices.ContainsFunc(cs, func(c CQE) bool { return c.UserData == cancelUD })
	})
	for _, c := range cs {
		switch c.UserData {
		case cancelUD:
			cc = c
		case ud:
			target = append(target, c)
		default:
			h.t.Fatalf("unexpected CQE %s while cancelling %#x", fmtCQEs([]CQE{c}), ud)
		}
	}
	return cc, target
}

// skipIfEINVAL skips the test when the first CQE of a request says the
// kernel does not know the request's flags.
func skipIfEINVAL(t *testing.T, c CQE, what string) {
	t.Helper()
	if c.Res == -int32(syscall.EINVAL) {
		t.Skipf("kernel rejects %s with EINVAL", what)
	}
}

func finalOf(cs []CQE, ud uint64) (CQE, bool) {
	for _, c := range cs {
		if c.UserData == ud && !c.More() {
			return c, true
		}
	}
	return CQE{}, false
}

func fmtCQEs(cs []CQE) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, c := range cs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "{ud=%#x res=%d flags=%#x}", c.UserData, c.Res, c.Flags)
	}
	b.WriteByte(']')
	return b.String()
}

func errno(e syscall.Errno) int32 { return -int32(e) }

// openFDs lists /proc/self/fd with raw system calls (os.ReadDir could
// initialise the runtime poller, whose epoll fd would look like a leak).
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /proc/self/fd: %v", err)
	}
	defer unix.Close(dir)
	fds := map[string]string{}
	buf := make([]byte, 8192)
	for {
		n, err := unix.ReadDirent(dir, buf)
		if err != nil {
			t.Fatalf("getdents /proc/self/fd: %v", err)
		}
		if n == 0 {
			break
		}
		_, _, names := syscall.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			target, _ := os.Readlink("/proc/self/fd/" + name)
			fds[name] = target
		}
	}
	delete(fds, fmt.Sprint(dir))
	return fds
}

// checkFDLeak fails the test if it ends with descriptors open that were
// not open when it started. Register it before anything that opens fds, so
// its cleanup runs after theirs.
func checkFDLeak(t *testing.T) {
	t.Helper()
	before := openFDs(t)
	t.Cleanup(func() {
		after := openFDs(t)
		var leaked []string
		for fd, target := range after {
			if _, ok := before[fd]; !ok {
				leaked = append(leaked, fd+" -> "+target)
			}
		}
		if len(after) != len(before) || len(leaked) > 0 {
			slices.Sort(leaked)
			t.Errorf("fd leak: %d open before the test, %d after; new: %v", len(before), len(after), leaked)
		}
	})
}

// TestMultishotRecv: two separate arrivals on a socketpair give two CQEs of
// one request, each with F_BUFFER|F_MORE, the bytes in the buffer the bid
// names, and the bids in ring order.
func TestMultishotRecv(t *testing.T) {
	h := newHarness(t, 8, 64)
	h.requireOps(OpRecv)
	br, arena := h.bufRing(4, 64, 1)
	a, b := h.socketpair()
	const ud = 0x5ec0001
	s := h.sqe()
	s.PrepRecvMultishot(a, 0, br.Bgid)
	s.UserData = ud
	h.submit()
	for i, msg := range []string{"first", "second!"} {
		h.write(b, msg)
		cs := h.reapN(1)
		if len(cs) != 1 {
			t.Fatalf("arrival %d: %s, want one CQE", i, fmtCQEs(cs))
		}
		c := cs[0]
		skipIfEINVAL(t, c, "multishot recv (Linux 6.0)")
		if c.UserData != ud || c.Res != int32(len(msg)) || c.Flags&CQEFBuffer == 0 || !c.More() {
			t.Fatalf("arrival %d: %s, want ud=%#x res=%d with F_BUFFER|F_MORE", i, fmtCQEs(cs), ud, len(msg))
		}
		// The kernel takes buffers from the ring head: bid 0, then 1.
		if c.BufID() != uint16(i) {
			t.Errorf("arrival %d: bid %d, want %d (ring order)", i, c.BufID(), i)
		}
		if got := arena.Buf(int(c.BufID()))[:c.Res]; string(got) != msg {
			t.Errorf("arrival %d: buffer %d holds %q, want %q", i, c.BufID(), got, msg)
		}
	}
	cc, fin := h.cancel(ud)
	if cc.Res != 0 || len(fin) != 1 || fin[0].Res != errno(syscall.ECANCELED) {
		t.Errorf("cancel: own CQE %s, target %s; want res 0 and one -ECANCELED", fmtCQEs([]CQE{cc}), fmtCQEs(fin))
	}
}

// TestMultishotRecvIncremental: with IOU_PBUF_RING_INC each arrival takes
// only the bytes it needs from the buffer at the ring's head, starting
// where the one before ended, and says CQEFBufMore while the buffer has
// room left; the arrival that fills it lacks the flag, and the next one
// starts the next buffer. The EOF that ends the request takes nothing:
// uringp relies on its flags (logged) carrying no buffer it must count.
func TestMultishotRecvIncremental(t *testing.T) {
	h := newHarness(t, 8, 64)
	h.requireOps(OpRecv)
	br, arena := h.bufRingFlags(2, 64, 3, PbufRingInc)
	a, b := h.socketpair()
	const ud = 0x5ec0003
	s := h.sqe()
	s.PrepRecvMultishot(a, 0, br.Bgid)
	s.UserData = ud
	h.submit()
	fill := strings.Repeat("f", 60)
	type piece struct {
		bid      uint16
		from, to int
		more     bool
	}
	for i, step := range []struct {
		msg  string
		want []piece
	}{
		{"abc", []piece{{0, 0, 3, true}}},
		{"defgh", []piece{{0, 3, 8, true}}},
		// 56 bytes finish buffer 0, the other 4 start buffer 1.
		{fill, []piece{{0, 8, 64, false}, {1, 0, 4, true}}},
	} {
		h.write(b, step.msg)
		cs := h.reapN(len(step.want))
		skipIfEINVAL(t, cs[0], "multishot recv (Linux 6.0)")
		if len(cs) != len(step.want) {
			t.Fatalf("arrival %d: %s, want %d CQEs", i, fmtCQEs(cs), len(step.want))
		}
		got := ""
		for j, c := range cs {
			w := step.want[j]
			if c.UserData != ud || c.Flags&CQEFBuffer == 0 || !c.More() || c.BufID() != w.bid ||
				c.Res != int32(w.to-w.from) || (c.Flags&CQEFBufMore != 0) != w.more {
				t.Fatalf("arrival %d, CQE %d: %s, want bid %d res %d buf_more %v", i, j, fmtCQEs(cs), w.bid, w.to-w.from, w.more)
			}
			got += string(arena.Buf(int(w.bid))[w.from:w.to])
		}
		if got != step.msg {
			t.Fatalf("arrival %d: buffers hold %q, want %q", i, got, step.msg)
		}
	}
	h.closeFD(b)
	cs := h.reapFinal(ud)
	if c := cs[len(cs)-1]; c.Res != 0 || c.More() {
		t.Fatalf("EOF: %s, want res 0 without F_MORE", fmtCQEs(cs))
	}
	t.Logf("EOF CQE: %s", fmtCQEs(cs))
}

// TestMultishotRecvEOF: the peer's close ends the multishot recv with a
// final CQE of res 0 without F_MORE, and nothing follows it.
func TestMultishotRecvEOF(t *testing.T) {
	h := newHarness(t, 8, 64)
	h.requireOps(OpRecv)
	br, arena := h.bufRing(4, 64, 2)
	a, b := h.socketpair()
	const ud = 0x5ec0002
	s := h.sqe()
	s.PrepRecvMultishot(a, 0, br.Bgid)
	s.UserData = ud
	h.submit()
	h.write(b, "x")
	cs := h.reapN(1)
	skipIfEINVAL(t, cs[0], "multishot recv (Linux 6.0)")
	if len(cs) != 1 || cs[0].Res != 1 || !cs[0].More() || arena.Buf(int(cs[0].BufID()))[0] != 'x' {
		t.Fatalf("data: %s, want one CQE res 1 with F_MORE holding \"x\"", fmtCQEs(cs))
	}
	h.closeFD(b)
	cs = h.reapFinal(ud)
	if len(cs) != 1 {
		t.Fatalf("after close: %s, want exactly the final CQE", fmtCQEs(cs))
	}
	if c := cs[0]; c.UserData != ud || c.Res != 0 || c.More() {
		t.Errorf("EOF: %s, want ud=%#x res 0 without F_MORE", fmtCQEs(cs), ud)
	}
	t.Logf("EOF CQE: %s", fmtCQEs(cs))
	if extra := h.quiet(20 * time.Millisecond); len(extra) != 0 {
		t.Errorf("CQEs after the final one: %s", fmtCQEs(extra))
	}
}

// TestMultishotRecvENOBUFSRearm: with a ring of two 512-byte buffers and
// 5000 bytes queued, each arming receives at most two buffers and then ends
// with -ENOBUFS (no F_MORE) while the rest waits in the socket; returning
// the buffers and re-arming eventually delivers every byte, in order.
func TestMultishotRecvENOBUFSRearm(t *testing.T) {
	h := newHarness(t, 8, 64)
	h.requireOps(OpRecv)
	const nbuf, bufSize, total = 2, 512, 5000
	br, arena := h.bufRing(nbuf, bufSize, 3)
	a, b := h.socketpair()
	want := make([]byte, total)
	for i := range want {
		want[i] = byte(i*7 + i>>9)
	}
	if n, err := unix.Write(b, want); err != nil || n != total {
		t.Fatalf("write: %d, %v", n, err)
	}
	const ud = 0x5ec0003
	var got []byte
	enobufs, rounds := 0, 0
	armed := false
	for len(got) < total {
		if rounds++; rounds > 4*total/(nbuf*bufSize) {
			t.Fatalf("no progress after %d arms: %d of %d bytes", rounds-1, len(got), total)
		}
		s := h.sqe()
		s.PrepRecvMultishot(a, 0, br.Bgid)
		s.UserData = ud
		h.submit()
		armed = true
		var used []uint16
		for armed && len(got) < total {
			for _, c := range h.reapN(1) {
				if c.UserData != ud {
					t.Fatalf("unexpected CQE %s", fmtCQEs([]CQE{c}))
				}
				armed = c.More()
				if c.Res < 0 {
					skipIfEINVAL(t, c, "multishot recv (Linux 6.0)")
					if c.Res != errno(syscall.ENOBUFS) || c.More() {
						t.Fatalf("arm %d: %s, want data or a final -ENOBUFS", rounds, fmtCQEs([]CQE{c}))
					}
					enobufs++
					continue
				}
				if c.Res == 0 || c.Res > bufSize || c.Flags&CQEFBuffer == 0 || c.BufID() >= nbuf {
					t.Fatalf("arm %d: %s, want 1..%d bytes in a buffer with bid < %d", rounds, fmtCQEs([]CQE{c}), bufSize, nbuf)
				}
				got = append(got, arena.Buf(int(c.BufID()))[:c.Res]...)
				used = append(used, c.BufID())
			}
		}
		if len(used) > nbuf {
			t.Fatalf("arm %d used %d buffers from a ring of %d without a refill", rounds, len(used), nbuf)
		}
		t.Logf("arm %d: %d buffers, %d bytes so far, still armed %v", rounds, len(used), len(got), armed)
		// Give the buffers back (Add + Advance) before re-arming.
		for i, bid := range used {
			br.Add(arena.Buf(int(bid)), bid, i)
		}
		br.Advance(len(used))
	}
	// Every arm but the last one ran out of buffers with data left.
	if enobufs < rounds-1 || rounds < total/(nbuf*bufSize) {
		t.Errorf("%d arms, %d ended with -ENOBUFS; want at least %d arms, all but the last ending with -ENOBUFS",
			rounds, enobufs, total/(nbuf*bufSize))
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("received %d bytes, want %d; first difference at byte %d", len(got), len(want), i)
	}
	if armed {
		cc, fin := h.cancel(ud)
		last := fin[len(fin)-1]
		if cc.Res != 0 || last.Res != errno(syscall.ECANCELED) {
			t.Errorf("cancel after the data: own %s, target %s", fmtCQEs([]CQE{cc}), fmtCQEs(fin))
		}
	}
}

// TestCancelMultishotRecv: PrepCancel64 on an armed multishot recv gives
// the cancel a CQE with res 0 and the target a final -ECANCELED CQE without
// F_MORE; afterwards arrivals produce nothing.
func TestCancelMultishotRecv(t *testing.T) {
	h := newHarness(t, 8, 64)
	h.requireOps(OpRecv, OpAsyncCancel)
	br, _ := h.bufRing(4, 64, 4)
	a, b := h.socketpair()
	const ud = 0x5ec0004
	s := h.sqe()
	s.PrepRecvMultishot(a, 0, br.Bgid)
	s.UserData = ud
	h.submit()
	if cs := h.quiet(10 * time.Millisecond); len(cs) != 0 {
		skipIfEINVAL(t, cs[0], "multishot recv (Linux 6.0)")
		t.Fatalf("CQEs with no data sent: %s", fmtCQEs(cs))
	}
	cc, fin := h.cancel(ud)
	if cc.Res != 0 {
		t.Errorf("cancel CQE res %d, want 0", cc.Res)
	}
	if len(fin) != 1 || fin[0].Res != errno(syscall.ECANCELED) || fin[0].More() {
		t.Errorf("target: %s, want one final CQE res -ECANCELED (%d) without F_MORE", fmtCQEs(fin), errno(syscall.ECANCELED))
	}
	h.write(b, "late")
	if cs := h.quiet(30 * time.Millisecond); len(cs) != 0 {
		t.Errorf("CQEs after the cancel: %s", fmtCQEs(cs))
	}
}

// TestCQOverflowFlush: 48 NOPs into a 16-entry CQ without reaping. The CQ
// fills, SQCQOverflow is raised, the rest park in the kernel (FeatNoDrop)
// where a PeekCQE that never enters cannot see them, and entering with
// EnterGetEvents and reaping yields all 48, in submission order.
func TestCQOverflowFlush(t *testing.T) {
	h := newHarness(t, 8, 16)
	if h.r.Params.Features&FeatNoDrop == 0 {
		t.Skip("kernel lacks IORING_FEAT_NODROP (Linux 5.5)")
	}
	if h.r.Params.CQEntries != 16 {
		t.Fatalf("CQ entries %d, want 16", h.r.Params.CQEntries)
	}
	const total, batch = 48, 8
	for i := 0; i < total; i += batch {
		for j := range batch {
			s := h.sqe()
			s.Opcode = OpNop
			s.UserData = uint64(i + j)
		}
		if n, err := h.r.Enter(h.r.Flush(), 0, 0, nil, 0); err != nil || n != batch {
			t.Fatalf("Submit after %d NOPs: %d, %v; want %d", i, n, err, batch)
		}
	}
	if n := h.r.CQReady(); n != 16 {
		t.Errorf("CQReady %d, want 16 (a full CQ)", n)
	}
	if h.r.SQFlags()&SQCQOverflow == 0 {
		t.Errorf("SQ flags %#x lack SQCQOverflow with %d completions for a CQ of 16", h.r.SQFlags(), total)
	}
	t.Logf("after the overflow: SQ flags %#x, cq overflow counter %d", h.r.SQFlags(), h.r.Overflow())

	var buf [64]CQE
	n := h.r.PeekCQE(buf[:])
	got := append([]CQE(nil), buf[:n]...)
	if n != 16 {
		t.Errorf("first PeekCQE: %d CQEs, want 16", n)
	}
	if n := h.r.PeekCQE(buf[:]); n != 0 {
		t.Errorf("PeekCQE without entering returned %d parked CQEs; only enter(GETEVENTS) should flush them", n)
	}
	for enters := 0; len(got) < total && enters < 16; enters++ {
		if _, err := h.r.Enter(0, 0, EnterGetEvents, nil, 0); err != nil && !IsTemporary(err) {
			t.Fatalf("Enter(GETEVENTS): %v", err)
		}
		n := h.r.PeekCQE(buf[:])
		got = append(got, buf[:n]...)
	}
	if len(got) != total {
		t.Fatalf("reaped %d CQEs, want %d", len(got), total)
	}
	for i, c := range got {
		if c.UserData != uint64(i) || c.Res != 0 {
			t.Fatalf("CQE %d: %s, want ud=%d res 0 (in submission order)", i, fmtCQEs([]CQE{c}), i)
		}
	}
	if f := h.r.SQFlags(); f&SQCQOverflow != 0 {
		t.Errorf("SQ flags %#x still have SQCQOverflow after the flush", f)
	}
	if extra := h.quiet(10 * time.Millisecond); len(extra) != 0 {
		t.Errorf("CQEs beyond the %d NOPs: %s", total, fmtCQEs(extra))
	}
}

// TestSingleIssuerEEXIST: entering a SINGLE_ISSUER ring from another OS
// thread fails with EEXIST and leaves the SQE queued; the owner thread then
// submits it.
func TestSingleIssuerEEXIST(t *testing.T) {
	h := newHarness(t, 8, 16)
	if h.r.Params.Flags&SetupSingleIssuer == 0 {
		t.Skipf("ring lacks IORING_SETUP_SINGLE_ISSUER (Linux 6.0; setup flags %#x)", h.r.Params.Flags)
	}
	const ud = 0x5ec0008
	s := h.sqe()
	s.Opcode = OpNop
	s.UserData = ud
	type result struct {
		tid                     int
		submit, wait, getevents error
	}
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // a thread of its own: the test's is locked to the test
		defer runtime.UnlockOSThread()
		res := result{tid: unix.Gettid()}
		_, res.submit = h.r.Enter(h.r.Flush(), 0, 0, nil, 0)
		_, res.wait = h.r.SubmitAndWaitTimeout(1, time.Second)
		_, res.getevents = h.r.Enter(0, 0, EnterGetEvents, nil, 0)
		done <- res
	}()
	res := <-done
	if res.tid == unix.Gettid() {
		t.Fatalf("the other goroutine ran on the owner's thread %d", res.tid)
	}
	if !errors.Is(res.submit, syscall.EEXIST) {
		t.Errorf("Submit from thread %d: %v, want EEXIST", res.tid, res.submit)
	}
	if !errors.Is(res.wait, syscall.EEXIST) {
		t.Errorf("SubmitAndWaitTimeout from thread %d: %v, want EEXIST", res.tid, res.wait)
	}
	// Without anything to submit, only DEFER_TASKRUN's wait checks the thread.
	if h.r.Params.Flags&SetupDeferTaskrun != 0 && !errors.Is(res.getevents, syscall.EEXIST) {
		t.Errorf("Enter(GETEVENTS) from thread %d: %v, want EEXIST", res.tid, res.getevents)
	}
	if n := h.r.SQReady(); n != 1 {
		t.Errorf("SQReady %d after the refused submits, want 1", n)
	}
	cs := h.reapN(1)
	if len(cs) != 1 || cs[0].UserData != ud || cs[0].Res != 0 {
		t.Errorf("owner's submit: %s, want the NOP ud=%#x res 0", fmtCQEs(cs), ud)
	}
}

// TestMultishotAccept: one multishot accept on a listening TCP socket gives
// one CQE per connection, each a valid fd (with the accept4 flags asked
// for) connected to one of the clients, and F_MORE.
func TestMultishotAccept(t *testing.T) {
	h := newHarness(t, 8, 64)
	h.requireOps(OpAccept, OpAsyncCancel)
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	h.track(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	if err := unix.Listen(lfd, 16); err != nil {
		t.Fatalf("listen: %v", err)
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	addr := sa.(*unix.SockaddrInet4)
	const ud = 0x5ec0009
	s := h.sqe()
	s.PrepMultishotAccept(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	s.UserData = ud
	h.submit()

	const clients = 3
	ports := map[int]bool{}
	for range clients {
		c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("socket: %v", err)
		}
		h.track(c)
		if err := unix.Connect(c, addr); err != nil {
			t.Fatalf("connect: %v", err)
		}
		local, err := unix.Getsockname(c)
		if err != nil {
			t.Fatalf("getsockname: %v", err)
		}
		ports[local.(*unix.SockaddrInet4).Port] = true
	}
	cs := h.reapN(clients)
	for _, c := range cs {
		if c.Res >= 0 && c.UserData == ud {
			h.track(int(c.Res))
		}
	}
	skipIfEINVAL(t, cs[0], "multishot accept (Linux 5.19)")
	if len(cs) != clients {
		t.Fatalf("CQEs %s, want %d", fmtCQEs(cs), clients)
	}
	for _, c := range cs {
		if c.UserData != ud || c.Res < 0 || !c.More() {
			t.Errorf("accept CQE %s, want ud=%#x, a descriptor, F_MORE", fmtCQEs([]CQE{c}), ud)
			continue
		}
		fd := int(c.Res)
		peer, err := unix.Getpeername(fd)
		if err != nil {
			t.Errorf("getpeername(%d): %v", fd, err)
			continue
		}
		p := peer.(*unix.SockaddrInet4).Port
		if !ports[p] {
			t.Errorf("accepted fd %d is connected to port %d: not a client, or a client accepted twice", fd, p)
		}
		delete(ports, p)
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
			t.Errorf("accepted fd %d: F_GETFL %#x, %v; want O_NONBLOCK (SOCK_NONBLOCK)", fd, fl, err)
		}
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
			t.Errorf("accepted fd %d: F_GETFD %#x, %v; want FD_CLOEXEC (SOCK_CLOEXEC)", fd, fl, err)
		}
	}
	cc, fin := h.cancel(ud)
	if cc.Res != 0 || len(fin) != 1 || fin[0].Res != errno(syscall.ECANCELED) {
		t.Errorf("cancel: own %s, target %s; want res 0 and one -ECANCELED", fmtCQEs([]CQE{cc}), fmtCQEs(fin))
	}
}

// TestMultishotPoll: a multishot POLL_ADD reports readiness in res (not in
// flags) with F_MORE, stays armed, and reports a new edge after the socket
// is drained, without re-arming.
func TestMultishotPoll(t *testing.T) {
	h := newHarness(t, 8, 64)
	h.requireOps(OpPollAdd, OpAsyncCancel)
	a, b := h.socketpair()
	const ud = 0x5ec000a
	s := h.sqe()
	s.PrepPollMultishot(a, unix.POLLIN)
	s.UserData = ud
	h.submit()
	if cs := h.quiet(10 * time.Millisecond); len(cs) != 0 {
		skipIfEINVAL(t, cs[0], "multishot poll (Linux 5.13)")
		t.Fatalf("CQEs before any data: %s", fmtCQEs(cs))
	}
	checkPollCQE := func(what string, c CQE) {
		t.Helper()
		if c.UserData != ud || c.Res < 0 || c.Res&unix.POLLIN == 0 || !c.More() {
			t.Errorf("%s: %s, want ud=%#x, POLLIN in res, F_MORE", what, fmtCQEs([]CQE{c}), ud)
		}
	}
	h.write(b, "1")
	cs := h.reapN(1)
	skipIfEINVAL(t, cs[0], "multishot poll (Linux 5.13)")
	for _, c := range cs {
		checkPollCQE("first write", c)
	}
	// A second write while the first byte is unread. URING-NOTES recorded
	// "no new CQE while data stays unread"; on 6.18 each wake-up whose
	// CQE was already reaped posts a new one. Either is timing (wake-ups
	// that land before the task work runs fold into one CQE), so only
	// record it: at most one CQE per write, each well-formed.
	h.write(b, "2")
	extra := h.quiet(30 * time.Millisecond)
	t.Logf("second write with data unread: %d more CQEs %s", len(extra), fmtCQEs(extra))
	if len(extra) > 1 {
		t.Errorf("one write made %d CQEs: %s", len(extra), fmtCQEs(extra))
	}
	for _, c := range extra {
		checkPollCQE("second write", c)
	}
	// Drain to EAGAIN; the next arrivals are a new edge on the same
	// request, without re-arming: at least one CQE, at most one per write.
	drain := func(want int) {
		t.Helper()
		var tmp [16]byte
		if n, err := unix.Read(a, tmp[:]); err != nil || n != want {
			t.Fatalf("read: %d, %v; want %d bytes", n, err, want)
		}
		if _, err := unix.Read(a, tmp[:]); err != unix.EAGAIN {
			t.Fatalf("read of a drained socket: %v, want EAGAIN", err)
		}
	}
	drain(2)
	h.write(b, "3")
	h.write(b, "4")
	cs = h.reapN(1)
	cs = append(cs, h.quiet(30*time.Millisecond)...)
	t.Logf("two writes after draining, before entering: %d CQEs %s", len(cs), fmtCQEs(cs))
	if len(cs) > 2 {
		t.Errorf("two writes made %d CQEs: %s", len(cs), fmtCQEs(cs))
	}
	for _, c := range cs {
		checkPollCQE("writes after draining", c)
	}
	drain(2)
	cc, fin := h.cancel(ud)
	if cc.Res != 0 || len(fin) == 0 || fin[len(fin)-1].Res != errno(syscall.ECANCELED) {
		t.Errorf("cancel: own %s, target %s; want res 0 and a final -ECANCELED", fmtCQEs([]CQE{cc}), fmtCQEs(fin))
	}
}

// TestBufRingHead: after the kernel consumed k buffers, Head() (from
// IORING_REGISTER_PBUF_STATUS) moved by k, and Tail()-Head() counts the
// buffers still available.
func TestBufRingHead(t *testing.T) {
	h := newHarness(t, 8, 64)
	h.requireOps(OpRecv)
	const nbuf = 8
	br, arena := h.bufRing(nbuf, 64, 6)
	h0, err := br.Head()
	if errors.Is(err, syscall.EINVAL) {
		t.Skipf("no IORING_REGISTER_PBUF_STATUS (Linux 6.8): %v", err)
	}
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if br.Tail()-h0 != nbuf {
		t.Errorf("initial Tail %d - Head %d, want %d", br.Tail(), h0, nbuf)
	}
	a, b := h.socketpair()
	const ud = 0x5ec000b
	s := h.sqe()
	s.PrepRecvMultishot(a, 0, br.Bgid)
	s.UserData = ud
	h.submit()
	const k = 3
	var used []uint16
	for i := range k {
		msg := fmt.Sprintf("msg%d", i)
		h.write(b, msg)
		cs := h.reapN(1)
		skipIfEINVAL(t, cs[0], "multishot recv (Linux 6.0)")
		if len(cs) != 1 || cs[0].Res != int32(len(msg)) || cs[0].Flags&CQEFBuffer == 0 {
			t.Fatalf("arrival %d: %s", i, fmtCQEs(cs))
		}
		if got := string(arena.Buf(int(cs[0].BufID()))[:cs[0].Res]); got != msg {
			t.Fatalf("arrival %d: %q, want %q", i, got, msg)
		}
		used = append(used, cs[0].BufID())
	}
	hk, err := br.Head()
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if hk-h0 != k {
		t.Errorf("Head moved %d (from %d to %d) after %d buffers were consumed, want %d", hk-h0, h0, hk, k, k)
	}
	if br.Tail()-hk != nbuf-k {
		t.Errorf("Tail %d - Head %d = %d available, want %d", br.Tail(), hk, br.Tail()-hk, nbuf-k)
	}
	for i, bid := range used {
		br.Add(arena.Buf(int(bid)), bid, i)
	}
	br.Advance(len(used))
	if h2, err := br.Head(); err != nil || h2 != hk || br.Tail()-h2 != nbuf {
		t.Errorf("after returning %d buffers: Head %d (%v), Tail %d; want Head %d and %d available", k, h2, err, br.Tail(), hk, nbuf)
	}
	cc, fin := h.cancel(ud)
	if cc.Res != 0 || len(fin) != 1 || fin[0].Res != errno(syscall.ECANCELED) {
		t.Errorf("cancel: own %s, target %s", fmtCQEs([]CQE{cc}), fmtCQEs(fin))
	}
}

// TestBufRingTailTrick: Advance publishes the u16 tail at byte 14 of entry
// 0 with a 32-bit store over entry 0's bid; the bid must survive it (the
// kernel hands that bid back), and Resv must equal the tail.
func TestBufRingTailTrick(t *testing.T) {
	h := newHarness(t, 8, 64)
	h.requireOps(OpRecv)
	const nbuf = 8
	arena, err := NewArena(nbuf, 64)
	if err != nil {
		t.Fatalf("NewArena: %v", err)
	}
	h.arenas = append(h.arenas, arena)
	br, err := NewBufRing(h.r, nbuf, 7)
	if errors.Is(err, syscall.EINVAL) {
		t.Skipf("no provided-buffer rings (Linux 5.19): %v", err)
	}
	if err != nil {
		t.Fatalf("NewBufRing: %v", err)
	}
	h.brs = append(h.brs, br)
	check := func(what string, bid, tail uint16) {
		t.Helper()
		e := br.entries[0]
		raw := binary.LittleEndian.Uint16(br.mem[14:16])
		if e.Bid != bid || e.Resv != tail || raw != tail || br.Tail() != tail {
			t.Fatalf("%s: entry 0 bid %d resv %d, u16 at byte 14 = %d, Tail() %d; want bid %d and tail %d",
				what, e.Bid, e.Resv, raw, br.Tail(), bid, tail)
		}
	}
	// Bids unlike slot numbers, so a clobbered bid shows.
	br.Add(arena.Buf(0), 100, 0)
	br.Advance(1)
	check("Advance(1)", 100, 1)
	for i := 1; i < nbuf; i++ {
		br.Add(arena.Buf(i), uint16(100+i), i-1)
	}
	br.Advance(nbuf - 1)
	check("Advance(7)", 100, nbuf)

	a, b := h.socketpair()
	const ud = 0x5ec000c
	s := h.sqe()
	s.PrepRecvMultishot(a, 0, br.Bgid)
	s.UserData = ud
	h.submit()
	recv := func(i int, wantBid uint16) {
		t.Helper()
		msg := fmt.Sprintf("m%d", i)
		h.write(b, msg)
		cs := h.reapN(1)
		skipIfEINVAL(t, cs[0], "multishot recv (Linux 6.0)")
		if len(cs) != 1 || cs[0].Flags&CQEFBuffer == 0 || cs[0].BufID() != wantBid {
			t.Fatalf("arrival %d: %s, want bid %d", i, fmtCQEs(cs), wantBid)
		}
		if got := string(arena.Buf(int(wantBid) % 100)[:cs[0].Res]); got != msg {
			t.Fatalf("arrival %d: %q, want %q", i, got, msg)
		}
	}
	recv(0, 100) // slot 0, whose bid went through two 32-bit tail stores

	// Slot 0 again (tail 8 wraps to it) with a new bid: the tail store
	// must carry the new bid, and the kernel must hand it back.
	br.Add(arena.Buf(0), 200, 0)
	br.Advance(1)
	check("refill of slot 0", 200, nbuf+1)
	for i := 1; i < nbuf; i++ {
		recv(i, uint16(100+i))
	}
	recv(nbuf, 200)
	cc, fin := h.cancel(ud)
	if cc.Res != 0 || len(fin) != 1 || fin[0].Res != errno(syscall.ECANCELED) {
		t.Errorf("cancel: own %s, target %s", fmtCQEs([]CQE{cc}), fmtCQEs(fin))
	}
}

// TestSubmitAndWaitTimeoutETIME: a timed wait with nothing to complete
// fails with ETIME, which IsTemporary accepts; with a completion it
// returns without error.
func TestSubmitAndWaitTimeoutETIME(t *testing.T) {
	h := newHarness(t, 8, 16)
	if h.r.Params.Features&FeatExtArg == 0 {
		t.Skip("kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11)")
	}
	for _, d := range []time.Duration{0, 20 * time.Millisecond} {
		var err error
		for range 10 { // a signal (SIGURG, SIGPROF) may interrupt the wait
			if _, err = h.r.SubmitAndWaitTimeout(1, d); !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		if !errors.Is(err, syscall.ETIME) {
			t.Errorf("wait %v with nothing in flight: %v, want ETIME", d, err)
		}
		if !IsTemporary(err) {
			t.Errorf("IsTemporary(%v) = false", err)
		}
		if n := h.r.CQReady(); n != 0 {
			t.Errorf("CQReady %d after an empty wait", n)
		}
	}
	const ud = 0x5ec000d
	s := h.sqe()
	s.Opcode = OpNop
	s.UserData = ud
	n, err := h.r.SubmitAndWaitTimeout(1, reapTimeout)
	if err != nil || n != 1 {
		t.Fatalf("SubmitAndWaitTimeout with a NOP: %d, %v; want 1, nil", n, err)
	}
	var buf [4]CQE
	if k := h.r.PeekCQE(buf[:]); k != 1 || buf[0].UserData != ud || buf[0].Res != 0 {
		t.Errorf("after the wait: %s, want the NOP", fmtCQEs(buf[:k]))
	}
}

// TestIsTemporary: the enter errors a loop retries (URING-NOTES P23) are
// temporary, wrapped or not; EEXIST (wrong thread, a bug), EBADR (real CQE
// loss) and the rest are not.
func TestIsTemporary(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{syscall.EINTR, true},
		{syscall.ETIME, true},
		{syscall.EAGAIN, true},
		{syscall.EBUSY, true},
		{os.NewSyscallError("io_uring_enter", syscall.EINTR), true},
		{fmt.Errorf("wait: %w", syscall.ETIME), true},
		{nil, false},
		{syscall.EEXIST, false},
		{syscall.EBADR, false},
		{syscall.EBADF, false},
		{syscall.EINVAL, false},
		{syscall.ENOMEM, false},
		{syscall.ETIMEDOUT, false},
		{os.NewSyscallError("io_uring_enter", syscall.EEXIST), false},
		{errors.New("interrupted system call"), false},
	} {
		if got := IsTemporary(tc.err); got != tc.want {
			t.Errorf("IsTemporary(%#v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
