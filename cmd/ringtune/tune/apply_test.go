package tune

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// copyTree copies a fixture into a temporary directory the test may
// write.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestFileAction(t *testing.T) {
	for cmd, want := range map[string][2]string{
		"echo 3 > /sys/class/net/eth0/queues/rx-0/rps_cpus": {"sys/class/net/eth0/queues/rx-0/rps_cpus", "3"},
		"sysctl -w net.core.netdev_budget=600":              {"proc/sys/net/core/netdev_budget", "600"},
	} {
		p, v, ok := fileAction(cmd)
		if !ok || p != want[0] || v != want[1] {
			t.Errorf("fileAction(%q) = %q, %q, %v", cmd, p, v, ok)
		}
	}
	for _, cmd := range []string{"ethtool -L eth0 combined 4", "taskset -a -cp 1 PID", "echo nothing"} {
		if _, _, ok := fileAction(cmd); ok {
			t.Errorf("fileAction(%q) took it as a file write", cmd)
		}
	}
}

// TestApplyRevert: a dry run writes nothing; -yes writes each setting,
// and Revert from the saved state puts every old value back.
func TestApplyRevert(t *testing.T) {
	root := copyTree(t, "../testdata/squeeze-2cpu/after")
	fs := Plan(fixtureRates(t, "../testdata/squeeze-2cpu/before", root))
	rps := filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	budget := filepath.Join(root, "proc/sys/net/core/netdev_budget")
	if _, err := Apply(root, fs, true, io.Discard); err != nil {
		t.Fatal(err)
	}
	if readTrim(t, rps) != "0" || readTrim(t, budget) != "300" {
		t.Fatal("the dry run wrote")
	}
	changes, err := Apply(root, fs, false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 6 || readTrim(t, rps) != "3" || readTrim(t, budget) != "600" {
		t.Fatalf("%d changes, rps_cpus %s, netdev_budget %s", len(changes), readTrim(t, rps), readTrim(t, budget))
	}
	state := filepath.Join(root, "state.json")
	if err := SaveState(state, State{Root: root, Changes: changes}); err != nil {
		t.Fatal(err)
	}
	if err := Revert(state, io.Discard); err != nil {
		t.Fatal(err)
	}
	if readTrim(t, rps) != "0" || readTrim(t, budget) != "300" {
		t.Errorf("after revert: rps_cpus %s, netdev_budget %s", readTrim(t, rps), readTrim(t, budget))
	}
	if err := Revert(state, io.Discard); err == nil || !strings.Contains(err.Error(), "nothing to revert") {
		t.Errorf("second revert: %v", err)
	}
}

// TestApplyRefuses: a setting this kernel lacks stops the whole plan
// before anything is written, and the errors of a read-only /sys and of
// missing rights say so.
func TestApplyRefuses(t *testing.T) {
	root := copyTree(t, "../testdata/virtio-2cpu")
	fs := Plan(fixtureRates(t, root, ""))
	os.Remove(filepath.Join(root, "proc/sys/net/core/wmem_max"))
	if _, err := Apply(root, fs, false, io.Discard); err == nil || !strings.Contains(err.Error(), "wmem_max") {
		t.Fatalf("Apply with a setting missing: %v", err)
	}
	if got := readTrim(t, filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")); got != "0" {
		t.Errorf("rps_cpus written (%s) though the plan was refused", got)
	}
	if err := classify("sys/x", &os.PathError{Op: "open", Path: "x", Err: syscall.EROFS}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("EROFS: %v", err)
	}
	if err := classify("sys/x", &os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}); !errors.Is(err, ErrPermission) {
		t.Errorf("EACCES: %v", err)
	}
}
