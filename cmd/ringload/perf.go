//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// syscallWindow is the longest the server's system calls are counted
// for, after the measured window.
const syscallWindow = 500 * time.Millisecond

// perfResult is a syscall count from perf stat and the time it counted for
// (the length of its sleep workload).
type perfResult struct {
	count  int64
	window time.Duration
	err    error
}

// runPerf counts pid's syscalls for d with perf stat. bin is the perf
// binary, "" for perf from PATH. It gives up 15 s after d.
func runPerf(ctx context.Context, bin string, pid int, d time.Duration) perfResult {
	if bin == "" {
		p, err := exec.LookPath("perf")
		if err != nil {
			return perfResult{err: fmt.Errorf("perf not found: %w", err)}
		}
		bin = p
	}
	ctx, cancel := context.WithTimeout(ctx, d+15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "stat", "-e", "raw_syscalls:sys_enter", "-x,",
		"-p", strconv.Itoa(pid), "--", "sleep", strconv.FormatFloat(d.Seconds(), 'f', 3, 64))
	// perf and its sleep get a process group of their own; on cancel the
	// group gets SIGINT (perf waits for its workload, so the sleep has to
	// end too). Should perf still not exit, it is killed 2 s later and its
	// output pipe closed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 2 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	if err := cmd.Run(); err != nil {
		return perfResult{err: fmt.Errorf("perf stat: %v: %s", err, lastLine(stderr.String()))}
	}
	r := parsePerf(stderr.String())
	r.window = d
	return r
}

// parsePerf reads the count from the raw_syscalls:sys_enter line of perf
// stat -x, output: count,unit,event,running-ns,percent,... (The running
// time of a per-task event is the time its threads were on a CPU, not the
// wall time counted over, so it is not used.)
func parsePerf(out string) perfResult {
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimSpace(line), ",")
		if len(f) < 3 || f[2] != "raw_syscalls:sys_enter" {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return perfResult{err: fmt.Errorf("perf stat: count %q (is the tracepoint available? try as root, or lower kernel.perf_event_paranoid)", f[0])}
		}
		return perfResult{count: n}
	}
	return perfResult{err: fmt.Errorf("perf stat: no raw_syscalls:sys_enter line in output: %s", lastLine(out))}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
