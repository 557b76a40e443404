//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procCPU is a process's CPU time and context switches, thread by thread.
type procCPU map[int][2]int64

// sampleProcCPU reads /proc/PID/task/*/schedstat (the first field: ns on a
// CPU) and the context switches in .../status. Threads that exit while it
// reads are skipped.
func sampleProcCPU(pid int) (procCPU, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	s := procCPU{}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		sched, err1 := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		status, err2 := os.ReadFile(filepath.Join(dir, e.Name(), "status"))
		if err := errors.Join(err1, err2); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		ns, sw, err := parseThreadCPU(string(sched), string(status))
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", dir, e.Name(), err)
		}
		s[tid] = [2]int64{ns, sw}
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("%s: no threads", dir)
	}
	return s, nil
}

// parseThreadCPU reads a thread's CPU ns from its schedstat and its
// voluntary and involuntary context switches from its status.
func parseThreadCPU(schedstat, status string) (ns, ctxsw int64, err error) {
	f := strings.Fields(schedstat)
	if len(f) == 0 {
		return 0, 0, errors.New("schedstat: empty")
	}
	if ns, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("schedstat: %w", err)
	}
	found := 0
	for line := range strings.Lines(status) {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("status: %s: %w", k, err)
			}
			ctxsw += n
			found++
		}
	}
	if found != 2 {
		return 0, 0, errors.New("status: no context switch counts")
	}
	return ns, ctxsw, nil
}

// since returns the CPU ns and context switches from b to s, thread by
// thread (threads born since count from zero), and how many of b's
// threads are gone (their time since b is lost).
func (s procCPU) since(b procCPU) (cpuNS, ctxsw int64, gone int) {
	for tid, t := range s {
		o := b[tid]
		cpuNS += t[0] - o[0]
		ctxsw += t[1] - o[1]
	}
	for tid := range b {
		if _, ok := s[tid]; !ok {
			gone++
		}
	}
	return cpuNS, ctxsw, gone
}
