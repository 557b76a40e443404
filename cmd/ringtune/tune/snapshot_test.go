package tune

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReadVirtio reads a tree copied from a 2-CPU VM with one virtio NIC
// (eth0 on virtio2, one queue, its interrupts on either CPU).
func TestReadVirtio(t *testing.T) {
	s := Read("../testdata/virtio-2cpu", 0)
	if s.CPUs != 2 || len(s.NetRx) != 2 || len(s.Softnet) != 2 || s.Softnet[1].CPU != 1 || s.Softnet[0].Backlog != 0 {
		t.Errorf("CPUs %d, NET_RX %v, softnet %+v", s.CPUs, s.NetRx, s.Softnet)
	}
	var names []string
	for _, q := range s.IRQs {
		names = append(names, q.Number+" "+q.Name+" "+q.Affinity)
	}
	if want := []string{"38 virtio2-input.0 0-1", "39 virtio2-output.0 0-1"}; !slices.Equal(names, want) {
		t.Errorf("IRQs %q, want %q (config vectors and other devices left out)", names, want)
	}
	i := slices.IndexFunc(s.NICs, func(n NIC) bool { return n.Name == "eth0" })
	if i < 0 {
		t.Fatalf("no eth0 in %+v", s.NICs)
	}
	if n := s.NICs[i]; n.Device != "virtio2" || len(n.RX) != 1 || n.RX[0].RPSCPUs != "0" || !slices.Equal(n.IRQs, []string{"38", "39"}) {
		t.Errorf("eth0: %+v", n)
	}
	if s.Sysctls["net.core.netdev_budget"] != "300" || len(s.Sysctls) != len(sysctlNames) {
		t.Errorf("sysctls %v", s.Sysctls)
	}
	if s.IRQBalance == nil || *s.IRQBalance {
		t.Errorf("irqbalance %v, want known and not running", s.IRQBalance)
	}
	if len(s.Missing) != 0 {
		t.Errorf("missing %q", s.Missing)
	}
}

// TestReadMultiQueue reads an 8-CPU tree with a 4-queue NIC whose
// interrupts are named after the interface, each queue's on one CPU, with
// irqbalance running.
func TestReadMultiQueue(t *testing.T) {
	s := Read("../testdata/mq-8cpu", 0)
	if s.CPUs != 8 || len(s.NICs) != 1 {
		t.Fatalf("CPUs %d, NICs %+v", s.CPUs, s.NICs)
	}
	n := s.NICs[0]
	if len(n.RX) != 4 || n.RX[3].Name != "rx-3" || len(n.TX) != 4 || n.TX[2].XPSCPUs != "04" {
		t.Errorf("queues %+v %+v", n.RX, n.TX)
	}
	if !slices.Equal(n.IRQs, []string{"120", "121", "122", "123", "124"}) || s.IRQs[2].Affinity != "2" {
		t.Errorf("IRQs %v / %+v", n.IRQs, s.IRQs)
	}
	if s.IRQBalance == nil || !*s.IRQBalance {
		t.Errorf("irqbalance %v, want running", s.IRQBalance)
	}
}

// TestReadMissing: an empty root gives an empty snapshot that lists what
// it could not read, and rates of unknowns, without a panic.
func TestReadMissing(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(dir+"/proc", 0o755)
	a, b := Read(dir, 0), Read(dir, 1)
	if len(b.Missing) < 3 || !strings.Contains(strings.Join(b.Missing, ";"), "softirqs") {
		t.Errorf("missing %q", b.Missing)
	}
	r := Compute(a, b)
	var sb strings.Builder
	r.Render(&sb, 1)
	if !strings.Contains(sb.String(), "unknown (not readable here)") {
		t.Errorf("render:\n%s", sb.String())
	}
}

