//go:build linux

package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cpuTicks is the idle time (idle and iowait) of some CPUs, read at a
// moment, and the user and kernel time they counted: busySince makes their
// busy time of two readings, userShareSince splits it.
type cpuTicks struct {
	idle uint64 // idle and iowait, in clock ticks
	user uint64 // user and nice
	kern uint64 // system, irq and softirq
	at   time.Time
	n    int // CPUs summed
}

// userHZ is the unit of /proc/stat's times (USER_HZ, 100 on every
// architecture Linux exports it for).
const userHZ = 100

// busySince is how many of c's CPUs were busy, on average, since p: the
// time between the two readings less the idle time that passed. With
// NO_HZ the kernel measures idle time exactly, while user, system and
// softirq time are sampled at the tick; at a fifth busy, 6 s of 250 Hz
// ticks count busy time to ±6%, the idle time to 0.2%.
func (c cpuTicks) busySince(p cpuTicks) float64 {
	wall := c.at.Sub(p.at).Seconds() * userHZ
	if wall <= 0 {
		return 0
	}
	idle := float64(c.idle-p.idle) / wall
	return min(max(float64(c.n)-idle, 0), float64(c.n))
}

// userShareSince is the share of user ticks in the user and kernel ticks
// c's CPUs counted since p, or -1 if they counted none. Both are sampled
// at the tick (steal time is in neither), so the share is what splits the
// exactly measured busy time.
func (c cpuTicks) userShareSince(p cpuTicks) float64 {
	u, k := c.user-p.user, c.kern-p.kern
	if c.user < p.user || c.kern < p.kern || u+k == 0 {
		return -1
	}
	return float64(u) / float64(u+k)
}

// readCPUTicks sums the idle and iowait, user and nice, and system, irq
// and softirq times of /proc/stat's lines of the given CPUs.
func readCPUTicks(cpus cpuSet) (cpuTicks, error) {
	now := time.Now()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}, err
	}
	t, err := parseCPUTicks(string(b), cpus)
	t.at = now
	return t, err
}

// parseCPUTicks sums the times readCPUTicks reads from /proc/stat's text.
func parseCPUTicks(stat string, cpus cpuSet) (cpuTicks, error) {
	var t cpuTicks
	found := 0
	for line := range strings.Lines(stat) {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil || !slices.Contains(cpus, n) {
			continue
		}
		found++
		// cpuN user nice system idle iowait irq softirq steal ...
		for i, sum := range []*uint64{1: &t.user, 2: &t.user, 3: &t.kern, 4: &t.idle, 5: &t.idle, 6: &t.kern, 7: &t.kern} {
			if sum == nil {
				continue
			}
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return cpuTicks{}, fmt.Errorf("/proc/stat: %w", err)
			}
			*sum += v
		}
	}
	if found != len(cpus) {
		return t, fmt.Errorf("/proc/stat: found %d of CPUs %s", found, cpus)
	}
	t.n = found
	return t, nil
}
