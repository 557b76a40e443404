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

// revertFixture is a tree as apply leaves it (eth0's rps_cpus 3, was 0),
// beside a file outside the tree, and a state file (mode 0644) naming the
// rps_cpus change and then bad. It returns the state file, the rps_cpus
// file, the files that must keep their contents ("keep") and one that
// must not come to be (the target of sys/nothing, a symlink to nothing).
func revertFixture(t *testing.T, bad Change) (state, rps string, keep []string, absent string) {
	t.Helper()
	root := copyTree(t, "../testdata/virtio-2cpu")
	outside := filepath.Join(filepath.Dir(root), "outside")
	passwd := filepath.Join(root, "etc", "passwd")
	rps = filepath.Join(root, "sys/class/net/eth0/queues/rx-0/rps_cpus")
	for _, f := range []struct{ path, body string }{{outside, "keep"}, {passwd, "keep"}, {rps, "3"}} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "sys", "outside")); err != nil {
		t.Fatal(err)
	}
	absent = filepath.Join(filepath.Dir(root), "nothing")
	if err := os.Symlink(absent, filepath.Join(root, "sys", "nothing")); err != nil {
		t.Fatal(err)
	}
	state = filepath.Join(root, "state.json")
	changes := []Change{{Path: "sys/class/net/eth0/queues/rx-0/rps_cpus", Old: "0", New: "3"}, bad}
	if err := SaveState(state, State{Root: root, Changes: changes}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o644); err != nil {
		t.Fatal(err)
	}
	return state, rps, []string{outside, passwd}, absent
}

// TestRevertRefusesPaths: a state file naming a path outside proc/sys
// and sys of its root, by an absolute path, "..", a path not clean or a
// symlink, is refused with the entry and the reason, and nothing is
// written, not even its good entries.
func TestRevertRefusesPaths(t *testing.T) {
	for _, tc := range []struct{ path, why string }{
		{"/etc/passwd", "absolute"},
		{"sys/../../outside", `".."`},
		{"proc/sys/net/core/../../../../outside", `".."`},
		{"sys/class/../module/haltpoll/parameters/guest_halt_poll_ns", `".."`},
		{"sys//class/net/eth0/queues/rx-0/rps_cpus", "not clean"},
		{"etc/passwd", "not under proc/sys or sys"},
		{"proc/1/comm", "not under proc/sys or sys"},
		{"proc/sysctl", "not under proc/sys or sys"},
		{"sys", "not under proc/sys or sys"},
		{"sys/outside", "leads out"},
		{"sys/nothing", "leads nowhere"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			state, rps, keep, absent := revertFixture(t, Change{Path: tc.path, Old: "written by revert", New: "x"})
			err := Revert(state, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("Revert: %v; want an error naming %q and %q", err, tc.path, tc.why)
			}
			if got := readTrim(t, rps); got != "3" {
				t.Errorf("rps_cpus reverted to %s though the state file was refused", got)
			}
			for _, f := range keep {
				if got := readTrim(t, f); got != "keep" {
					t.Errorf("%s now holds %q", f, got)
				}
			}
			if _, err := os.Lstat(absent); err == nil {
				t.Errorf("%s was created", absent)
			}
			if _, err := os.Stat(state); err != nil {
				t.Errorf("the refused state file is gone: %v", err)
			}
		})
	}
}

// TestRevertThroughSysfsLinks: as in sysfs, where sys/class/net/eth0 is a
// symlink into sys/devices, a symlink that stays under sys is followed.
func TestRevertThroughSysfsLinks(t *testing.T) {
	state, rps, _, _ := revertFixture(t, Change{Path: "proc/sys/net/core/netdev_budget", Old: "300", New: "600"})
	sys := filepath.Join(filepath.Dir(state), "sys")
	dev := filepath.Join(sys, "devices", "virtual", "net", "eth0")
	if err := os.MkdirAll(filepath.Dir(dev), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(sys, "class", "net", "eth0"), dev); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../devices/virtual/net/eth0", filepath.Join(sys, "class", "net", "eth0")); err != nil {
		t.Fatal(err)
	}
	if err := Revert(state, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, rps); got != "0" {
		t.Errorf("rps_cpus %s after revert, want 0", got)
	}
}

// TestRevertRefusesStateFile: a state file that others than its owner
// may write, one that root runs revert on but does not own, and one that
// is no regular file are refused, and nothing is written.
func TestRevertRefusesStateFile(t *testing.T) {
	good := Change{Path: "proc/sys/net/core/netdev_budget", Old: "300", New: "600"}
	for _, tc := range []struct {
		name, why string
		spoil     func(t *testing.T, state string)
	}{
		{"group-writable", "writable by group or others", func(t *testing.T, state string) { chmod(t, state, 0o664) }},
		{"others-writable", "writable by group or others", func(t *testing.T, state string) { chmod(t, state, 0o646) }},
		{"owned by nobody", "owned by uid 65534", func(t *testing.T, state string) {
			if os.Geteuid() != 0 {
				t.Skip("giving a file away needs root")
			}
			if err := os.Chown(state, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
		{"a directory", "not a regular file", func(t *testing.T, state string) {
			b, err := os.ReadFile(state)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(state); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(state, 0o755); err != nil {
				t.Fatal(err)
			}
			// The contents beside it show that the refusal is of the
			// directory, not of a state file missing.
			if err := os.WriteFile(filepath.Join(state, "state.json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, rps, _, _ := revertFixture(t, good)
			tc.spoil(t, state)
			err := Revert(state, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), state) {
				t.Errorf("Revert: %v; want an error naming %s and %q", err, state, tc.why)
			}
			if got := readTrim(t, rps); got != "3" {
				t.Errorf("rps_cpus reverted to %s though the state file was refused", got)
			}
			if _, err := os.Lstat(state); err != nil {
				t.Errorf("the refused state file is gone: %v", err)
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestSaveStateReplaces: saving over a state file that others may write,
// or that another user owns, leaves one that revert accepts.
func TestSaveStateReplaces(t *testing.T) {
	state, rps, _, _ := revertFixture(t, Change{Path: "proc/sys/net/core/netdev_budget", Old: "300", New: "600"})
	chmod(t, state, 0o666)
	if os.Geteuid() == 0 {
		if err := os.Chown(state, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Dir(state)
	changes := []Change{{Path: "sys/class/net/eth0/queues/rx-0/rps_cpus", Old: "0", New: "3"}}
	if err := SaveState(state, State{Root: root, Changes: changes}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(state); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("state file after SaveState: %v, %v; want mode 0644", st.Mode(), err)
	}
	if err := Revert(state, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, rps); got != "0" {
		t.Errorf("rps_cpus %s after revert, want 0", got)
	}
}
