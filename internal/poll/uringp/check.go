//go:build linux

package uringp

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// loopFlags are the setup flags of a loop's ring, which one locked thread
// owns, in the order uring.NewRingFallback tries them: the full set first,
// then without each feature, newest first (NO_SQARRAY 6.6, DEFER_TASKRUN
// 6.1 replaced by COOP_TASKRUN 5.19, SINGLE_ISSUER 6.0, SUBMIT_ALL 5.18).
var loopFlags = []uint32{
	uring.SetupSingleIssuer | uring.SetupDeferTaskrun | uring.SetupTaskrunFlag | uring.SetupSubmitAll | uring.SetupNoSQArray | uring.SetupCQSize,
	uring.SetupSingleIssuer | uring.SetupDeferTaskrun | uring.SetupTaskrunFlag | uring.SetupSubmitAll | uring.SetupCQSize,
	uring.SetupSingleIssuer | uring.SetupCoopTaskrun | uring.SetupTaskrunFlag | uring.SetupSubmitAll | uring.SetupCQSize,
	uring.SetupCoopTaskrun | uring.SetupTaskrunFlag | uring.SetupSubmitAll | uring.SetupCQSize,
	uring.SetupCQSize,
}

// RequiredOps are the opcodes the engines issue, each named: a kernel that
// lacks one cannot run them. TestRequiredOps checks the list against the
// requests the engines' code prepares, so it holds nothing they do not
// use (auto then falls back to epoll only for a reason that matters).
var RequiredOps = map[uint8]string{
	uring.OpRecv:        "RECV",         // multishot recv into provided buffers
	uring.OpRecvmsg:     "RECVMSG",      // multishot recvmsg of datagrams (PacketRing)
	uring.OpSend:        "SEND",         // sends of one chunk
	uring.OpSendmsg:     "SENDMSG",      // gathered sends
	uring.OpPollAdd:     "POLL_ADD",     // readiness: reactor input, POLLOUT after EAGAIN
	uring.OpRead:        "READ",         // the loop's wake-up eventfd, files
	uring.OpWrite:       "WRITE",        // files
	uring.OpFsync:       "FSYNC",        // files
	uring.OpAsyncCancel: "ASYNC_CANCEL", // closing, input backpressure
}

// fakeSetupErr, if not zero, fails every ring setup of the engines. It
// comes from the environment variable RINGPOLL_URING_SETUP_ERRNO (EPERM,
// ENOSYS or EINVAL), which makes a machine that has io_uring behave as a
// kernel or a sandbox without it, so the fallback can be tried.
var fakeSetupErr = map[string]syscall.Errno{
	"EPERM": syscall.EPERM, "ENOSYS": syscall.ENOSYS, "EINVAL": syscall.EINVAL,
}[os.Getenv("RINGPOLL_URING_SETUP_ERRNO")]

// newRing sets up a ring with the first of flagSets the kernel takes.
func newRing(entries uint32, p uring.Params, flagSets []uint32) (*uring.Ring, error) {
	if fakeSetupErr != 0 {
		return nil, os.NewSyscallError("io_uring_setup", fakeSetupErr)
	}
	return uring.NewRingFallback(entries, p, flagSets)
}

// newLoopRing sets up a loop's ring with sq submission and cq completion
// entries.
func newLoopRing(sq, cq uint32) (*uring.Ring, error) {
	return newRing(sq, uring.Params{CQEntries: cq}, loopFlags)
}

// Check reports why the io_uring engines cannot run here, or nil: a ring
// with the loops' flags is set up and probed for RequiredOps, and a
// multishot recv with a provided-buffer ring is tried on a socketpair. The
// error says what is missing (ENOSYS, EPERM from a seccomp policy,
// kernel.io_uring_disabled, an opcode or feature). It takes about a
// millisecond.
func Check() error { return onLockedThread(check) }

// onLockedThread returns f's result, run on a goroutine locked to its
// thread: a ring with SINGLE_ISSUER belongs to the thread that made it.
func onLockedThread[T any](f func() T) T {
	c := make(chan T, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		c <- f()
	}()
	return <-c
}