// TestComputeRates: rates per second, softnet's 32-bit counters across a
// wrap, interrupts summed per CPU, a process's threads placed by CPU.
func TestComputeRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := &Snapshot{Taken: t0, CPUs: 2, NetRx: []uint64{100, 200}, NetTx: []uint64{0, 0},
		Softnet: []Softnet{{CPU: 0, Processed: 0xffffff00, Backlog: 3}, {CPU: 1, Processed: 10, Backlog: -1}},
		IRQs:    []IRQ{{Number: "38", Name: "virtio2-input.0", Counts: []uint64{0, 50}}},
		Tasks:   []Task{{TID: 1, CPU: 0, Ticks: 100}, {TID: 2, CPU: 1, Ticks: 0}}}
	b := &Snapshot{Taken: t0.Add(2 * time.Second), CPUs: 2, NetRx: []uint64{300, 200}, NetTx: []uint64{0, 0},
		Softnet: []Softnet{{CPU: 0, Processed: 0x100, Backlog: 5}, {CPU: 1, Processed: 30, Backlog: -1}},
		IRQs:    []IRQ{{Number: "38", Name: "virtio2-input.0", Counts: []uint64{40, 50}}},
		Tasks:   []Task{{TID: 1, CPU: 0, Ticks: 200}, {TID: 2, CPU: 0, Ticks: 20}, {TID: 3, CPU: 1, Ticks: 5}},
		NICs:    []NIC{{Name: "eth0", Device: "virtio2", IRQs: []string{"38"}}}}
	r := Compute(a, b)
	c0, c1 := r.CPUs[0], r.CPUs[1]
	if c0.NetRx != 100 || c1.NetRx != 0 || c0.Processed != 256 || c1.Processed != 10 || c0.Backlog != 5 || c1.Backlog != -1 {
		t.Errorf("CPU rates %+v %+v", c0, c1)
	}
	if c0.NICIRQs != 20 || c1.NICIRQs != 0 || r.IRQs[0].PerCPU[0] != 20 {
		t.Errorf("IRQ rates %+v, CPU0 %v", r.IRQs, c0.NICIRQs)
	}
	// Thread 1 used 1 s of CPU over 2 s, thread 2 (now on CPU 0) 0.2 s;
	// thread 3 was born in between and counts as present only.
	if c0.Threads != 2 || c0.ProcessCPU != 0.6 || c1.Threads != 1 || c1.ProcessCPU != 0 {
		t.Errorf("threads: CPU0 %d %.2f, CPU1 %d %.2f", c0.Threads, c0.ProcessCPU, c1.Threads, c1.ProcessCPU)
	}
	var sb strings.Builder
	r.Render(&sb, 0)
	if !strings.Contains(sb.String(), "CPU0 20/s") {
		t.Errorf("render:\n%s", sb.String())
	}
}

func TestParseTaskStat(t *testing.T) {
	// Fields 3 to 52 of proc(5): utime (14) 1500, stime (15) 250,
	// processor (39) 1.
	f := make([]string, 50)
	for i := range f {
		f[i] = "0"
	}
	f[0], f[14-3], f[15-3], f[39-3] = "S", "1500", "250", "1"
	line := "4242 (a (weird) name) " + strings.Join(f, " ") + "\n"
	got, ok := parseTaskStat(4242, line)
	if !ok || got.Comm != "a (weird) name" || got.Ticks != 1750 || got.CPU != 1 {
		t.Errorf("parseTaskStat = %+v, %v", got, ok)
	}
	if _, ok := parseTaskStat(1, "garbage"); ok {
		t.Error("garbage parsed")
	}
}

// TestParseInterrupts: numbered rows with a count per CPU and the
// handler's name last; per-CPU rows left out; a row short of counts or
// with a count that is no number refused.
func TestParseInterrupts(t *testing.T) {
	const head = "           CPU0       CPU1\n"
	irqs, err := parseInterrupts([]byte(head +
		" 38:          0       1687 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n" +
		"\n" +
		"  7:          3          0 IO-APIC\n" +
		" 16:          1          2 IO-APIC  16-fasteoi   ehci_hcd:usb1, eth0\n" +
		"NMI:          0          0   Non-maskable interrupts\n" +
		"ERR:          0\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range irqs {
		got = append(got, fmt.Sprint(q.Number, " ", q.Name, " ", q.Counts))
	}
	if want := []string{"38 virtio2-input.0 [0 1687]", "7  [3 0]", "16 eth0 [1 2]"}; !slices.Equal(got, want) {
		t.Errorf("parsed %q, want %q", got, want)
	}
	for _, bad := range []string{"", head + " 38:          0\n", head + " 38:          0  x  PCI-MSIX 1-edge eth0\n"} {
		if irqs, err := parseInterrupts([]byte(bad)); err == nil {
			t.Errorf("%q parsed as %+v", bad, irqs)
		}
	}
}

// FuzzParseInterrupts: any input parses or is refused, without a panic,
// and what parses has a count per CPU the header names.
func FuzzParseInterrupts(f *testing.F) {
	for _, fixture := range []string{"virtio-2cpu", "mq-8cpu", "mq-16q-4cpu"} {
		b, err := os.ReadFile("../testdata/" + fixture + "/proc/interrupts")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		irqs, err := parseInterrupts(b)
		if err != nil {
			return
		}
		cpus := len(strings.Fields(strings.SplitN(string(b), "\n", 2)[0]))
		for _, q := range irqs {
			if _, err := strconv.ParseUint(q.Number, 10, 32); err != nil || len(q.Counts) != cpus {
				t.Errorf("%+v from %d CPUs", q, cpus)
			}
		}
	})
}
