//go:build linux

package uring

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LoopFlags are the setup flags of a ring owned by one locked thread, in
// the order NewRingFallback tries them: the full set first, then without
// each feature, newest first (NO_SQARRAY 6.6, DEFER_TASKRUN 6.1 replaced by
// COOP_TASKRUN 5.19, SINGLE_ISSUER 6.0, SUBMIT_ALL 5.18).
var LoopFlags = []uint32{
	SetupSingleIssuer | SetupDeferTaskrun | SetupTaskrunFlag | SetupSubmitAll | SetupNoSQArray | SetupCQSize,
	SetupSingleIssuer | SetupDeferTaskrun | SetupTaskrunFlag | SetupSubmitAll | SetupCQSize,
	SetupSingleIssuer | SetupCoopTaskrun | SetupTaskrunFlag | SetupSubmitAll | SetupCQSize,
	SetupCoopTaskrun | SetupTaskrunFlag | SetupSubmitAll | SetupCQSize,
	SetupCQSize,
}

// NewRingFallback sets up a ring with the first of flagSets the kernel
// accepts, on top of the other settings in p (CQ size, SQPOLL). EINVAL means
// a flag is unknown or a combination illegal, so the next set is tried; any
// other error ends the search.
func NewRingFallback(entries uint32, p Params, flagSets []uint32) (*Ring, error) {
	base := p.Flags
	var err error
	for _, f := range flagSets {
		q := p
		q.Flags = base | f
		var r *Ring
		if r, err = NewRing(entries, &q); err == nil {
			return r, nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return nil, err
		}
	}
	return nil, err
}

// NewLoopRing sets up a ring for a loop's locked thread with sq submission
// and cq completion entries and the best of LoopFlags.
func NewLoopRing(sq, cq uint32) (*Ring, error) {
	return NewRingFallback(sq, Params{CQEntries: cq}, LoopFlags)
}

// RequiredOps are the opcodes ringpoll's io_uring engines use.
var RequiredOps = []uint8{OpNop, OpPollAdd, OpSendmsg, OpAccept, OpAsyncCancel, OpRead, OpSend, OpRecv, OpShutdown}

var opNames = map[uint8]string{
	OpNop: "NOP", OpPollAdd: "POLL_ADD", OpSendmsg: "SENDMSG", OpAccept: "ACCEPT",
	OpAsyncCancel: "ASYNC_CANCEL", OpRead: "READ", OpSend: "SEND", OpRecv: "RECV", OpShutdown: "SHUTDOWN",
}

// Check reports why the io_uring engines cannot run here, or nil: io_uring
// is set up and probed, and a self-test runs a multishot recv with a
// provided-buffer ring on a socketpair. The error says what is missing
// (ENOSYS, EPERM from a seccomp policy, kernel.io_uring_disabled, an
// opcode or feature). It takes about a millisecond.
func Check() error {
	errc := make(chan error, 1)
	go func() {
		// A ring with SINGLE_ISSUER belongs to the thread that made it.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		errc <- check()
	}()
	return <-errc
}

func check() error {
	r, err := NewLoopRing(8, 16)
	if err != nil {
		return explainSetup(err)
	}
	defer r.Close()
	if r.Params.Features&FeatExtArg == 0 {
		return errors.New("io_uring lacks EXT_ARG timed waits (Linux 5.11)")
	}
	if r.Params.Flags&SetupSingleIssuer == 0 {
		return fmt.Errorf("io_uring lacks SINGLE_ISSUER (Linux 6.0; setup flags %#x)", r.Params.Flags)
	}
	probe, err := r.Probe()
	if err != nil {
		return err
	}
	var missing []string
	for _, op := range RequiredOps {
		if !probe.Supported(op) {
			missing = append(missing, opNames[op])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("io_uring lacks opcodes %s", strings.Join(missing, ", "))
	}
	if err := selfTest(r); err != nil {
		return fmt.Errorf("io_uring self-test (multishot recv with a buffer ring, Linux 6.0): %w", err)
	}
	return nil
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
		return fmt.Errorf("io_uring is forbidden here (EPERM: a seccomp profile, as in Docker's default, or a security policy): %w", err)
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("the kernel's io_uring is too old for ringpoll (EINVAL for every flag set): %w", err)
	}
	return err
}

// selfTest arms a multishot recv with buffer select on a socketpair and
// checks two arrivals come as two CQEs with CQEFBuffer|CQEFMore and the
// bytes sent, then EOF as a final CQE.
func selfTest(r *Ring) error {
	arena, err := NewArena(4, 64)
	if err != nil {
		return err
	}
	defer arena.Free()
	br, err := NewBufRing(r, 4, 0)
	if err != nil {
		return err
	}
	defer br.Close()
	for i := range 4 {
		br.Add(arena.Buf(i), uint16(i), i)
	}
	br.Advance(4)
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socketpair", err)
	}
	defer unix.Close(sp[0])
	peer := sp[1]
	defer func() {
		if peer >= 0 {
			unix.Close(peer)
		}
	}()
	sqe := r.GetSQE()
	sqe.PrepRecvMultishot(sp[0], 0, 0)
	sqe.UserData = 7
	var cqes [4]CQE
	for i, msg := range []string{"a", "bc", ""} {
		if msg == "" {
			unix.Close(peer)
			peer = -1
		} else if _, err := unix.Write(peer, []byte(msg)); err != nil {
			return os.NewSyscallError("write", err)
		}
		if _, err := r.SubmitAndWaitTimeout(1, time.Second); err != nil && !IsTemporary(err) {
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
		if c.Res != int32(len(msg)) || c.Flags&CQEFBuffer == 0 || !c.More() {
			return fmt.Errorf("arrival %d: res %d flags %#x, want %d with F_BUFFER|F_MORE", i, c.Res, c.Flags, len(msg))
		}
		if got := arena.Buf(int(c.BufID()))[:c.Res]; !bytes.Equal(got, []byte(msg)) {
			return fmt.Errorf("arrival %d: buffer holds %q, want %q", i, got, msg)
		}
	}
	return nil
}
