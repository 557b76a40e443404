//go:build linux

package uringp

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// prepOps maps each uring.SQE Prep method to the opcode it prepares.
var prepOps = map[string]uint8{
	"PrepRecvMultishot":    uring.OpRecv,
	"PrepRecvmsgMultishot": uring.OpRecvmsg,
	"PrepSend":             uring.OpSend,
	"PrepSendmsg":          uring.OpSendmsg,
	"PrepPollMultishot":    uring.OpPollAdd,
	"PrepRead":             uring.OpRead,
	"PrepReadAt":           uring.OpRead,
	"PrepWriteAt":          uring.OpWrite,
	"PrepFsync":            uring.OpFsync,
	"PrepCancel64":         uring.OpAsyncCancel,
}

// TestRequiredOps: RequiredOps holds exactly the opcodes that this
// package's code prepares (every Prep call in its non-test files), so
// that auto falls back to epoll only when the kernel lacks one the
// engines issue.
func TestRequiredOps(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	used := map[uint8]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || !strings.HasPrefix(sel.Sel.Name, "Prep") {
				return true
			}
			op, ok := prepOps[sel.Sel.Name]
			if !ok {
				t.Errorf("%s: %s is not in prepOps: add its opcode there and to RequiredOps", fset.Position(sel.Pos()), sel.Sel.Name)
				return true
			}
			used[op] = sel.Sel.Name
			return true
		})
	}
	for op, prep := range used {
		if _, ok := RequiredOps[op]; !ok {
			t.Errorf("the engines issue opcode %d (%s), which RequiredOps lacks", op, prep)
		}
	}
	for op, name := range RequiredOps {
		if _, ok := used[op]; !ok {
			t.Errorf("RequiredOps demands %s (opcode %d), which no engine issues", name, op)
		}
	}
}

// TestCheck: the availability check passes where io_uring works, and with
// RINGPOLL_URING_SETUP_ERRNO set it fails naming that errno.
func TestCheck(t *testing.T) {
	err := Check()
	if name := os.Getenv("RINGPOLL_URING_SETUP_ERRNO"); fakeSetupErr != 0 {
		if !errors.Is(err, fakeSetupErr) {
			t.Fatalf("Check() = %v with RINGPOLL_URING_SETUP_ERRNO=%s", err, name)
		}
		return
	}
	if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EPERM) {
		t.Skipf("io_uring unavailable here: %v", err)
	}
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
}

// TestRecvLimitProbe: recvLimitWorks agrees with the kernel. Where it
// says yes, a multishot recv capped at 64 bytes ends by itself (a CQE
// without F_MORE) once 100 bytes came; where it says no, such a recv fails
// with EINVAL.
func TestRecvLimitProbe(t *testing.T) {
	works := recvLimitWorks()
	err := onLockedThread(func() error {
		r, err := newLoopRing(8, 16)
		if err != nil {
			return errSkip{err}
		}
		defer r.Close()
		rig, err := newRecvRig(r, 4)
		if err != nil {
			return errSkip{err}
		}
		defer rig.close()
		sqe := r.GetSQE()
		sqe.PrepRecvMultishot(rig.sock, 0, 0)
		sqe.SetRecvLimit(64)
		if _, err := unix.Write(rig.peer, make([]byte, 100)); err != nil {
			return err
		}
		var got int32
		var cqes [4]uring.CQE
		for range 4 {
			if _, err := r.SubmitAndWaitTimeout(1, time.Second); err != nil && !uring.IsTemporary(err) {
				return err
			}
			n := r.PeekCQE(cqes[:])
			for _, c := range cqes[:n] {
				switch {
				case !works && c.Res == -int32(unix.EINVAL):
					return nil
				case c.Res < 0:
					return fmt.Errorf("recv with a limit: res %d, and recvLimitWorks says %v", c.Res, works)
				}
				got += c.Res
				if !c.More() {
					if !works || got != 64 {
						return fmt.Errorf("recv with a limit of 64 ended after %d bytes; recvLimitWorks says %v", got, works)
					}
					return nil
				}
			}
		}
		return fmt.Errorf("recv with a limit of 64 took %d bytes and goes on; recvLimitWorks says %v", got, works)
	})
	var skip errSkip
	if errors.As(err, &skip) {
		t.Skipf("io_uring unavailable: %v", skip.err)
	}
	if err != nil {
		t.Error(err)
	}
}

type errSkip struct{ err error }

func (e errSkip) Error() string { return e.err.Error() }
