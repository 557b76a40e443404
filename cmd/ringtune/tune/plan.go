package tune

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Finding is one diagnosis: what was seen, why it matters, where the rule
// comes from, and the commands that act on it.
type Finding struct {
	Rule     string   `json:"rule"`
	Seen     string   `json:"seen"`
	Advice   string   `json:"advice"`
	Source   string   `json:"source"`
	Commands []string `json:"commands,omitempty"`
}

// Sources the rules cite.
const (
	srcScaling  = "Linux Documentation/networking/scaling.rst, suggested configuration"
	srcNetdata  = "netdata health alarms (health.d/softnet.conf)"
	srcTunedThr = "tuned profile network-throughput"
	srcTunedLat = "tuned profile network-latency"
	srcIRQBal   = "irqbalance(1)"
	srcHaltPoll = "Linux Documentation/virt/guest-halt-polling.rst"
)

// haltPollNs is the kernel's default guest_halt_poll_ns.
const haltPollNs = 200000

// rfsEntries is the global flow table scaling.rst suggests for a
// moderately loaded server.
const rfsEntries = 32768

// Plan diagnoses a machine from its rates. Each rule is a method, in the
// order they print.
func Plan(r *Rates) []Finding {
	var fs []Finding
	for _, rule := range []func(*Rates) []Finding{
		planRPS, planRFS, planQueues, planBudget, planBacklog, planBuffers, planLoops, planIRQBalance, planHaltPoll,
	} {
		fs = append(fs, rule(r)...)
	}
	return fs
}

// physical returns the NICs with interrupts (loopback and virtual devices
// have none).
func physical(r *Rates) []NIC {
	var ns []NIC
	for _, n := range r.Now.NICs {
		if len(n.IRQs) > 0 {
			ns = append(ns, n)
		}
	}
	return ns
}

func cpuCount(r *Rates) int { return max(r.Now.CPUs, len(r.CPUs)) }

// maskAll is the hex mask of CPUs [0, n).
func maskAll(n int) string {
	if n >= 64 {
		return strings.Repeat("f", n/4)
	}
	return strconv.FormatUint(1<<n-1, 16)
}

// maskEmpty reports whether a cpumask file's value selects no CPU.
func maskEmpty(m string) bool { return strings.Trim(m, "0,\n ") == "" }

// planRPS: a NIC with fewer receive queues than CPUs takes every packet's
// protocol work on the CPUs its interrupts land on; RPS spreads it.
func planRPS(r *Rates) []Finding {
	var fs []Finding
	n := cpuCount(r)
	for _, nic := range physical(r) {
		if len(nic.RX) == 0 || len(nic.RX) >= n || n < 2 {
			continue
		}
		var off []string
		for _, q := range nic.RX {
			if q.RPSCPUs != "" && maskEmpty(q.RPSCPUs) {
				off = append(off, q.Name)
			}
		}
		if len(off) == 0 {
			continue
		}
		f := Finding{
			Rule:   "rps",
			Seen:   fmt.Sprintf("%s has %d receive queue(s) for %d CPUs, and RPS is off on %s", nic.Name, len(nic.RX), n, strings.Join(off, ", ")),
			Advice: "enable RPS so that the protocol work of received packets spreads over the CPUs instead of staying on the interrupted one (all CPUs, where NUMA locality is no concern)",
			Source: srcScaling + " (RPS: a single-queue device, or fewer hardware queues than CPUs)",
		}
		for _, q := range off {
			f.Commands = append(f.Commands, fmt.Sprintf("echo %s > /sys/class/net/%s/queues/%s/rps_cpus", maskAll(n), nic.Name, q))
		}
		fs = append(fs, f)
	}
	return fs
}

// planRFS: RPS without RFS picks CPUs by hash, away from the consuming
// thread.
func planRFS(r *Rates) []Finding {
	if r.Now.Sysctls["net.core.rps_sock_flow_entries"] != "0" {
		return nil
	}
	var fs []Finding
	for _, nic := range physical(r) {
		on := 0
		for _, q := range nic.RX {
			if q.RPSCPUs != "" && !maskEmpty(q.RPSCPUs) {
				on++
			}
		}
		if on == 0 {
			continue
		}
		per := rfsEntries / len(nic.RX)
		f := Finding{
			Rule:     "rfs",
			Seen:     fmt.Sprintf("RPS is on for %d of %s's receive queues, but net.core.rps_sock_flow_entries is 0 (no RFS)", on, nic.Name),
			Advice:   fmt.Sprintf("enable RFS, so that a flow's packets are processed on the CPU where the thread reading it runs: %d global entries, %d per queue", rfsEntries, per),
			Source:   srcScaling + " (RFS: 32768 entries for a moderately loaded server, divided among the queues)",
			Commands: []string{fmt.Sprintf("sysctl -w net.core.rps_sock_flow_entries=%d", rfsEntries)},
		}
		for _, q := range nic.RX {
			f.Commands = append(f.Commands, fmt.Sprintf("echo %d > /sys/class/net/%s/queues/%s/rps_flow_cnt", per, nic.Name, q.Name))
		}
		fs = append(fs, f)
	}
	return fs
}

