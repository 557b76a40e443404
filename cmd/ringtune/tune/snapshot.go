// Package tune reads what the kernel says about a machine's network
// receive path (softirqs, softnet, the NICs' queues and interrupts, the
// sysctls that bound them) under a root directory, and turns two readings
// into rates. Every file may be missing, as on a kernel without it: what
// could not be read is listed in Snapshot.Missing and shown as unknown,
// never an error.
//
// /proc/softirqs and /proc/net/softnet_stat are parsed by
// github.com/prometheus/procfs; the driver's channels, rings and
// coalescing come from github.com/safchain/ethtool (ioctls; the netlink
// library github.com/mdlayher/ethtool has none of the three); the sysfs
// files of the NICs' queues and /proc/irq/N/smp_affinity_list, which
// neither covers, and /proc/interrupts, which procfs reaches only through
// proc/self or a process's directory, are read by hand.
package tune

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// Snapshot is one reading.
type Snapshot struct {
	Taken time.Time `json:"taken"`
	// CPUs is the number of CPUs the counters cover.
	CPUs int `json:"cpus"`
	// NetRx and NetTx are the NET_RX and NET_TX softirqs run per CPU since
	// boot.
	NetRx []uint64 `json:"net_rx,omitempty"`
	NetTx []uint64 `json:"net_tx,omitempty"`
	// Softnet is /proc/net/softnet_stat, one entry per CPU.
	Softnet []Softnet `json:"softnet,omitempty"`
	// IRQs are the network devices' interrupts.
	IRQs []IRQ `json:"irqs,omitempty"`
	NICs []NIC `json:"nics,omitempty"`
	// Sysctls are the settings that bound the receive path, by name
	// (net.core.netdev_budget, ...); a missing one is absent.
	Sysctls map[string]string `json:"sysctls"`
	// IRQBalance says whether an irqbalance process runs (nil: unknown).
	IRQBalance *bool `json:"irqbalance,omitempty"`
	// Tasks are the threads of the process asked about (-pid).
	Tasks []Task `json:"tasks,omitempty"`
	// CPUIdle is the cpuidle driver (sys/devices/system/cpu/cpuidle/
	// current_driver), and GuestHaltPollNs the haltpoll governor's
	// guest_halt_poll_ns (sys/module/haltpoll/parameters), where the
	// kernel has them: a KVM guest's idle policy. Empty where absent,
	// which is no fault (bare metal has no haltpoll).
	CPUIdle         string `json:"cpuidle,omitempty"`
	GuestHaltPollNs string `json:"guest_halt_poll_ns,omitempty"`
	// Missing lists what could not be read, and why.
	Missing []string `json:"missing,omitempty"`
}

// Softnet is one CPU's softnet_stat line: 32-bit counters that wrap.
type Softnet struct {
	CPU          int    `json:"cpu"`
	Processed    uint32 `json:"processed"`
	Dropped      uint32 `json:"dropped"`
	TimeSqueezed uint32 `json:"time_squeezed"`
	ReceivedRPS  uint32 `json:"received_rps"`
	// Backlog is the packets queued for the CPU now, where the kernel
	// reports it (-1: it does not).
	Backlog int64 `json:"backlog"`
}

// IRQ is one interrupt line of a network device.
type IRQ struct {
	Number string   `json:"number"`
	Name   string   `json:"name"`
	Counts []uint64 `json:"counts"`
	// Affinity is /proc/irq/N/smp_affinity_list ("" if unknown).
	Affinity string `json:"affinity,omitempty"`
}

// NIC is a network interface with its queues.
type NIC struct {
	Name string `json:"name"`
	// Device is the name of the device behind it (virtio2, 0000:00:03.0),
	// which its interrupts are often named after.
	Device string  `json:"device,omitempty"`
	RX     []Queue `json:"rx"`
	TX     []Queue `json:"tx"`
	// IRQs are the numbers of its interrupts.
	IRQs []string `json:"irqs,omitempty"`
	// Ethtool is what its driver says (nil: unknown; read on the live
	// root only).
	Ethtool *Ethtool `json:"ethtool,omitempty"`
}

// Queue is one of a NIC's queues, with its receive packet steering.
type Queue struct {
	Name       string `json:"name"`
	RPSCPUs    string `json:"rps_cpus,omitempty"`
	RPSFlowCnt string `json:"rps_flow_cnt,omitempty"`
	XPSCPUs    string `json:"xps_cpus,omitempty"`
}

// Task is one thread of a process.
type Task struct {
	TID  int    `json:"tid"`
	Comm string `json:"comm"`
	// CPU is the CPU it last ran on; Ticks its user and system time in
	// clock ticks.
	CPU   int    `json:"cpu"`
	Ticks uint64 `json:"ticks"`
}

