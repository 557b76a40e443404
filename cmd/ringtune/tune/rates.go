package tune

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Rates are two snapshots' differences per second, per CPU.
type Rates struct {
	Seconds float64   `json:"seconds"`
	CPUs    []CPURate `json:"cpus"`
	IRQs    []IRQRate `json:"irqs,omitempty"`
	// Now is the later snapshot, for the settings and the NICs.
	Now *Snapshot `json:"now"`
}

// CPURate is one CPU's rates; -1 where the counter is unknown.
type CPURate struct {
	CPU       int     `json:"cpu"`
	NetRx     float64 `json:"net_rx_per_s"`
	NetTx     float64 `json:"net_tx_per_s"`
	Processed float64 `json:"processed_per_s"`
	Dropped   float64 `json:"dropped_per_s"`
	Squeezed  float64 `json:"time_squeezed_per_s"`
	RPSIn     float64 `json:"received_rps_per_s"`
	Backlog   int64   `json:"backlog"`
	// NICIRQs is the network interrupts per second it took.
	NICIRQs float64 `json:"nic_irqs_per_s"`
	// Threads and ProcessCPU are, with -pid, that process's threads that
	// last ran here and the share of this CPU they used (1 is all of it,
	// counted by where each thread was last seen).
	Threads    int     `json:"threads"`
	ProcessCPU float64 `json:"process_cpu"`
}

// IRQRate is one network interrupt's rate on each CPU.
type IRQRate struct {
	Number   string    `json:"number"`
	Name     string    `json:"name"`
	Affinity string    `json:"affinity,omitempty"`
	PerCPU   []float64 `json:"per_cpu_per_s"`
}

// ticksPerSecond is USER_HZ, 100 on every Linux Go runs on.
const ticksPerSecond = 100

// Compute returns b's rates over a, which must be the earlier.
func Compute(a, b *Snapshot) *Rates {
	secs := b.Taken.Sub(a.Taken).Seconds()
	if secs <= 0 {
		secs = 1e-9
	}
	r := &Rates{Seconds: secs, Now: b}
	n := max(a.CPUs, b.CPUs)
	per := func(x, y []uint64, i int) float64 {
		if i >= len(x) || i >= len(y) || y[i] < x[i] {
			return -1
		}
		return float64(y[i]-x[i]) / secs
	}
	// softnet_stat counters are 32 bits wide and wrap: a difference taken
	// in uint32 is right across one wrap.
	per32 := func(x, y uint32) float64 { return float64(y-x) / secs }
	for i := range n {
		c := CPURate{CPU: i, NetRx: per(a.NetRx, b.NetRx, i), NetTx: per(a.NetTx, b.NetTx, i),
			Processed: -1, Dropped: -1, Squeezed: -1, RPSIn: -1, Backlog: -1}
		if sa, sb := softnetOf(a, i), softnetOf(b, i); sa != nil && sb != nil {
			c.Processed, c.Dropped = per32(sa.Processed, sb.Processed), per32(sa.Dropped, sb.Dropped)
			c.Squeezed, c.RPSIn = per32(sa.TimeSqueezed, sb.TimeSqueezed), per32(sa.ReceivedRPS, sb.ReceivedRPS)
			c.Backlog = sb.Backlog
		}
		r.CPUs = append(r.CPUs, c)
	}
	for _, qb := range b.IRQs {
		i := slices.IndexFunc(a.IRQs, func(q IRQ) bool { return q.Number == qb.Number })
		if i < 0 {
			continue
		}
		e := IRQRate{Number: qb.Number, Name: qb.Name, Affinity: qb.Affinity}
		for cpu := range qb.Counts {
			v := per(a.IRQs[i].Counts, qb.Counts, cpu)
			e.PerCPU = append(e.PerCPU, v)
			if cpu < len(r.CPUs) && v > 0 {
				r.CPUs[cpu].NICIRQs += v
			}
		}
		r.IRQs = append(r.IRQs, e)
	}
	before := map[int]Task{}
	for _, t := range a.Tasks {
		before[t.TID] = t
	}
	for _, t := range b.Tasks {
		if t.CPU < 0 || t.CPU >= len(r.CPUs) {
			continue
		}
		c := &r.CPUs[t.CPU]
		c.Threads++
		if o, ok := before[t.TID]; ok && t.Ticks >= o.Ticks {
			c.ProcessCPU += float64(t.Ticks-o.Ticks) / ticksPerSecond / secs
		}
	}
	return r
}

func softnetOf(s *Snapshot, cpu int) *Softnet {
	for i := range s.Softnet {
		if s.Softnet[i].CPU == cpu {
			return &s.Softnet[i]
		}
	}
	return nil
}