// planQueues: more queues than CPUs only adds interrupts that share CPUs.
func planQueues(r *Rates) []Finding {
	var fs []Finding
	n := cpuCount(r)
	for _, nic := range physical(r) {
		if e := nic.Ethtool; e != nil && e.MaxCombined > e.Combined && int(e.Combined) < n {
			to := min(int(e.MaxCombined), n)
			fs = append(fs, Finding{
				Rule:     "queues",
				Seen:     fmt.Sprintf("%s uses %d combined channel(s) of the %d its driver offers, for %d CPUs", nic.Name, e.Combined, e.MaxCombined, n),
				Advice:   fmt.Sprintf("use %d, so that the NIC spreads flows over that many CPUs' interrupts itself (RSS)", to),
				Source:   srcScaling + " (RSS: one receive queue per CPU, or as many as the device has)",
				Commands: []string{fmt.Sprintf("ethtool -L %s combined %d", nic.Name, to)},
			})
			continue
		}
		if len(nic.RX) <= n || n == 0 {
			continue
		}
		fs = append(fs, Finding{
			Rule:     "queues",
			Seen:     fmt.Sprintf("%s has %d receive queues for %d CPUs", nic.Name, len(nic.RX), n),
			Advice:   "use one queue per CPU: more only puts several queues' interrupts on one CPU",
			Source:   srcScaling + " (RSS: one receive queue per CPU, or as many as the device has)",
			Commands: []string{fmt.Sprintf("ethtool -L %s combined %d", nic.Name, n)},
		})
	}
	return fs
}

// planBudget: time_squeeze counts softirq runs that ended with work left.
func planBudget(r *Rates) []Finding {
	var cpus []string
	for _, c := range r.CPUs {
		if c.Squeezed > 0 {
			cpus = append(cpus, fmt.Sprintf("CPU %d (%s/s)", c.CPU, rate(c.Squeezed)))
		}
	}
	if len(cpus) == 0 {
		return nil
	}
	budget := atoiOr(r.Now.Sysctls["net.core.netdev_budget"], 300)
	usecs := atoiOr(r.Now.Sysctls["net.core.netdev_budget_usecs"], 2000)
	return []Finding{{
		Rule:   "budget",
		Seen:   "time_squeeze rising on " + strings.Join(cpus, ", "),
		Advice: fmt.Sprintf("the receive softirq runs out of its budget (%d packets, %d µs) with packets left: raise both", budget, usecs),
		Source: srcNetdata + ": 1min_netdev_budget_ran_outs",
		Commands: []string{
			fmt.Sprintf("sysctl -w net.core.netdev_budget=%d", 2*budget),
			fmt.Sprintf("sysctl -w net.core.netdev_budget_usecs=%d", 2*usecs),
		},
	}}
}

// planBacklog: softnet's dropped counts packets the per-CPU backlog had no
// room for.
func planBacklog(r *Rates) []Finding {
	var cpus []string
	for _, c := range r.CPUs {
		if c.Dropped > 0 {
			cpus = append(cpus, fmt.Sprintf("CPU %d (%s/s)", c.CPU, rate(c.Dropped)))
		}
	}
	if len(cpus) == 0 {
		return nil
	}
	backlog := atoiOr(r.Now.Sysctls["net.core.netdev_max_backlog"], 1000)
	return []Finding{{
		Rule:     "backlog",
		Seen:     "packets dropped for a full backlog on " + strings.Join(cpus, ", "),
		Advice:   fmt.Sprintf("raise net.core.netdev_max_backlog (now %d)", backlog),
		Source:   srcNetdata + ": 1min_netdev_backlog_exceeded",
		Commands: []string{fmt.Sprintf("sysctl -w net.core.netdev_max_backlog=%d", 2*backlog)},
	}}
}

// planBuffers: a socket cannot ask for more receive buffer than rmem_max,
// and UDP servers drop what overflows it.
func planBuffers(r *Rates) []Finding {
	const want = 16 << 20
	rmem, ok1 := strconv.Atoi(r.Now.Sysctls["net.core.rmem_max"])
	wmem, ok2 := strconv.Atoi(r.Now.Sysctls["net.core.wmem_max"])
	if ok1 != nil || ok2 != nil || (rmem >= want && wmem >= want) {
		return nil
	}
	return []Finding{{
		Rule:   "buffers",
		Seen:   fmt.Sprintf("net.core.rmem_max %d, wmem_max %d", rmem, wmem),
		Advice: "let sockets ask for 16 MiB buffers (PacketConn.SetReadBuffer): bursts of datagrams otherwise overflow and drop",
		Source: srcTunedThr,
		Commands: []string{
			fmt.Sprintf("sysctl -w net.core.rmem_max=%d", max(rmem, want)),
			fmt.Sprintf("sysctl -w net.core.wmem_max=%d", max(wmem, want)),
		},
	}}
}