func check() error {
	r, err := newLoopRing(8, 16)
	if err != nil {
		return explainSetup(err)
	}
	defer r.Close()
	if r.Params.Features&uring.FeatExtArg == 0 {
		return errors.New("io_uring lacks EXT_ARG timed waits (Linux 5.11)")
	}
	if r.Params.Flags&uring.SetupSingleIssuer == 0 {
		return fmt.Errorf("io_uring lacks SINGLE_ISSUER (Linux 6.0; setup flags %#x)", r.Params.Flags)
	}
	probe, err := r.Probe()
	if err != nil {
		return err
	}
	var missing []string
	for op, name := range RequiredOps {
		if !probe.Supported(op) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("io_uring lacks opcodes %s", strings.Join(missing, ", "))
	}
	if err := selfTest(r); err != nil {
		return fmt.Errorf("io_uring self-test (multishot recv with a buffer ring, Linux 6.0): %w", err)
	}
	return nil
}

// recvLimitWorks reports whether the kernel caps a multishot recv at a
// byte count (SetRecvLimit): it arms one on a socketpair, once per
// process, and sees whether it fails with EINVAL. Where it does not, input
// backpressure cancels the recv instead, which only a locked loop does
// reliably (cancel.go).
var recvLimitWorks = sync.OnceValue(func() bool { return onLockedThread(probeRecvLimit) })

func probeRecvLimit() bool {
	r, err := newLoopRing(8, 16)
	if err != nil {
		return true // no ring: the engines will not start anyway
	}
	defer r.Close()
	rig, err := newRecvRig(r, 2)
	if err != nil {
		return true
	}
	defer rig.close()
	sqe := r.GetSQE()
	sqe.PrepRecvMultishot(rig.sock, 0, 0)
	sqe.SetRecvLimit(64)
	unix.Write(rig.peer, []byte{1})
	if _, err := r.SubmitAndWaitTimeout(1, time.Second); err != nil && !uring.IsTemporary(err) {
		return true
	}
	var cqe [1]uring.CQE
	return r.PeekCQE(cqe[:]) == 0 || cqe[0].Res != -int32(unix.EINVAL)
}

// incWorks reports whether the kernel consumes provided buffers
// incrementally (uring.PbufRingInc, 6.12): it registers such a ring on a
// socketpair, once per process, and checks that two arrivals land one
// after the other in the same buffer, that buffer still marked as having
// room (CQEFBufMore).
var incWorks = sync.OnceValue(func() bool { return onLockedThread(probeInc) })

// Incremental reports whether the kernel consumes provided buffers
// incrementally, so that rings of buffers from IncMinSize up are used so.
func Incremental() bool { return incWorks() }

func probeInc() bool {
	r, err := newLoopRing(8, 16)
	if err != nil {
		return false
	}
	defer r.Close()
	rig, err := newRecvRigFlags(r, 2, uring.PbufRingInc)
	if err != nil {
		return false
	}
	defer rig.close()
	sqe := r.GetSQE()
	sqe.PrepRecvMultishot(rig.sock, 0, 0)
	var cqe [1]uring.CQE
	off := 0
	for _, msg := range []string{"ab", "cde"} {
		if _, err := unix.Write(rig.peer, []byte(msg)); err != nil {
			return false
		}
		if _, err := r.SubmitAndWaitTimeout(1, time.Second); err != nil && !uring.IsTemporary(err) {
			return false
		}
		if r.PeekCQE(cqe[:]) != 1 {
			return false
		}
		c := cqe[0]
		if c.Res != int32(len(msg)) || c.Flags&uring.CQEFBuffer == 0 || c.Flags&uring.CQEFBufMore == 0 || c.BufID() != 0 ||
			string(rig.arena.Buf(0)[off:off+len(msg)]) != msg {
			return false
		}
		off += len(msg)
	}
	return true
}

// recvRig is what the self-tests receive with: a socketpair and a ring of
// 64-byte provided buffers (group 0).
type recvRig struct {
	arena      *uring.Arena
	br         *uring.BufRing
	sock, peer int // peer is -1 once closed
}

