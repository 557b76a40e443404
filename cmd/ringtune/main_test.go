package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestInspectFixture(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"inspect", "-interval", "10ms", "-root", "testdata/virtio-2cpu"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"NET_RX", "eth0 (virtio2): 1 rx, 1 tx queues", "IRQ 38 virtio2-input.0, affinity 0-1", "net.core.netdev_budget = 300", "irqbalance: not running", "cpuidle: haltpoll, guest_halt_poll_ns 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"inspect", "-interval", "10ms", "-json", "-root", "testdata/mq-8cpu"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r struct {
		CPUs []struct{ CPU int } `json:"cpus"`
		Now  struct {
			NICs []struct{ Name string } `json:"nics"`
		} `json:"now"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || len(r.CPUs) != 8 || len(r.Now.NICs) != 1 {
		t.Errorf("JSON %s: %v", out.String(), err)
	}
}

func TestBadArgs(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"inspect", "-interval", "0s"}, {"inspect", "-root", "/no/such/dir"}, {"inspect", "-bogus"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || errb.Len() == 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, errb.String())
		}
	}
}

func TestPlanCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"plan", "-root", "testdata/squeeze-2cpu/before", "-then", "testdata/squeeze-2cpu/after"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"[budget] time_squeeze rising on CPU 0", "sysctl -w net.core.netdev_max_backlog=2000", "source: netdata"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
}

// TestApplyCommand: apply is a dry run unless -yes; with it, it saves the
// state that revert undoes.
func TestApplyCommand(t *testing.T) {
	root := t.TempDir() + "/root"
	if out, err := exec.Command("cp", "-a", "testdata/virtio-2cpu", root).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	rps := root + "/sys/class/net/eth0/queues/rx-0/rps_cpus"
	var out, errb bytes.Buffer
	if code := run([]string{"apply", "-interval", "10ms", "-root", root}, &out, &errb); code != 0 || !strings.Contains(out.String(), "dry run") {
		t.Fatalf("dry run: exit %d, %s %s", code, out.String(), errb.String())
	}
	if b, _ := os.ReadFile(rps); strings.TrimSpace(string(b)) != "0" {
		t.Fatalf("dry run wrote rps_cpus: %s", b)
	}
	if code := run([]string{"apply", "-yes", "-interval", "10ms", "-root", root}, &out, &errb); code != 0 {
		t.Fatalf("apply -yes: exit %d, %s", code, errb.String())
	}
	if b, _ := os.ReadFile(rps); strings.TrimSpace(string(b)) != "3" {
		t.Fatalf("apply -yes left rps_cpus at %s", b)
	}
	if code := run([]string{"revert", "-root", root}, &out, &errb); code != 0 {
		t.Fatalf("revert: exit %d, %s", code, errb.String())
	}
	if b, _ := os.ReadFile(rps); strings.TrimSpace(string(b)) != "0" {
		t.Fatalf("revert left rps_cpus at %s", b)
	}
}

// TestApplySavesAbsoluteRoot: -root given relative to the working
// directory is saved as an absolute path, so that revert run from
// another directory writes back to the same tree.
func TestApplySavesAbsoluteRoot(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-a", "testdata/virtio-2cpu", dir+"/root").CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	t.Chdir(dir)
	var out, errb bytes.Buffer
	if code := run([]string{"apply", "-yes", "-interval", "10ms", "-root", "root"}, &out, &errb); code != 0 {
		t.Fatalf("apply -yes: exit %d, %s", code, errb.String())
	}
	b, err := os.ReadFile("root/var/lib/ringtune/state.json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Root string }
	if err := json.Unmarshal(b, &st); err != nil || st.Root != dir+"/root" {
		t.Errorf("saved root %q, %v; want %s", st.Root, err, dir+"/root")
	}
	t.Chdir(dir + "/root/sys")
	if code := run([]string{"revert", "-state", dir + "/root/var/lib/ringtune/state.json"}, &out, &errb); code != 0 {
		t.Fatalf("revert from another directory: exit %d, %s", code, errb.String())
	}
	if b, _ := os.ReadFile(dir + "/root/sys/class/net/eth0/queues/rx-0/rps_cpus"); strings.TrimSpace(string(b)) != "0" {
		t.Errorf("revert from another directory left rps_cpus at %s", b)
	}
}