// sysctlNames are the settings a snapshot reads.
var sysctlNames = []string{
	"net.core.netdev_budget", "net.core.netdev_budget_usecs", "net.core.netdev_max_backlog",
	"net.core.rps_sock_flow_entries", "net.core.busy_poll", "net.core.busy_read",
	"net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default", "net.core.dev_weight",
}

// Read takes a snapshot of the machine whose /proc and /sys are under root
// ("/" for this one), with the threads of pid if pid > 0.
func Read(root string, pid int) *Snapshot {
	s := &Snapshot{Taken: time.Now(), Sysctls: map[string]string{}}
	miss := func(what string, err error) { s.Missing = append(s.Missing, what+": "+err.Error()) }
	fs, err := procfs.NewFS(filepath.Join(root, "proc"))
	if err != nil {
		miss("proc", err)
		return s
	}
	if si, err := fs.Softirqs(); err == nil {
		s.NetRx, s.NetTx = si.NetRx, si.NetTx
		s.CPUs = max(s.CPUs, len(si.NetRx))
	} else {
		miss("proc/softirqs", err)
	}
	if sn, err := fs.NetSoftnetStat(); err == nil {
		for i, c := range sn {
			e := Softnet{CPU: i, Processed: c.Processed, Dropped: c.Dropped, TimeSqueezed: c.TimeSqueezed, ReceivedRPS: c.ReceivedRps, Backlog: -1}
			if c.Width >= 13 {
				e.CPU = int(c.Index)
			}
			if c.Width >= 12 {
				e.Backlog = int64(c.SoftnetBacklogLen)
			}
			s.Softnet = append(s.Softnet, e)
		}
		s.CPUs = max(s.CPUs, len(sn))
	} else {
		miss("proc/net/softnet_stat", err)
	}
	s.readNICs(root, miss)
	s.readIRQs(root, miss)
	if filepath.Clean(root) == "/" {
		for i := range s.NICs {
			if len(s.NICs[i].IRQs) == 0 {
				continue // loopback and virtual devices have no channels
			}
			if info, err := readEthtool(s.NICs[i].Name); err == nil {
				s.NICs[i].Ethtool = info
			} else {
				miss("ethtool "+s.NICs[i].Name, err)
			}
		}
	}
	for _, name := range sysctlNames {
		b, err := os.ReadFile(filepath.Join(root, "proc", "sys", strings.ReplaceAll(name, ".", "/")))
		if err != nil {
			miss(name, err)
			continue
		}
		s.Sysctls[name] = strings.TrimSpace(string(b))
	}
	s.IRQBalance = irqbalanceRuns(fs)
	s.CPUIdle = readOptional(root, "sys/devices/system/cpu/cpuidle/current_driver")
	s.GuestHaltPollNs = readOptional(root, "sys/module/haltpoll/parameters/guest_halt_poll_ns")
	if pid > 0 {
		s.readTasks(root, pid, miss)
	}
	return s
}

