//go:build linux

package uringp

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// prepOps maps each uring.SQE Prep method to the opcode it prepares.
var prepOps = map[string]uint8{
	"PrepRecvMultishot":   uring.OpRecv,
	"PrepSend":            uring.OpSend,
	"PrepSendmsg":         uring.OpSendmsg,
	"PrepMultishotAccept": uring.OpAccept,
	"PrepPollMultishot":   uring.OpPollAdd,
	"PrepRead":            uring.OpRead,
	"PrepCancel64":        uring.OpAsyncCancel,
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
