//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procSample is a process's per-thread CPU time and context switches.
type procSample struct {
	threads map[int]threadSample
}

type threadSample struct {
	cpuNS int64 // schedstat, first field
	ctxsw int64 // voluntary + nonvoluntary
	// user and sys are the thread's user and system time in clock ticks
	// (stat, fields 14 and 15): tick samples of the mode it was in.
	user, sys int64
}

// sampleProc reads /proc/PID/task/*/{schedstat,stat,status}. Threads that exit
// while it reads are skipped.
func sampleProc(pid int) (procSample, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return procSample{}, err
	}
	s := procSample{threads: make(map[int]threadSample, len(ents))}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ts, err := readThread(dir + "/" + e.Name())
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
				continue
			}
			return procSample{}, err
		}
		s.threads[tid] = ts
	}
	if len(s.threads) == 0 {
		return procSample{}, fmt.Errorf("%s: no threads", dir)
	}
	return s, nil
}

func readThread(dir string) (threadSample, error) {
	var ts threadSample
	b, err := os.ReadFile(dir + "/schedstat")
	if err != nil {
		return ts, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ts, fmt.Errorf("%s/schedstat: empty", dir)
	}
	if ts.cpuNS, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return ts, fmt.Errorf("%s/schedstat: %w", dir, err)
	}
	b, err = os.ReadFile(dir + "/stat")
	if err != nil {
		return ts, err
	}
	if ts.user, ts.sys, err = parseStatTimes(b); err != nil {
		return ts, fmt.Errorf("%s/stat: %w", dir, err)
	}
	b, err = os.ReadFile(dir + "/status")
	if err != nil {
		return ts, err
	}
	found := 0
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "voluntary_ctxt_switches" && k != "nonvoluntary_ctxt_switches") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return ts, fmt.Errorf("%s/status: %s: %w", dir, k, err)
		}
		ts.ctxsw += n
		found++
	}
	if found != 2 {
		return ts, fmt.Errorf("%s/status: no context switch counts", dir)
	}
	return ts, nil
}

// since returns the CPU ns and context switches from b to s, thread by
// thread (threads born since count from zero), and how many of b's threads
// are gone.
func (s procSample) since(b procSample) (cpuNS, ctxsw int64, gone int) {
	for tid, t := range s.threads {
		o := b.threads[tid]
		cpuNS += t.cpuNS - o.cpuNS
		ctxsw += t.ctxsw - o.ctxsw
	}
	for tid := range b.threads {
		if _, ok := s.threads[tid]; !ok {
			gone++
		}
	}
	return cpuNS, ctxsw, gone
}

// parseStatTimes returns utime and stime, fields 14 and 15 of a
// /proc/PID/task/TID/stat line. The second field, the command in
// parentheses, may hold spaces and parentheses of its own, so the fields
// are counted from the last ')'.
func parseStatTimes(b []byte) (user, sys int64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("no command field")
	}
	// After the command: state (field 3) ... utime (14), stime (15).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the command, want at least 13", len(f))
	}
	if user, err = strconv.ParseInt(f[11], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	if sys, err = strconv.ParseInt(f[12], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return user, sys, nil
}

// ticksSince returns the user and system ticks from b to s, over the
// threads of s (threads born since count from zero).
func (s procSample) ticksSince(b procSample) (user, sys int64) {
	for tid, t := range s.threads {
		o := b.threads[tid]
		user += t.user - o.user
		sys += t.sys - o.sys
	}
	return max(user, 0), max(sys, 0)
}

// splitCPU splits usPerReq by the shares of user and sys ticks.
func splitCPU(usPerReq float64, user, sys int64) (userUs, kernelUs float64) {
	f := float64(user) / float64(user+sys)
	return usPerReq * f, usPerReq * (1 - f)
}

// cpuStat is the machine's CPU time from the "cpu" line of /proc/stat, in
// clock ticks.
type cpuStat struct {
	busy, total uint64
	ncpu        int
}

// readCPUStat reads /proc/stat; busy is everything but idle and iowait.
func readCPUStat() (cpuStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}, err
	}
	var s cpuStat
	found := false
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			s.ncpu++
			continue
		}
		// user nice system idle iowait irq softirq steal (guest time is
		// already in user and nice).
		if len(f) < 9 {
			return cpuStat{}, fmt.Errorf("/proc/stat: short cpu line %q", strings.TrimSpace(line))
		}
		for i := 1; i <= 8; i++ {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return cpuStat{}, fmt.Errorf("/proc/stat: %w", err)
			}
			s.total += n
			if i != 4 && i != 5 {
				s.busy += n
			}
		}
		found = true
	}
	if !found || s.ncpu == 0 {
		return cpuStat{}, errors.New("/proc/stat: no cpu lines")
	}
	return s, nil
}

// readRSS returns process pid's resident memory, VmRSS of
// /proc/PID/status, in bytes.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(b)
}

// parseVmRSS takes VmRSS ("VmRSS:   1234 kB") out of a /proc/PID/status,
// in bytes.
func parseVmRSS(b []byte) (int64, error) {
	for line := range strings.Lines(string(b)) {
		v, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS: unexpected value %q", strings.TrimSpace(v))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS: %w", err)
		}
		return n << 10, nil
	}
	return 0, errors.New("no VmRSS in /proc/PID/status")
}

// nofileMargin is the descriptors ringload keeps besides its connections:
// the runtime's, perf's pipes, /proc files being read.
const nofileMargin = 32

// checkNofile fails if the process may not open need descriptors. The Go
// runtime raised the soft RLIMIT_NOFILE to the hard one at start
// (syscall's rlimit.go), so the hard limit is the ceiling; without this
// check, connections past it would fail one by one as dial errors.
func checkNofile(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return os.NewSyscallError("getrlimit", err)
	}
	if lim.Cur < uint64(need) {
		return fmt.Errorf("the connections need %d descriptors, RLIMIT_NOFILE allows %d (hard limit %d): raise it (ulimit -n) or use fewer", need, lim.Cur, lim.Max)
	}
	return nil
}