// Render writes the rates as tables a person reads at a glance: one row
// per CPU, then the NICs with their queues and interrupts, then the
// settings.
func (r *Rates) Render(w io.Writer, pid int) {
	fmt.Fprintf(w, "over %.1fs, per second:\n\n", r.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "CPU\tNET_RX\tNET_TX\tpackets\tdropped\tsqueezed\tRPS in\tbacklog\tNIC IRQs\t"
	if pid > 0 {
		head += fmt.Sprintf("pid %d threads\tits CPU\t", pid)
	}
	fmt.Fprintln(tw, head)
	for _, c := range r.CPUs {
		row := fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", c.CPU, rate(c.NetRx), rate(c.NetTx), rate(c.Processed),
			rate(c.Dropped), rate(c.Squeezed), rate(c.RPSIn), count(c.Backlog), rate(c.NICIRQs))
		if pid > 0 {
			row += fmt.Sprintf("%d\t%.0f%%\t", c.Threads, 100*c.ProcessCPU)
		}
		fmt.Fprintln(tw, row)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, n := range r.Now.NICs {
		if n.Name == "lo" && len(n.IRQs) == 0 {
			fmt.Fprintf(w, "lo: rx-0 rps_cpus %s (loopback: the receive softirq runs on the sending CPU unless RPS moves it)\n", orUnknown(firstRPS(n)))
			continue
		}
		dev := ""
		if n.Device != "" {
			dev = " (" + n.Device + ")"
		}
		fmt.Fprintf(w, "%s%s: %d rx, %d tx queues\n", n.Name, dev, len(n.RX), len(n.TX))
		if e := n.Ethtool; e != nil {
			fmt.Fprintf(w, "  channels: combined %d of %d, rx %d of %d, tx %d of %d; rings rx %d of %d, tx %d of %d; rx coalescing %d µs / %d frames, adaptive %v\n",
				e.Combined, e.MaxCombined, e.RX, e.MaxRX, e.TX, e.MaxTX, e.RingRX, e.MaxRingRX, e.RingTX, e.MaxRingTX, e.RxUsecs, e.RxFrames, e.AdaptiveRX)
		}
		for _, q := range n.RX {
			fmt.Fprintf(w, "  %s rps_cpus %s rps_flow_cnt %s\n", q.Name, orUnknown(q.RPSCPUs), orUnknown(q.RPSFlowCnt))
		}
		for _, num := range n.IRQs {
			for _, q := range r.IRQs {
				if q.Number == num {
					fmt.Fprintf(w, "  IRQ %s %s, affinity %s: %s\n", q.Number, q.Name, orUnknown(q.Affinity), perCPU(q.PerCPU))
				}
			}
		}
	}
	fmt.Fprintln(w)
	names := make([]string, 0, len(r.Now.Sysctls))
	for k := range r.Now.Sysctls {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(w, "%s = %s\n", k, r.Now.Sysctls[k])
	}
	switch {
	case r.Now.IRQBalance == nil:
		fmt.Fprintln(w, "irqbalance: unknown")
	case *r.Now.IRQBalance:
		fmt.Fprintln(w, "irqbalance: running (it moves interrupts on its own)")
	default:
		fmt.Fprintln(w, "irqbalance: not running")
	}
	if r.Now.CPUIdle != "" {
		fmt.Fprintf(w, "cpuidle: %s", r.Now.CPUIdle)
		if r.Now.GuestHaltPollNs != "" {
			fmt.Fprintf(w, ", guest_halt_poll_ns %s", r.Now.GuestHaltPollNs)
		}
		fmt.Fprintln(w)
	}
	if len(r.Now.Missing) > 0 {
		fmt.Fprintf(w, "unknown (not readable here): %s\n", strings.Join(r.Now.Missing, "; "))
	}
}

func firstRPS(n NIC) string {
	if len(n.RX) == 0 {
		return ""
	}
	return n.RX[0].RPSCPUs
}

func perCPU(xs []float64) string {
	var parts []string
	for i, x := range xs {
		if x != 0 {
			parts = append(parts, fmt.Sprintf("CPU%d %s/s", i, rate(x)))
		}
	}
	if len(parts) == 0 {
		return "idle"
	}
	return strings.Join(parts, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// rate prints a per-second figure short: 0, 12, 3.4k, 1.2M; ? if unknown.
func rate(v float64) string {
	switch {
	case v < 0:
		return "?"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 1, 64) + "M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + "k"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func count(v int64) string {
	if v < 0 {
		return "?"
	}
	return strconv.FormatInt(v, 10)
}
