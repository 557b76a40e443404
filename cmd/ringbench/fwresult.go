//go:build linux

package main

import (
	"slices"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// busySample is /proc/stat's times of the server's CPUs and of the
// server's and client's CPUs together. On loopback the kernel's TCP work
// for a connection runs in softirqs on whichever CPU raised them, charged
// to whatever thread ran there: the server's threads' CPU (schedstat)
// moves with that split, the CPUs' busy time does not.
type busySample struct {
	server, all cpuTicks
	ok          bool
}

// sampleBusy reads the CPUs' times, if both CPU sets are known.
func (r *fwRunner) sampleBusy() busySample {
	if len(r.fc.serverCPUs) == 0 || len(r.fc.loadCPUs) == 0 {
		return busySample{}
	}
	all := slices.Concat(r.fc.serverCPUs, r.fc.loadCPUs)
	slices.Sort(all)
	all = slices.Compact(all)
	s, err1 := readCPUTicks(r.fc.serverCPUs)
	a, err2 := readCPUTicks(all)
	return busySample{server: s, all: a, ok: err1 == nil && err2 == nil}
}

// since returns the busy CPU-seconds of the server's CPUs and of all,
// from b to a later sample (cpuTicks.busySince: the wall time between
// them less the idle time), or -1 where unknown.
func (b busySample) since(later busySample) (server, all float64) {
	busy := func(x, y cpuTicks) float64 {
		wall := y.at.Sub(x.at).Seconds()
		if wall <= 0 {
			return -1
		}
		return y.busySince(x) * wall
	}
	if !b.ok || !later.ok {
		return -1, -1
	}
	return busy(b.server, later.server), busy(b.all, later.all)
}

// perBusy returns bytes per busy second, or -1 where either is unknown.
func perBusy(bytes, busy float64) float64 {
	if bytes < 0 || busy <= 0 {
		return -1
	}
	return bytes / busy
}

// fwResult is a run's result, in the fields of ringload's result that
// ringbench summarizes (so the tables and charts read both), plus the
// clients' own.
func fwResult(res clientResult, cpuS, wall, ctxsw float64) map[string]any {
	per := func(x, y float64) float64 {
		if x < 0 || y <= 0 {
			return -1
		}
		return x / y
	}
	bytesPerS := -1.0
	if res.Bytes >= 0 {
		bytesPerS = per(res.Bytes, res.Seconds)
	}
	// The client's CPU spans its whole run, as the server's does; both
	// processes' together is what the load cost the machine in user
	// threads (on loopback the kernel's work for either side is charged
	// to whichever thread ran it).
	both := -1.0
	if cpuS >= 0 && res.ClientCPUs >= 0 {
		both = cpuS + res.ClientCPUs
	}
	mib := -1.0
	if res.Bytes >= 0 {
		mib = res.Bytes / (1 << 20)
	}
	return map[string]any{
		"req_per_s": res.ReqPerS, "p50_us": res.P50us, "p99_us": res.P99us, "p999_us": res.P999us, "p9999_us": -1,
		"requests": res.Requests, "window_s": res.Seconds, "bytes": res.Bytes, "bytes_per_s": bytesPerS,
		"server_cpu_s": cpuS, "server_cpu_cores": per(cpuS, wall),
		"server_cpu_us_per_req":  per(cpuS*1e6, res.Requests),
		"req_per_server_cpu_s":   per(res.Requests, cpuS),
		"bytes_per_server_cpu_s": per(res.Bytes, cpuS),
		"server_cpu_ms_per_mib":  per(cpuS*1e3, mib),
		"client_cpu_s":           res.ClientCPUs,
		"client_cpu_us_per_req":  per(res.ClientCPUs*1e6, res.Requests),
		"client_cpu_ms_per_mib":  per(res.ClientCPUs*1e3, mib),
		"both_cpu_us_per_req":    per(both*1e6, res.Requests),
		"both_cpu_ms_per_mib":    per(both*1e3, mib),
		"req_per_both_cpu_s":     per(res.Requests, both),
		"bytes_per_both_cpu_s":   per(res.Bytes, both),
		"ctx_switches_per_req":   per(ctxsw, res.Requests),
		"syscalls_per_req":       -1, "loop_syscalls_per_req": -1,
		// io_errors feeds summarize's error count.
		"errors": res.Errors, "io_errors": res.Errors, "error_text": res.ErrorText,
	}
}

// runErrors returns the client's error count in a run's result.
func runErrors(run benchfmt.Run) int64 {
	if v, ok := run.Result["errors"].(float64); ok {
		return int64(v)
	}
	if v, ok := run.Result["errors"].(int64); ok {
		return v
	}
	return 0
}