func newRecvRig(r *uring.Ring, n int) (*recvRig, error) { return newRecvRigFlags(r, n, 0) }

// newRecvRigFlags is newRecvRig with buffer ring registration flags.
func newRecvRigFlags(r *uring.Ring, n int, flags uint16) (*recvRig, error) {
	arena, err := uring.NewArena(n, 64)
	if err != nil {
		return nil, err
	}
	br, err := uring.NewBufRingFlags(r, n, 0, flags)
	if err != nil {
		arena.Free()
		return nil, err
	}
	for i := range n {
		br.Add(arena.Buf(i), uint16(i), i)
	}
	br.Advance(n)
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		br.Close()
		arena.Free()
		return nil, os.NewSyscallError("socketpair", err)
	}
	return &recvRig{arena: arena, br: br, sock: sp[0], peer: sp[1]}, nil
}

// closePeer closes the peer's end: the receiver reads EOF.
func (g *recvRig) closePeer() {
	if g.peer >= 0 {
		unix.Close(g.peer)
		g.peer = -1
	}
}

func (g *recvRig) close() {
	g.closePeer()
	unix.Close(g.sock)
	g.br.Close()
	g.arena.Free()
}

// explainSetup turns a failed io_uring_setup into the reason.
func explainSetup(err error) error {
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return fmt.Errorf("the kernel has no io_uring (ENOSYS): %w", err)
	case errors.Is(err, syscall.EPERM):
		if v, rerr := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); rerr == nil {
			if s := strings.TrimSpace(string(v)); s != "0" {
				return fmt.Errorf("io_uring is disabled by sysctl kernel.io_uring_disabled=%s: %w", s, err)
			}
		}
		return fmt.Errorf("io_uring is forbidden (EPERM: a seccomp profile or a security policy): %w", err)
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("the kernel's io_uring is too old for ringpoll (EINVAL for every flag set): %w", err)
	}
	return err
}

// selfTest arms a multishot recv with buffer select on a socketpair and
// checks two arrivals come as two CQEs with CQEFBuffer|CQEFMore and the
// bytes sent, then EOF as a final CQE.
func selfTest(r *uring.Ring) error {
	rig, err := newRecvRig(r, 4)
	if err != nil {
		return err
	}
	defer rig.close()
	sqe := r.GetSQE()
	sqe.PrepRecvMultishot(rig.sock, 0, 0)
	sqe.UserData = 7
	var cqes [4]uring.CQE
	for i, msg := range []string{"a", "bc", ""} {
		if msg == "" {
			rig.closePeer()
		} else if _, err := unix.Write(rig.peer, []byte(msg)); err != nil {
			return os.NewSyscallError("write", err)
		}
		if _, err := r.SubmitAndWaitTimeout(1, time.Second); err != nil && !uring.IsTemporary(err) {
			return os.NewSyscallError("io_uring_enter", err)
		}
		if n := r.PeekCQE(cqes[:]); n != 1 {
			return fmt.Errorf("arrival %d: %d CQEs, want 1", i, n)
		}
		c := cqes[0]
		if c.UserData != 7 {
			return fmt.Errorf("arrival %d: user_data %d, want 7", i, c.UserData)
		}
		if msg == "" {
			if c.Res != 0 || c.More() {
				return fmt.Errorf("EOF: res %d flags %#x, want res 0 without F_MORE", c.Res, c.Flags)
			}
			break
		}
		if c.Res != int32(len(msg)) || c.Flags&uring.CQEFBuffer == 0 || !c.More() {
			return fmt.Errorf("arrival %d: res %d flags %#x, want %d with F_BUFFER|F_MORE", i, c.Res, c.Flags, len(msg))
		}
		if got := rig.arena.Buf(int(c.BufID()))[:c.Res]; !bytes.Equal(got, []byte(msg)) {
			return fmt.Errorf("arrival %d: buffer holds %q, want %q", i, got, msg)
		}
	}
	return nil
}