// readOptional returns the trimmed contents of root/rel, or "" where it
// cannot be read.
func readOptional(root, rel string) string {
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readNICs lists the interfaces in sys/class/net with their queues.
func (s *Snapshot) readNICs(root string, miss func(string, error)) {
	dir := filepath.Join(root, "sys", "class", "net")
	ents, err := os.ReadDir(dir)
	if err != nil {
		miss("sys/class/net", err)
		return
	}
	for _, e := range ents {
		n := NIC{Name: e.Name()}
		if dev, err := os.Readlink(filepath.Join(dir, e.Name(), "device")); err == nil {
			n.Device = filepath.Base(dev)
		}
		qdir := filepath.Join(dir, e.Name(), "queues")
		qs, err := os.ReadDir(qdir)
		if err != nil {
			miss("sys/class/net/"+e.Name()+"/queues", err)
		}
		for _, q := range qs {
			read := func(f string) string {
				b, err := os.ReadFile(filepath.Join(qdir, q.Name(), f))
				if err != nil {
					return ""
				}
				return strings.TrimSpace(string(b))
			}
			switch {
			case strings.HasPrefix(q.Name(), "rx-"):
				n.RX = append(n.RX, Queue{Name: q.Name(), RPSCPUs: read("rps_cpus"), RPSFlowCnt: read("rps_flow_cnt")})
			case strings.HasPrefix(q.Name(), "tx-"):
				n.TX = append(n.TX, Queue{Name: q.Name(), XPSCPUs: read("xps_cpus")})
			}
		}
		byNumber := func(a, b Queue) int { return queueIndex(a.Name) - queueIndex(b.Name) }
		slices.SortFunc(n.RX, byNumber)
		slices.SortFunc(n.TX, byNumber)
		s.NICs = append(s.NICs, n)
	}
}

func queueIndex(name string) int {
	_, n, _ := strings.Cut(name, "-")
	i, _ := strconv.Atoi(n)
	return i
}

// readIRQs keeps the interrupts named after a NIC or its device, with
// their affinity.
func (s *Snapshot) readIRQs(root string, miss func(string, error)) {
	b, err := os.ReadFile(filepath.Join(root, "proc", "interrupts"))
	if err != nil {
		miss("proc/interrupts", err)
		return
	}
	all, err := parseInterrupts(b)
	if err != nil {
		miss("proc/interrupts", err)
		return
	}
	for _, e := range all {
		nic := s.nicOf(e.Name)
		if nic == nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(root, "proc", "irq", e.Number, "smp_affinity_list")); err == nil {
			e.Affinity = strings.TrimSpace(string(b))
		}
		s.IRQs = append(s.IRQs, e)
		nic.IRQs = append(nic.IRQs, e.Number)
	}
	slices.SortFunc(s.IRQs, func(a, b IRQ) int { return atoi(a.Number) - atoi(b.Number) })
	for i := range s.NICs {
		slices.SortFunc(s.NICs[i].IRQs, func(a, b string) int { return atoi(a) - atoi(b) })
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// parseInterrupts reads the numbered rows of /proc/interrupts, as
// kernel/irq/proc.c's show_interrupts prints them: a header naming each
// online CPU, then per interrupt its number, a count per CPU, the chip,
// the trigger and, last, the name its handler registered. The per-CPU
// rows (NMI, LOC, ...) are left out. procfs parses the file only through
// a process (Proc.Interrupts), which a copy of /proc may not hold.
func parseInterrupts(b []byte) ([]IRQ, error) {
	lines := strings.Split(string(b), "\n")
	cpus := len(strings.Fields(lines[0]))
	if cpus == 0 {
		return nil, errors.New("no header naming the CPUs")
	}
	var irqs []IRQ
	for i, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		num, ok := strings.CutSuffix(f[0], ":")
		if _, err := strconv.ParseUint(num, 10, 32); !ok || err != nil {
			continue // NMI, LOC and the other per-CPU rows
		}
		if len(f) < 1+cpus {
			return nil, fmt.Errorf("line %d: %d counts for %d CPUs", i+2, len(f)-1, cpus)
		}
		e := IRQ{Number: num}
		for _, v := range f[1 : 1+cpus] {
			c, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: count %q", i+2, v)
			}
			e.Counts = append(e.Counts, c)
		}
		if len(f) > cpus+2 { // past the chip: the trigger, then the name
			e.Name = f[len(f)-1]
		}
		irqs = append(irqs, e)
	}
	return irqs, nil
}

// nicOf returns the NIC an interrupt name belongs to: "eth0-TxRx-0" and
// "eth0" belong to eth0, "virtio2-input.0" to the NIC on device virtio2,
// "mlx5_comp3@pci:0000:3b:00.0" to the NIC on that PCI device. Config
// and control vectors ("virtio2-config") are not queues, and are left out.
func (s *Snapshot) nicOf(name string) *NIC {
	if name == "" || strings.HasSuffix(name, "-config") {
		return nil
	}
	for i := range s.NICs {
		n := &s.NICs[i]
		switch {
		case name == n.Name || strings.HasPrefix(name, n.Name+"-"):
			return n
		case n.Device != "" && (strings.HasPrefix(name, n.Device+"-") || strings.HasSuffix(name, "@pci:"+n.Device)):
			return n
		}
	}
	return nil
}

// irqbalanceRuns looks for an irqbalance process.
func irqbalanceRuns(fs procfs.FS) *bool {
	procs, err := fs.AllProcs()
	if err != nil {
		return nil
	}
	found := false
	for _, p := range procs {
		if comm, err := p.Comm(); err == nil && comm == "irqbalance" {
			found = true
			break
		}
	}
	return &found
}

// readTasks reads each thread's last CPU and CPU time from
// proc/PID/task/*/stat.
func (s *Snapshot) readTasks(root string, pid int, miss func(string, error)) {
	dir := filepath.Join(root, "proc", strconv.Itoa(pid), "task")
	ents, err := os.ReadDir(dir)
	if err != nil {
		miss("proc/"+strconv.Itoa(pid)+"/task", err)
		return
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		line, _ := bufio.NewReader(f).ReadString('\n')
		f.Close()
		t, ok := parseTaskStat(tid, line)
		if ok {
			s.Tasks = append(s.Tasks, t)
		}
	}
}

// parseTaskStat reads comm, utime, stime and processor from a stat line
// (proc(5): fields 2, 14, 15 and 39; comm is in parentheses and may hold
// spaces).
func parseTaskStat(tid int, line string) (Task, bool) {
	open, close := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || close < open {
		return Task{}, false
	}
	f := strings.Fields(line[close+1:]) // f[0] is field 3
	if len(f) < 37 {
		return Task{}, false
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	cpu, err3 := strconv.Atoi(f[36])
	if err1 != nil || err2 != nil || err3 != nil {
		return Task{}, false
	}
	return Task{TID: tid, Comm: line[open+1 : close], CPU: cpu, Ticks: ut + st}, true
}
