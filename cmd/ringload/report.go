//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
)

// result is what a run reports; it is printed as text or as one JSON
// object.
type result struct {
	// The run: the flags it had, the window as it happened (seconds),
	// requests completed in it, req/s and latency percentiles (µs).
	Addr        string  `json:"addr"`
	Conns       int     `json:"conns"`
	Size        int     `json:"size"`
	Proto       string  `json:"proto"`
	Depth       int     `json:"depth"`
	OfferedRate float64 `json:"offered_rate"` // -rate; 0: no cap
	// -proto kv: puts in percent, the cap on requests in flight (0: none).
	KVWrites    int     `json:"kv_writes,omitempty"`
	Outstanding int     `json:"outstanding,omitempty"`
	WarmupS     float64 `json:"warmup_s"`
	WindowS     float64 `json:"window_s"` // measured window, as it happened
	Requests    uint64  `json:"requests"`
	ReqPerS     float64 `json:"req_per_s"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	P999us      float64 `json:"p999_us"`
	P9999us     float64 `json:"p9999_us"`
	MaxUs       float64 `json:"max_us"`

	// Errors. DialErrors are connections that never connected; IOErrors
	// connections that failed before the end of the run.
	VerifyErrors     uint64 `json:"verify_errors"`
	FirstVerifyError string `json:"first_verify_error,omitempty"`
	DialErrors       int    `json:"dial_errors"`
	IOErrors         int    `json:"io_errors"`
	FirstError       string `json:"first_error,omitempty"`

	// Server statistics over the window; zero (and -1 for the per-request
	// ones) without -server-pid. ServerNote says what could not be read.
	ServerPID     int `json:"server_pid"`
	ServerThreads int `json:"server_threads"`
	// ServerThreadsMax is the most threads the server had (/proc/PID/status
	// Threads, sampled every 10 ms from the start of the load to its end).
	ServerThreadsMax  int     `json:"server_threads_max"`
	ServerCPUns       int64   `json:"server_cpu_ns"`
	ServerCPUCores    float64 `json:"server_cpu_cores"`
	ServerCPUusPerReq float64 `json:"server_cpu_us_per_req"`
	ReqPerServerCPUs  float64 `json:"req_per_server_cpu_s"`
	// ServerUserUsPerReq and ServerKernelUsPerReq split ServerCPUusPerReq
	// by the share of user and system ticks in ServerCPUTicks, the tick
	// samples of the server's threads over the window. -1: not measured
	// (no ticks).
	ServerUserUsPerReq   float64 `json:"server_user_us_per_req"`
	ServerKernelUsPerReq float64 `json:"server_kernel_us_per_req"`
	ServerCPUTicks       int64   `json:"server_cpu_ticks"`
	Syscalls             int64   `json:"syscalls"`                // -1: not measured
	SyscallsWindowS      float64 `json:"syscalls_window_s"`       // perf's counting window
	SyscallsPerReq       float64 `json:"syscalls_per_req"`        // -1: not measured
	SyscallsNote         string  `json:"syscalls_note,omitempty"` // why Syscalls is -1
	// LoopSyscalls is the server's own count of its event-loop syscalls
	// over the window (io_uring_enter, epoll_wait; ringecho -stats-file):
	// a lower bound, for when perf is missing. -1: not measured.
	LoopSyscalls       int64   `json:"loop_syscalls"`
	LoopSyscallsPerReq float64 `json:"loop_syscalls_per_req"`
	CtxSwitches        int64   `json:"ctx_switches"`
	CtxSwitchesPerReq  float64 `json:"ctx_switches_per_req"`
	ServerNote         string  `json:"server_note,omitempty"`

	// ServerRSSBase, ServerRSSIdle and ServerRSSEnd are the server's
	// resident memory (VmRSS) in bytes: before the first dial, once every
	// connection is open (with -prime, each has echoed once) and none is
	// loaded yet, and at the end of the window, with the connections
	// open and loaded. -1: not measured.
	ServerRSSBase int64 `json:"server_rss_base_bytes"`
	ServerRSSIdle int64 `json:"server_rss_idle_bytes"`
	ServerRSSEnd  int64 `json:"server_rss_bytes"`

	// Slowloris clients (-slowloris): connected, bytes dribbled and
	// echoed correctly, and errors (a wrong echo counts as one).
	SlowlorisConns      int    `json:"slowloris_conns"`
	SlowlorisBytes      int64  `json:"slowloris_bytes"`
	SlowlorisErrors     int64  `json:"slowloris_errors"`
	FirstSlowlorisError string `json:"first_slowloris_error,omitempty"`

	// The rest of the machine over the window, to tell a clean run from
	// one that shared its CPUs: this process's CPU (cores), all CPUs busy
	// (from /proc/stat, in cores) and what neither this process nor the
	// server used (machine - client - server; near zero on an otherwise
	// idle machine, but it includes perf and the kernel's softirq work for
	// the loopback traffic that is charged to no task). -1: not measured.
	ClientCPUCores  float64 `json:"client_cpu_cores"`
	MachineCPUCores float64 `json:"machine_cpu_cores"`
	OtherCPUCores   float64 `json:"other_cpu_cores"`
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (r *result) writeText(w io.Writer) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	fmt.Fprintf(bw, "ringload: %s, %s, %d conns, depth %d, %d B messages, warm-up %.3gs, measured %.3fs\n",
		r.Addr, r.Proto, r.Conns, r.Depth, r.Size, r.WarmupS, r.WindowS)
	fmt.Fprintf(bw, "requests          %d\n", r.Requests)
	if r.OfferedRate > 0 {
		fmt.Fprintf(bw, "req/s             %.0f (offered %.0f)\n", r.ReqPerS, r.OfferedRate)
	} else {
		fmt.Fprintf(bw, "req/s             %.0f\n", r.ReqPerS)
	}
	fmt.Fprintf(bw, "latency µs        p50 %.0f, p99 %.0f, p99.9 %.0f, p99.99 %.0f, max %.0f\n",
		r.P50us, r.P99us, r.P999us, r.P9999us, r.MaxUs)
	fmt.Fprintf(bw, "client CPU        %.3f cores (machine busy %.3f cores, other %.3f)\n",
		r.ClientCPUCores, r.MachineCPUCores, r.OtherCPUCores)
	if r.ServerPID != 0 {
		fmt.Fprintf(bw, "server            pid %d, %d threads (at most %d)\n", r.ServerPID, r.ServerThreads, r.ServerThreadsMax)
		fmt.Fprintf(bw, "server CPU        %.3f cores, %.3f µs/request, %.0f requests per CPU-second\n",
			r.ServerCPUCores, r.ServerCPUusPerReq, r.ReqPerServerCPUs)
		if r.ServerUserUsPerReq >= 0 {
			fmt.Fprintf(bw, "server CPU split  %.3f µs/request in user space, %.3f in the kernel (%d tick samples)\n",
				r.ServerUserUsPerReq, r.ServerKernelUsPerReq, r.ServerCPUTicks)
		}
		if r.Syscalls >= 0 {
			fmt.Fprintf(bw, "server syscalls   %.3f per request (%d in %.3fs)\n", r.SyscallsPerReq, r.Syscalls, r.SyscallsWindowS)
		} else {
			fmt.Fprintf(bw, "server syscalls   -1 (%s)\n", r.SyscallsNote)
		}
		if r.LoopSyscalls >= 0 {
			fmt.Fprintf(bw, "loop syscalls     %.3f per request (%d; the library's own count: io_uring_enter and epoll_wait only)\n",
				r.LoopSyscallsPerReq, r.LoopSyscalls)
		}
		fmt.Fprintf(bw, "server ctx sw     %.3f per request (%d)\n", r.CtxSwitchesPerReq, r.CtxSwitches)
		if r.ServerRSSBase >= 0 && r.ServerRSSIdle >= 0 && r.ServerRSSEnd >= 0 {
			fmt.Fprintf(bw, "server RSS        %.1f MiB before the connections, %.1f MiB with them idle, %.1f MiB at the end (%.0f B per connection idle, %.0f at the end)\n",
				mib(r.ServerRSSBase), mib(r.ServerRSSIdle), mib(r.ServerRSSEnd),
				float64(r.ServerRSSIdle-r.ServerRSSBase)/float64(r.Conns), float64(r.ServerRSSEnd-r.ServerRSSBase)/float64(r.Conns))
		}
		if r.ServerNote != "" {
			fmt.Fprintf(bw, "server note       %s\n", r.ServerNote)
		}
	}
	fmt.Fprintf(bw, "verify errors     %d\n", r.VerifyErrors)
	if r.FirstVerifyError != "" {
		fmt.Fprintf(bw, "first verify err  %s\n", r.FirstVerifyError)
	}
	fmt.Fprintf(bw, "conn errors       %d dial, %d I/O\n", r.DialErrors, r.IOErrors)
	if r.SlowlorisConns > 0 {
		fmt.Fprintf(bw, "slowloris         %d conns, %d bytes echoed, %d errors\n", r.SlowlorisConns, r.SlowlorisBytes, r.SlowlorisErrors)
	}
	if r.FirstError != "" {
		fmt.Fprintf(bw, "first conn error  %s\n", r.FirstError)
	}
}
