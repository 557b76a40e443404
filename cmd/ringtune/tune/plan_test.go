package tune

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fixtureRates reads root twice (or root, then then), a second apart.
func fixtureRates(t *testing.T, root, then string) *Rates {
	t.Helper()
	a := Read(root, 0)
	if then == "" {
		then = root
	}
	b := Read(then, 0)
	b.Taken = a.Taken.Add(time.Second)
	return Compute(a, b)
}

func rules(fs []Finding) []string {
	var rs []string
	for _, f := range fs {
		rs = append(rs, f.Rule)
	}
	return rs
}

func findRule(t *testing.T, fs []Finding, rule string) Finding {
	t.Helper()
	for _, f := range fs {
		if f.Rule == rule {
			if f.Source == "" || f.Seen == "" || f.Advice == "" {
				t.Errorf("finding %+v lacks what it saw, its advice or its source", f)
			}
			return f
		}
	}
	t.Fatalf("no %q finding in %v", rule, rules(fs))
	return Finding{}
}

// TestPlanFixtures: the diagnosis expected of each fixture tree.
func TestPlanFixtures(t *testing.T) {
	for _, tc := range []struct {
		name, root, then string
		want             []string
	}{
		{"single-queue virtio, 2 CPUs, halt polling off", "../testdata/virtio-2cpu", "", []string{"rps", "buffers", "haltpoll"}},
		{"4 queues, 8 CPUs, irqbalance", "../testdata/mq-8cpu", "", []string{"rps", "buffers", "irqbalance"}},
		{"squeezes and drops, a softnet counter wrapping", "../testdata/squeeze-2cpu/before", "../testdata/squeeze-2cpu/after", []string{"rps", "budget", "backlog", "buffers"}},
		{"16 queues, 4 CPUs, mlx5-style interrupt names", "../testdata/mq-16q-4cpu", "", []string{"queues"}},
		{"single-queue virtio with RPS already set, halt polling on", "../testdata/virtio-2cpu-rps", "", []string{"rfs", "buffers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := Plan(fixtureRates(t, tc.root, tc.then))
			if got := rules(fs); !slices.Equal(got, tc.want) {
				t.Errorf("rules %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanRPS(t *testing.T) {
	f := findRule(t, Plan(fixtureRates(t, "../testdata/virtio-2cpu", "")), "rps")
	if !slices.Equal(f.Commands, []string{"echo 3 > /sys/class/net/eth0/queues/rx-0/rps_cpus"}) || !strings.Contains(f.Source, "scaling.rst") {
		t.Errorf("%+v", f)
	}
}

// TestPlanHaltPoll: a guest whose idle CPUs halt without polling is told
// to poll as the kernel does by default; apply writes the module
// parameter and revert puts 0 back. A guest that polls, and a machine
// without the haltpoll driver, get no such advice.
func TestPlanHaltPoll(t *testing.T) {
	root := copyTree(t, "../testdata/virtio-2cpu")
	fs := Plan(fixtureRates(t, root, ""))
	f := findRule(t, fs, "haltpoll")
	if !slices.Equal(f.Commands, []string{"echo 200000 > /sys/module/haltpoll/parameters/guest_halt_poll_ns"}) || !strings.Contains(f.Source, "guest-halt-polling.rst") {
		t.Errorf("%+v", f)
	}
	param := filepath.Join(root, "sys/module/haltpoll/parameters/guest_halt_poll_ns")
	changes, err := Apply(root, fs, false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, param); got != "200000" {
		t.Fatalf("after apply: guest_halt_poll_ns %s", got)
	}
	state := filepath.Join(root, "state.json")
	if err := SaveState(state, State{Root: root, Changes: changes}); err != nil {
		t.Fatal(err)
	}
	if err := Revert(state, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, param); got != "0" {
		t.Errorf("after revert: guest_halt_poll_ns %s", got)
	}
	for _, other := range []string{"../testdata/virtio-2cpu-rps", "../testdata/mq-8cpu"} {
		if slices.Contains(rules(Plan(fixtureRates(t, other, ""))), "haltpoll") {
			t.Errorf("%s: haltpoll advised", other)
		}
	}
}

func TestPlanBudgetAndBacklog(t *testing.T) {
	r := fixtureRates(t, "../testdata/squeeze-2cpu/before", "../testdata/squeeze-2cpu/after")
	if c := r.CPUs[0]; c.Processed != 0x20 || c.Squeezed != 10 || c.Dropped != 20 {
		t.Fatalf("CPU 0 rates %+v: want 32 processed across the wrap, 10 squeezed, 20 dropped", c)
	}
	fs := Plan(r)
	b := findRule(t, fs, "budget")
	if !slices.Contains(b.Commands, "sysctl -w net.core.netdev_budget=600") || !strings.Contains(b.Seen, "CPU 0") || strings.Contains(b.Seen, "CPU 1") {
		t.Errorf("%+v", b)
	}
	d := findRule(t, fs, "backlog")
	if !slices.Equal(d.Commands, []string{"sysctl -w net.core.netdev_max_backlog=2000"}) {
		t.Errorf("%+v", d)
	}
}

func TestPlanIRQBalance(t *testing.T) {
	f := findRule(t, Plan(fixtureRates(t, "../testdata/mq-8cpu", "")), "irqbalance")
	if !strings.Contains(f.Commands[0], "--banirq=120") || !strings.Contains(f.Commands[0], "--banirq=124") {
		t.Errorf("%+v", f)
	}
}

// synthetic builds rates for the rules no fixture tree shows yet.
func synthetic(cpus int, nic NIC, sysctls map[string]string) *Rates {
	s := &Snapshot{CPUs: cpus, NICs: []NIC{nic}, Sysctls: sysctls}
	r := &Rates{Seconds: 1, Now: s}
	for i := range cpus {
		r.CPUs = append(r.CPUs, CPURate{CPU: i})
	}
	return r
}

func TestPlanRFS(t *testing.T) {
	nic := NIC{Name: "eth0", IRQs: []string{"40"}, RX: []Queue{{Name: "rx-0", RPSCPUs: "3"}, {Name: "rx-1", RPSCPUs: "3"}}}
	r := synthetic(4, nic, map[string]string{"net.core.rps_sock_flow_entries": "0"})
	f := findRule(t, Plan(r), "rfs")
	want := []string{"sysctl -w net.core.rps_sock_flow_entries=32768",
		"echo 16384 > /sys/class/net/eth0/queues/rx-0/rps_flow_cnt", "echo 16384 > /sys/class/net/eth0/queues/rx-1/rps_flow_cnt"}
	if !slices.Equal(f.Commands, want) {
		t.Errorf("commands %q, want %q", f.Commands, want)
	}
	r.Now.Sysctls["net.core.rps_sock_flow_entries"] = "32768"
	if slices.Contains(rules(Plan(r)), "rfs") {
		t.Error("rfs advised with RFS on")
	}
}

func TestPlanQueues(t *testing.T) {
	nic := NIC{Name: "eth1", IRQs: []string{"50"}}
	for i := range 16 {
		nic.RX = append(nic.RX, Queue{Name: "rx-" + string(rune('a'+i)), RPSCPUs: "0"})
	}
	f := findRule(t, Plan(synthetic(4, nic, map[string]string{})), "queues")
	if !slices.Equal(f.Commands, []string{"ethtool -L eth1 combined 4"}) {
		t.Errorf("%+v", f)
	}
}

// TestPlanLoops: a process busy on the CPU taking the NIC's interrupts is
// told to move to the others.
func TestPlanLoops(t *testing.T) {
	r := synthetic(4, NIC{Name: "eth0", IRQs: []string{"40"}}, map[string]string{})
	r.Now.Tasks = []Task{{TID: 1, CPU: 0}}
	r.CPUs[0].NICIRQs, r.CPUs[0].NetRx, r.CPUs[0].ProcessCPU = 5000, 20000, 0.8
	f := findRule(t, Plan(r), "loops")
	if !strings.Contains(f.Advice, "CPUs 1-3") || f.Commands[0] != "taskset -a -cp 1-3 PID" || f.Commands[1] != "or in the program: ringpoll.WithLoopCPUs(1, 2, 3)" {
		t.Errorf("%+v", f)
	}
	r.CPUs[0].ProcessCPU, r.CPUs[2].ProcessCPU = 0, 0.8
	if slices.Contains(rules(Plan(r)), "loops") {
		t.Error("loops advised for a process already away from the interrupts")
	}
}

func TestCPUList(t *testing.T) {
	if got := cpuList([]int{0, 1, 2, 5, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("cpuList = %q", got)
	}
}

// TestPlanChannels: a driver offering more channels than in use, with CPUs
// to spare, is told to use them.
func TestPlanChannels(t *testing.T) {
	nic := NIC{Name: "eth0", IRQs: []string{"40"}, RX: []Queue{{Name: "rx-0", RPSCPUs: "f"}}, Ethtool: &Ethtool{Combined: 1, MaxCombined: 8}}
	f := findRule(t, Plan(synthetic(4, nic, map[string]string{})), "queues")
	if !slices.Equal(f.Commands, []string{"ethtool -L eth0 combined 4"}) {
		t.Errorf("%+v", f)
	}
	nic.Ethtool.Combined = 4
	if slices.Contains(rules(Plan(synthetic(4, nic, map[string]string{}))), "queues") {
		t.Error("queues advised with one channel per CPU")
	}
}

func TestPlanBuffers(t *testing.T) {
	f := findRule(t, Plan(fixtureRates(t, "../testdata/mq-8cpu", "")), "buffers")
	if !slices.Equal(f.Commands, []string{"sysctl -w net.core.rmem_max=16777216", "sysctl -w net.core.wmem_max=16777216"}) || !strings.Contains(f.Source, "tuned") {
		t.Errorf("%+v", f)
	}
	if slices.Contains(rules(Plan(fixtureRates(t, "../testdata/mq-16q-4cpu", ""))), "buffers") {
		t.Error("buffers advised where rmem_max and wmem_max are 16 MiB already")
	}
}

// writeTree lays out files (path relative to root: contents) and symlinks
// (contents starting with "->") under a new root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, body := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(body, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestPlanRPSWithoutProcSelf: a copy of /proc holds no proc/self (nor any
// process), yet its interrupts are read, so that a one-queue NIC on two
// CPUs with RPS off is told to turn RPS on.
func TestPlanRPSWithoutProcSelf(t *testing.T) {
	root := writeTree(t, map[string]string{
		"proc/softirqs": "                    CPU0       CPU1\n" +
			"      NET_RX:       1000       2000\n",
		"proc/interrupts": "           CPU0       CPU1\n" +
			" 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config\n" +
			" 38:          0       1687 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n" +
			"NMI:          0          0   Non-maskable interrupts\n" +
			"ERR:          0\n",
		"sys/class/net/eth0/device":               "->../../devices/virtio2",
		"sys/class/net/eth0/queues/rx-0/rps_cpus": "0\n",
		"sys/class/net/eth0/queues/tx-0/xps_cpus": "0\n",
	})
	r := fixtureRates(t, root, "")
	if s := r.Now; len(s.IRQs) != 1 || s.IRQs[0].Name != "virtio2-input.0" || !slices.Equal(s.NICs[0].IRQs, []string{"38"}) {
		t.Errorf("IRQs %+v, eth0's %v; want 38 virtio2-input.0 (missing: %q)", s.IRQs, s.NICs[0].IRQs, s.Missing)
	}
	f := findRule(t, Plan(r), "rps")
	if !slices.Equal(f.Commands, []string{"echo 3 > /sys/class/net/eth0/queues/rx-0/rps_cpus"}) {
		t.Errorf("%+v", f)
	}
}