// planLoops: a server's threads on the CPU that takes the NIC's
// interrupts and receive softirqs compete with them.
func planLoops(r *Rates) []Finding {
	if len(r.Now.Tasks) == 0 {
		return nil
	}
	var busy, shared, free []int
	for _, c := range r.CPUs {
		softirq := c.NICIRQs > 0 || c.NetRx > 100
		if softirq {
			busy = append(busy, c.CPU)
		}
		if softirq && c.ProcessCPU > 0.05 {
			shared = append(shared, c.CPU)
		}
		if !softirq {
			free = append(free, c.CPU)
		}
	}
	if len(shared) == 0 || len(free) == 0 {
		return nil
	}
	return []Finding{{
		Rule: "loops",
		Seen: fmt.Sprintf("the process's threads use CPU %s, which take(s) the network interrupts and receive softirqs (CPUs %s)",
			cpuList(shared), cpuList(busy)),
		Advice: fmt.Sprintf("run the server on CPUs %s, away from the receive path, so neither preempts the other", cpuList(free)),
		Source: srcTunedLat + " (isolate the application from interrupt work); " + srcScaling + " (IRQ affinity)",
		Commands: []string{
			fmt.Sprintf("taskset -a -cp %s PID", cpuList(free)),
			fmt.Sprintf("or in the program: ringpoll.WithLoopCPUs(%s)", joinInts(free)),
		},
	}}
}

// planIRQBalance: irqbalance rewrites smp_affinity on its own schedule.
func planIRQBalance(r *Rates) []Finding {
	if r.Now.IRQBalance == nil || !*r.Now.IRQBalance {
		return nil
	}
	var irqs []string
	for _, nic := range physical(r) {
		irqs = append(irqs, nic.IRQs...)
	}
	if len(irqs) == 0 {
		return nil
	}
	args := make([]string, len(irqs))
	for i, q := range irqs {
		args[i] = "--banirq=" + q
	}
	return []Finding{{
		Rule:     "irqbalance",
		Seen:     "irqbalance is running",
		Advice:   "it moves the NICs' interrupts (" + strings.Join(irqs, ", ") + ") on its own: ban them before pinning them, or changes to their affinity do not last",
		Source:   srcIRQBal,
		Commands: []string{"IRQBALANCE_ARGS=\"" + strings.Join(args, " ") + "\" in /etc/default/irqbalance, then: systemctl restart irqbalance"},
	}}
}

// planHaltPoll: a KVM guest whose idle CPUs halt without polling first
// pays a VM exit, and the host's wake-up, each time a server that went
// idle is woken. guest_halt_poll_ns 0 turns the polling off (some hosts
// boot their guests so); the kernel's default polls for up to 200 µs.
func planHaltPoll(r *Rates) []Finding {
	if r.Now.CPUIdle != "haltpoll" || r.Now.GuestHaltPollNs != "0" {
		return nil
	}
	return []Finding{{
		Rule: "haltpoll",
		Seen: "a virtual machine whose idle CPUs halt at once: cpuidle driver haltpoll, guest_halt_poll_ns 0",
		Advice: fmt.Sprintf("a server that idles between requests pays a VM exit and a wake-up from the host for each one that finds it idle: "+
			"let an idle CPU poll for up to %d µs before it halts, the kernel's default, for a shorter tail at partial load "+
			"(the polling counts as idle time in the guest and costs the host's CPU)", haltPollNs/1000),
		Source:   srcHaltPoll + " (guest_halt_poll_ns; polling avoids the VM exit and the waker's IPI)",
		Commands: []string{fmt.Sprintf("echo %d > /sys/module/haltpoll/parameters/guest_halt_poll_ns", haltPollNs)},
	}}
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// cpuList prints CPU numbers as a list with ranges (0-2,5).
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// RenderPlan writes the findings, or says none applies.
func RenderPlan(w io.Writer, fs []Finding) {
	if len(fs) == 0 {
		fmt.Fprintln(w, "nothing to change: no rule applies to what was seen")
		return
	}
	for i, f := range fs {
		fmt.Fprintf(w, "%d. [%s] %s\n   %s\n   source: %s\n", i+1, f.Rule, f.Seen, f.Advice, f.Source)
		for _, c := range f.Commands {
			fmt.Fprintf(w, "     %s\n", c)
		}
	}
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ", ")
}
