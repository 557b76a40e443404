//go:build linux

// Command ringload is an out-of-process load generator for echo servers
// over TCP. It measures throughput and latency at the client and, given the
// server's PID, the server's CPU time, syscalls and context switches per
// request. It is the measurement BASELINE.md describes (1 KiB messages,
// server and generator pinned to different CPUs), and the load ringbench
// runs.
//
//	taskset -c 0 ringecho -addr 127.0.0.1:7001 -engine epoll &
//	taskset -c 1 ringload -addr 127.0.0.1:7001 -server-pid $! [-conns 100] [-size 1024] [-warmup 2s] [-duration 10s] [-json]
//
// Each of -conns connections runs on its own goroutine with std net. With
// -depth 1 (the default) it does strict ping-pong: it writes one message,
// reads the reply and checks it is the bytes it sent. With -depth N it
// pipelines: it writes N messages in one write, then reads the N replies
// (each message's latency is then its batch's round trip). The payload of
// every message starts with the connection id and a sequence number
// (little-endian uint64s), so an echo that went to the wrong connection,
// came back out of order or was corrupted counts as a verify error. Verify
// errors are counted during warm-up and measurement alike.
//
// -proto echo (the default) sends raw -size byte messages; -proto rpc frames
// each -size byte payload with a 4-byte big-endian length
// (internal/rpcframe), netpoll-benchmark's RPC rules. -proto kv loads
// cmd/ringkv, ringbench's key-value server (internal/kvproto): each
// request a get of a random one of -kv-records 4 KiB records, or a put
// -kv-writes percent of the time, every reply checked; -outstanding caps
// the requests in flight over all connections (kv.go).
//
// -rate R caps the offered load at R requests per second over all
// connections: a pacer on a thread of its own (pace.go) sends the
// batches, evenly spaced, each connection's at its turns (one in every
// -conns); a connection whose reply comes after its turn sends its next
// batch at once, and turns it missed meanwhile are dropped, so the
// offered rate is a ceiling. Go's own timers would not do: an idle Go
// program sleeps in whole milliseconds and its due timers fire
// together, which sent the requests in bunches. Latency is measured from
// the send. At a fixed rate, servers are compared on the CPU and
// syscalls they spend per request rather than on how fast the one-core load
// generator goes.
//
// After -warmup the generator measures for -duration (or until -requests
// requests, whichever comes first): requests completed, req/s and latency
// p50, p99, p99.9, p99.99 and max (internal/hdr, within about 3%). With
// -server-pid it also reports, over the same window:
//
//   - server CPU: the sum over every thread of /proc/PID/task/*/schedstat
//     (first field, ns of CPU time), read at the start and end of the window;
//     reported as cores used, CPU µs per request and requests per server
//     CPU-second;
//   - that CPU split into user space and kernel by the share of the
//     threads' user and system ticks over the window (fields 14 and 15 of
//     /proc/PID/task/*/stat): the kernel samples which mode a thread is in
//     at every timer tick (4 ms at HZ=250), so over a 3 s window at one
//     busy core the user share of a server that spends a seventh of its
//     time there rests on about a hundred samples, within about 10%; the
//     ticks are reported with it. Kernel time includes the softirq work
//     that ran on the server's threads (for loopback, much of the peer's
//     receive path);
//   - syscalls: `perf stat -e raw_syscalls:sys_enter -x, -p PID -- sleep D`
//     in a window of its own right after the measured one, under the same
//     load (D is -duration, at most syscallWindow): perf's tracepoint costs
//     the server time on every system call, and counted during the
//     measured window it would add that time to the CPU figures of the
//     servers that make the most calls. Syscalls per request is perf's
//     count over D divided by the measured window's req/s; -1 with the
//     reason if perf is missing or fails;
//   - context switches: voluntary plus nonvoluntary, summed over
//     /proc/PID/task/*/status, per request;
//   - with -server-stats FILE (a ringecho run with -stats-file FILE), the
//     library's own count of its event-loop syscalls (io_uring_enter and
//     epoll_wait) over the window: ringload sends the server SIGUSR1 at the
//     window's start and end and reads the counters it dumps. A lower
//     bound on the server's syscalls, for machines without perf.
//
// -alt-addr B -alt-pid PID compares two servers, -addr (A) and B, in turns
// (alt.go): each gets -conns connections of its own (-proto echo or rpc,
// at -depth; with -rate, each turn paced at that rate), the two crowds run one at a time for -alt-period each, A B then B A and so on,
// and every pair of turns gives one ratio of A's requests per server
// CPU-second over B's, reported as the median of the pairs with a 95%
// bootstrap interval. On machines whose pace changes from one second to
// the next, runs one after the other catch different paces; turns of half
// a second catch the same:
//
//	taskset -c 1 ringload -addr A -server-pid PA -alt-addr B -alt-pid PB -conns 100 -duration 40s
//
// It always reports its own CPU (client cores) and the CPU that neither it
// nor the server used over the window, from /proc/stat ("other"): near zero
// on an otherwise idle machine, so a large value marks a run that shared its
// CPUs with other work.
//
// With -slowloris N it also holds N more connections, each sending one
// byte every 1-2 s and checking its echo (slowloris clients), through the
// whole run; they are reported apart and not measured, so a run with and one
// without them show what the crowd costs the other clients.
//
// Every loop is bounded: connections carry a deadline past the end of the
// run, and when the window closes any connection still blocked is cut off.
// Connection errors are counted and reported, never fatal. The exit status
// is 1 if any echo failed verification or no request completed, 2 for bad
// flags, 0 otherwise.
//
// With -serve-std the binary instead runs the reference server: std net
// with one goroutine per connection (echo, or rpc with -proto rpc), until
// SIGINT or SIGTERM:
//
//	taskset -c 0 ringload -serve-std -addr 127.0.0.1:7001 [-proto rpc]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
	"github.com/ringpoll/ringpoll/internal/hdr"
	"github.com/ringpoll/ringpoll/internal/kvproto"
	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is what one load run does.
type config struct {
	addr        string
	conns       int
	size        int    // payload bytes per message
	proto       string // "echo" or "rpc"
	depth       int    // messages in flight per connection (1: ping-pong)
	rate        float64
	requests    uint64 // end the window after this many requests (0: no limit)
	warmup      time.Duration
	duration    time.Duration
	serverPID   int           // 0: no server statistics
	dialTimeout time.Duration // per connection
	perf        string        // perf binary; "" looks it up in PATH
	serverStats string        // ringecho's -stats-file; "": none
	slowloris   int           // extra connections dribbling a byte every 1-2 s, not measured
	// slowlorisFirst spreads the slowloris connections' first bytes over
	// that long (the command line: 2 s). 0, for tests: each sends its
	// first byte at once and the load starts after every echo came back
	// (or the connection failed).
	slowlorisFirst time.Duration
	// statsWait bounds the wait for each -server-stats dump (0:
	// benchfmt.DefaultStatsWait).
	statsWait time.Duration
	// -proto kv: records in the server's file, percent of puts, and the
	// cap on requests in flight over all connections (0: none).
	kvRecords   int64
	kvWrites    int
	outstanding int
}

// headerLen is the connection id and sequence number at the start of every
// message's payload.
const headerLen = 16

// wireLen is the bytes one message takes on the wire.
func (c config) wireLen() int {
	if c.proto == "rpc" {
		return rpcframe.HeaderLen + c.size
	}
	return c.size
}

// run is main without the exit: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ringload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7000", "server address (host:port)")
	conns := fs.Int("conns", 100, "connections, each a goroutine doing strict ping-pong")
	size := fs.Int("size", 1024, "message size in bytes (at least 16; with -proto rpc, the payload after the 4-byte length)")
	proto := fs.String("proto", "echo", "echo (raw bytes echoed), rpc (4-byte big-endian length, then the payload; see internal/rpcframe), kv (gets and puts of 4 KiB records, cmd/ringkv), udp (datagrams one way from -conns sockets, as fast as they go) or udp-rr (DNS-like: -conns clients each awaiting its request's echo, at -rate)")
	gso := fs.Bool("gso", true, "with -proto udp: send runs of datagrams as one message the kernel cuts (UDP GSO)")
	depth := fs.Int("depth", 1, "messages in flight per connection: 1 is strict ping-pong; more pipelines: write that many, then read their replies")
	rate := fs.Float64("rate", 0, "offered load in requests/s over all connections (0: as fast as replies come)")
	requests := fs.Uint64("requests", 0, "end the measurement window after this many requests (0: run for -duration; -duration still bounds it)")
	warmup := fs.Duration("warmup", 2*time.Second, "load before measuring")
	duration := fs.Duration("duration", 10*time.Second, "measurement window")
	serverPID := fs.Int("server-pid", 0, "server process to measure (CPU, syscalls, context switches); 0: none")
	slowloris := fs.Int("slowloris", 0, "also hold this many connections that each send one byte every 1-2 s and check its echo (slowloris clients; not measured)")
	serverStats := fs.String("server-stats", "", "with -server-pid: the server's ringecho -stats-file, to count the library's own event-loop syscalls (SIGUSR1 asks for it)")
	kvRecords := fs.Int64("kv-records", 0, "with -proto kv: the records in the server's file (requests pick one at random)")
	kvWrites := fs.Int("kv-writes", 0, "with -proto kv: percent of requests that are puts (0-100)")
	outstanding := fs.Int("outstanding", 0, "at most this many requests in flight over all connections (0: one per connection)")
	latencyLog := fs.String("latency-log", "", "with -proto udp-rr: also write every measured request to this file, one line each: client, send time (Unix ns), latency (ns)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	serveStdFlag := fs.Bool("serve-std", false, "run the std net reference echo server on -addr instead, until SIGINT/SIGTERM")
	bufSize := fs.Int("buf", 16<<10, "with -serve-std: read buffer per connection, 1 KiB to 64 KiB")
	altAddr := fs.String("alt-addr", "", "a second server: load -addr and this one in turns of -alt-period (A B, B A, ...), each with its own -conns connections, and report each one's server CPU per request and, per pair of turns, A's requests per CPU-second over B's (needs -server-pid and -alt-pid; -proto echo or rpc at any -depth; with -rate, each turn is offered that rate)")
	altPID := fs.Int("alt-pid", 0, "with -alt-addr: the second server's process")
	altPeriod := fs.Duration("alt-period", 500*time.Millisecond, "with -alt-addr: one turn; -duration holds -duration/(2*period) pairs of turns, after a -warmup turn each")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "ringload: unexpected arguments %q\n", fs.Args())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if *proto == "udp" {
		if *conns < 1 || *conns > 1024 || *size < 1 || *size > 65507 || *rate < 0 {
			fmt.Fprintf(stderr, "ringload: -proto udp: -conns %d, -size %d, -rate %v: want 1 to 1024 flows of 1 to 65507 bytes, a rate of 0 (unpaced) or more\n", *conns, *size, *rate)
			return 2
		}
		res, err := udpLoad(ctx, *addr, *conns, *size, *gso, *rate, *warmup, *duration)
		if err == nil {
			err = res.write(stdout, *asJSON)
		}
		if err != nil {
			fmt.Fprintln(stderr, "ringload:", err)
			return 1
		}
		return 0
	}
	if *proto == "udp-rr" {
		if *conns < 1 || *conns > 10000 || *size < 16 || *size > 65507 || *rate < 0 {
			fmt.Fprintf(stderr, "ringload: -proto udp-rr: -conns %d, -size %d, -rate %v: want 1 to 10000 clients, 16 to 65507 bytes, a rate of 0 or more\n", *conns, *size, *rate)
			return 2
		}
		var log io.Writer
		if *latencyLog != "" {
			f, err := os.Create(*latencyLog)
			if err != nil {
				fmt.Fprintln(stderr, "ringload: -latency-log:", err)
				return 2
			}
			defer f.Close()
			log = f
		}
		res, err := udpRR(ctx, *addr, *conns, *size, *rate, *warmup, *duration, log)
		if err == nil {
			err = res.write(stdout, *asJSON)
		}
		if err != nil {
			fmt.Fprintln(stderr, "ringload:", err)
			return 1
		}
		if res.Errors > 0 {
			fmt.Fprintf(stderr, "ringload: %d errors; first: %s\n", res.Errors, res.FirstErr)
			return 1
		}
		return 0
	}

	if *serveStdFlag {
		if *bufSize < 1<<10 || *bufSize > 64<<10 {
			fmt.Fprintf(stderr, "ringload: -buf %d: want 1024 to 65536\n", *bufSize)
			return 2
		}
		if *proto != "echo" && *proto != "rpc" {
			fmt.Fprintf(stderr, "ringload: -proto %q: want echo or rpc\n", *proto)
			return 2
		}
		if err := serveStd(ctx, *addr, *proto, *bufSize, func(a net.Addr) {
			fmt.Fprintf(stderr, "ringload: std net %s server listening on %s (buffer %d B)\n", *proto, a, *bufSize)
		}); err != nil {
			fmt.Fprintln(stderr, "ringload:", err)
			return 1
		}
		return 0
	}

	if *altAddr != "" {
		ac := altConfig{addrs: [2]string{*addr, *altAddr}, pids: [2]int{*serverPID, *altPID}, conns: *conns, size: *size, proto: *proto, depth: *depth, rate: *rate, period: *altPeriod, warmup: *warmup}
		if *altPeriod > 0 {
			ac.pairs = int(*duration / (2 * *altPeriod))
		}
		if err := checkAlt(ac); err != nil {
			fmt.Fprintln(stderr, "ringload:", err)
			return 2
		}
		res, err := altLoad(ctx, ac)
		if err == nil {
			err = writeAlt(stdout, res, *asJSON)
		}
		if err != nil {
			fmt.Fprintln(stderr, "ringload:", err)
			return 1
		}
		if res.VerifyErrors > 0 {
			fmt.Fprintf(stderr, "ringload: %d echoes failed verification; first: %s\n", res.VerifyErrors, res.FirstError)
			return 1
		}
		return 0
	}

	cfg := config{
		addr:        *addr,
		conns:       *conns,
		size:        *size,
		proto:       *proto,
		depth:       *depth,
		rate:        *rate,
		requests:    *requests,
		warmup:      *warmup,
		duration:    *duration,
		serverPID:   *serverPID,
		serverStats: *serverStats,
		slowloris:   *slowloris,
		dialTimeout: 5 * time.Second,

		slowlorisFirst: 2 * time.Second,
		kvRecords:      *kvRecords,
		kvWrites:       *kvWrites,
		outstanding:    *outstanding,
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(stderr, "ringload:", err)
		return 2
	}
	res, err := load(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "ringload:", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(res); err != nil {
			fmt.Fprintln(stderr, "ringload:", err)
			return 1
		}
	} else {
		res.writeText(stdout)
	}
	switch {
	case res.VerifyErrors > 0:
		fmt.Fprintf(stderr, "ringload: %d echoes failed verification; first: %s\n", res.VerifyErrors, res.FirstVerifyError)
		return 1
	case res.Requests == 0:
		fmt.Fprintf(stderr, "ringload: no request completed in the window (first error: %s)\n", orNone(res.FirstError))
		return 1
	}
	return 0
}

func (c config) check() error {
	switch {
	case c.addr == "":
		return errors.New("-addr is empty")
	case c.conns < 1:
		return fmt.Errorf("-conns %d: want at least 1", c.conns)
	case c.size < headerLen:
		return fmt.Errorf("-size %d: want at least %d (the id and sequence header)", c.size, headerLen)
	case c.size > 64<<20:
		return fmt.Errorf("-size %d: want at most 64 MiB", c.size)
	case c.proto != "echo" && c.proto != "rpc" && c.proto != "kv":
		return fmt.Errorf("-proto %q: want echo, rpc or kv", c.proto)
	case c.proto == "kv" && c.kvRecords < 1:
		return fmt.Errorf("-kv-records %d: -proto kv needs the server file's record count", c.kvRecords)
	case c.kvWrites < 0 || c.kvWrites > 100:
		return fmt.Errorf("-kv-writes %d: want a percentage, 0 to 100", c.kvWrites)
	case c.proto == "kv" && (c.depth != 1 || c.rate != 0):
		return errors.New("-proto kv sends one request at a time per connection, as fast as replies come: no -depth or -rate")
	case c.outstanding < 0:
		return fmt.Errorf("-outstanding %d: want 0 (no cap) or more", c.outstanding)
	case c.outstanding > 0 && c.proto != "kv":
		return errors.New("-outstanding needs -proto kv")
	case c.proto == "rpc" && c.size > rpcframe.MaxPayload:
		return fmt.Errorf("-size %d: the rpc payload is at most %d", c.size, rpcframe.MaxPayload)
	case c.depth < 1 || c.depth > 1024:
		return fmt.Errorf("-depth %d: want 1 to 1024", c.depth)
	case c.depth*c.wireLen() > 64<<20:
		return fmt.Errorf("-depth %d x %d B: want at most 64 MiB in flight per connection", c.depth, c.wireLen())
	case c.rate < 0 || math.IsNaN(c.rate) || math.IsInf(c.rate, 0):
		return fmt.Errorf("-rate %v: want 0 (no cap) or a request rate", c.rate)
	case c.warmup < 0:
		return fmt.Errorf("-warmup %v: want 0 or more", c.warmup)
	case c.duration <= 0:
		return fmt.Errorf("-duration %v: want more than 0", c.duration)
	case c.serverPID < 0:
		return fmt.Errorf("-server-pid %d: want a PID", c.serverPID)
	case c.slowloris < 0 || c.slowloris > 100000:
		return fmt.Errorf("-slowloris %d: want 0 to 100000", c.slowloris)
	case c.serverStats != "" && c.serverPID == 0:
		return errors.New("-server-stats needs -server-pid (the server to signal)")
	}
	return nil
}

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

// Phases of a run, as the workers see them.
const (
	phaseWarmup  int32 = iota
	phaseMeasure       // requests completing now count
	phaseTail          // load goes on, uncounted, until perf is done
	phaseStop
)

// worker is one connection doing ping-pong, or pipelined batches. Its
// fields belong to its goroutine until that goroutine ends.
type worker struct {
	id          uint64
	conn        net.Conn
	cfg         *config
	pacer       *pacer     // with -rate: sends the batches; nil: no pacing
	slot        *pacedSlot // the connection's slot under pacer
	wbuf        []byte     // the batch being sent
	requests    uint64     // completed in the window
	verifyErrs  uint64
	firstVerify string
	err         error // the I/O error that ended it early, if any
	hist        hdr.Histogram
}

// shared is what the workers of one run share.
type shared struct {
	phase    atomic.Int32
	stop     chan struct{} // closed when the phase becomes phaseStop
	slots    chan struct{} // -outstanding: a token per request in flight; nil: no cap
	counted  atomic.Uint64 // requests completed in the window
	budget   uint64        // -requests; 0: none
	spent    chan struct{} // closed when counted reaches budget
	spentOne sync.Once
}

// message lays out message k of a batch in buf: the rpc length prefix, if
// any, then the payload: connection id, sequence number, and a pattern
// that differs per connection and per byte.
func (w *worker) fill(buf []byte) {
	n := w.cfg.wireLen()
	for k := 0; k < w.cfg.depth; k++ {
		m := buf[k*n : (k+1)*n]
		if w.cfg.proto == "rpc" {
			rpcframe.PutHeader(m, w.cfg.size)
			m = m[rpcframe.HeaderLen:]
		}
		binary.LittleEndian.PutUint64(m[0:8], w.id)
		for i := headerLen; i < len(m); i++ {
			m[i] = byte(w.id*131 + uint64(i)*7 + 1)
		}
	}
}

// payload returns message k's payload in a batch buffer.
func (w *worker) payload(buf []byte, k int) []byte {
	n := w.cfg.wireLen()
	m := buf[k*n : (k+1)*n]
	if w.cfg.proto == "rpc" {
		return m[rpcframe.HeaderLen:]
	}
	return m
}

func (w *worker) loop(sh *shared) {
	depth := w.cfg.depth
	w.wbuf = make([]byte, depth*w.cfg.wireLen())
	wbuf := w.wbuf
	rbuf := make([]byte, len(wbuf))
	w.fill(wbuf)
	for seq, batch := uint64(0), uint64(1); sh.phase.Load() != phaseStop; seq, batch = seq+uint64(depth), batch+1 {
		for k := 0; k < depth; k++ {
			binary.LittleEndian.PutUint64(w.payload(wbuf, k)[8:16], seq+uint64(k))
		}
		var t0 time.Time
		if w.pacer != nil {
			w.slot.ready(w.pacer) // the pacer sends it at the connection's turn
		} else {
			t0 = time.Now()
			if _, err := w.conn.Write(wbuf); err != nil {
				w.fail(sh, err)
				return
			}
		}
		if _, err := io.ReadFull(w.conn, rbuf); err != nil {
			if w.pacer != nil {
				if serr := w.slot.sendErr(); serr != nil {
					err = serr
				}
			}
			w.fail(sh, err)
			return
		}
		var lat time.Duration
		if w.pacer != nil {
			took, ok := w.slot.answered(w.pacer, batch, false)
			if !ok {
				w.fail(sh, fmt.Errorf("conn %d: a reply to batch %d, which the pacer did not send", w.id, batch))
				return
			}
			lat = took
		} else {
			lat = time.Since(t0)
		}
		// A pipelined message's latency is its batch's round trip.
		if !bytes.Equal(wbuf, rbuf) {
			w.verifyErrs++
			if w.firstVerify == "" {
				w.firstVerify = w.describeMismatch(seq, wbuf, rbuf)
			}
		}
		if sh.phase.Load() == phaseMeasure {
			w.requests += uint64(depth)
			w.hist.RecordN(lat, uint64(depth))
			if sh.budget > 0 && sh.counted.Add(uint64(depth)) >= sh.budget {
				sh.spentOne.Do(func() { close(sh.spent) })
			}
		}
	}
}

// fail records err unless the run is over (then the error is the deadline
// or close that ended it) or the run's own deadline ended the tail.
func (w *worker) fail(sh *shared, err error) {
	switch sh.phase.Load() {
	case phaseStop:
	case phaseTail:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			w.err = err
		}
	default:
		w.err = err
	}
}

// describeMismatch says what is wrong with the first message of a batch
// that differs from what was sent.
func (w *worker) describeMismatch(seq uint64, want, got []byte) string {
	n := w.cfg.wireLen()
	for k := 0; k < w.cfg.depth; k++ {
		wm, gm := want[k*n:(k+1)*n], got[k*n:(k+1)*n]
		if bytes.Equal(wm, gm) {
			continue
		}
		s := seq + uint64(k)
		if w.cfg.proto == "rpc" && !bytes.Equal(wm[:rpcframe.HeaderLen], gm[:rpcframe.HeaderLen]) {
			return fmt.Sprintf("conn %d seq %d: reply frame announces %d bytes, sent %d",
				w.id, s, binary.BigEndian.Uint32(gm), w.cfg.size)
		}
		wp, gp := w.payload(want, k), w.payload(got, k)
		gid := binary.LittleEndian.Uint64(gp[0:8])
		gseq := binary.LittleEndian.Uint64(gp[8:16])
		if gid != w.id || gseq != s {
			return fmt.Sprintf("conn %d seq %d: header says conn %d seq %d (misrouted or reordered)", w.id, s, gid, gseq)
		}
		for i := range wp {
			if wp[i] != gp[i] {
				return fmt.Sprintf("conn %d seq %d: byte %d is %#02x, sent %#02x", w.id, s, i, gp[i], wp[i])
			}
		}
	}
	return fmt.Sprintf("conn %d seq %d: mismatch", w.id, seq)
}

// load runs one measurement against cfg.addr.
func load(ctx context.Context, cfg config) (*result, error) {
	res := &result{
		Addr: cfg.addr, Conns: cfg.conns, Size: cfg.size, Proto: cfg.proto, Depth: cfg.depth,
		OfferedRate: cfg.rate, WarmupS: cfg.warmup.Seconds(), KVWrites: cfg.kvWrites, Outstanding: cfg.outstanding,
		ServerPID: cfg.serverPID, Syscalls: -1, SyscallsPerReq: -1,
		ServerCPUusPerReq: -1, ReqPerServerCPUs: -1, CtxSwitchesPerReq: -1,
		ServerUserUsPerReq: -1, ServerKernelUsPerReq: -1,
		LoopSyscalls: -1, LoopSyscallsPerReq: -1,
	}
	if cfg.serverPID != 0 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task", cfg.serverPID)); err != nil {
			return nil, fmt.Errorf("-server-pid %d: %w", cfg.serverPID, err)
		}
	}

	// Connect everything first, at most 64 dials at a time.
	workers := make([]*worker, cfg.conns)
	var firstErr atomic.Pointer[string]
	noteErr := func(err error) {
		s := err.Error()
		firstErr.CompareAndSwap(nil, &s)
	}
	var dialErrs atomic.Int32
	var dwg sync.WaitGroup
	sem := make(chan struct{}, 64)
	d := net.Dialer{Timeout: cfg.dialTimeout}
	for i := range workers {
		dwg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; dwg.Done() }()
			c, err := d.DialContext(ctx, "tcp", cfg.addr)
			if err != nil {
				dialErrs.Add(1)
				noteErr(fmt.Errorf("dial: %w", err))
				return
			}
			workers[i] = &worker{id: uint64(i), conn: c, cfg: &cfg}
		}()
	}
	dwg.Wait()
	res.DialErrors = int(dialErrs.Load())
	live := workers[:0]
	for _, w := range workers {
		if w != nil {
			live = append(live, w)
		}
	}
	workers = live
	if len(workers) == 0 {
		return nil, fmt.Errorf("all %d connections failed: %s", cfg.conns, *firstErr.Load())
	}
	closeAll := func() {
		for _, w := range workers {
			w.conn.Close()
		}
	}
	defer closeAll()

	// The slowloris crowd, connected before the load starts.
	crowd, err := startSlowloris(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		crowd.stop()
		res.SlowlorisConns, res.SlowlorisBytes, res.SlowlorisErrors = crowd.conns, crowd.bytes.Load(), crowd.errs.Load()
		if p := crowd.firstErr.Load(); p != nil {
			res.FirstSlowlorisError = *p
		}
	}()

	// A deadline well past the end, so no worker outlives the run even if
	// the server stops answering.
	hard := time.Now().Add(cfg.warmup + cfg.duration + 10*time.Second)
	for _, w := range workers {
		w.conn.SetDeadline(hard)
	}
	sh := &shared{stop: make(chan struct{}), budget: cfg.requests, spent: make(chan struct{})}
	if cfg.outstanding > 0 {
		sh.slots = make(chan struct{}, cfg.outstanding)
	}
	if cfg.proto == "kv" {
		res.Size = kvproto.RecordSize
	}
	if cfg.serverPID != 0 {
		threads := watchThreads(cfg.serverPID, 10*time.Millisecond)
		defer func() { res.ServerThreadsMax = threads.end() }()
	}
	var pace *pacer
	if cfg.rate > 0 {
		// A pacer sends the batches, evenly spaced: each connection's at
		// its turns, once every len(workers) turns.
		slots := make([]*pacedSlot, len(workers))
		for i, w := range workers {
			w.slot = &pacedSlot{send: func() error {
				_, err := w.conn.Write(w.wbuf)
				if err != nil {
					w.conn.Close() // ends the read that waits for the reply
				}
				return err
			}}
			slots[i] = w.slot
		}
		pace = startPacer(slots, cfg.rate/float64(cfg.depth))
		defer pace.end()
		for _, w := range workers {
			w.pacer = pace
		}
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.proto == "kv" {
				w.loopKV(sh)
				return
			}
			w.loop(sh)
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	stopWorkers := func() {
		sh.phase.Store(phaseStop)
		close(sh.stop)
		if pace == nil {
			select {
			case <-finished:
				return
			case <-time.After(time.Second):
			}
		}
		// Unblock whoever waits on a reply that will not come (paced
		// connections wait in reads for batches the pacer will no
		// longer send), and a pacer blocked in a write.
		past := time.Now().Add(-time.Second)
		for _, w := range workers {
			w.conn.SetDeadline(past)
		}
		if pace != nil {
			pace.end()
		}
		select {
		case <-finished:
			return
		case <-time.After(2 * time.Second):
		}
		closeAll()
		<-finished
	}

	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-sh.spent:
			return true // -requests reached
		case <-ctx.Done():
			return false
		case <-finished:
			return false // every connection failed
		}
	}
	if cfg.warmup > 0 && !sleep(cfg.warmup) {
		stopWorkers()
		return nil, windowAborted(ctx, workers, res, &firstErr)
	}

	// The window.
	var before procSample
	var beforeErr error
	if cfg.serverPID != 0 {
		before, beforeErr = sampleProc(cfg.serverPID)
	}
	var loopBefore benchfmt.LoopTotals
	var loopErr error
	if cfg.serverStats != "" {
		loopBefore, loopErr = benchfmt.AskLoopTotals(cfg.serverPID, cfg.serverStats, 0, cfg.statsWait)
	}
	selfBefore, selfBeforeErr := sampleProc(os.Getpid())
	statBefore, statBeforeErr := readCPUStat()
	// The window's clock starts before requests count and stops after
	// they stopped counting, so a stall here can only lengthen the window
	// over the requests counted, never count requests outside it.
	t0 := time.Now()
	sh.phase.Store(phaseMeasure)
	completed := sleep(cfg.duration)
	var after procSample
	var afterErr error
	if cfg.serverPID != 0 {
		after, afterErr = sampleProc(cfg.serverPID)
	}
	selfAfter, selfAfterErr := sampleProc(os.Getpid())
	statAfter, statAfterErr := readCPUStat()
	sh.phase.Store(phaseTail)
	window := time.Since(t0)
	var loopAfter benchfmt.LoopTotals
	if cfg.serverStats != "" && loopErr == nil {
		loopAfter, loopErr = benchfmt.AskLoopTotals(cfg.serverPID, cfg.serverStats, loopBefore.Seq, cfg.statsWait)
	}
	var pr perfResult
	if cfg.serverPID != 0 {
		if completed {
			// The syscalls' own window, under the load that goes on.
			pr = runPerf(ctx, cfg.perf, cfg.serverPID, min(cfg.duration, syscallWindow))
		} else {
			pr.err = errors.New("window ended early (all connections failed)")
		}
	}
	stopWorkers()
	if !completed && ctx.Err() != nil {
		return nil, windowAborted(ctx, workers, res, &firstErr)
	}

	// Client side.
	res.WindowS = window.Seconds()
	var hist hdr.Histogram
	for _, w := range workers {
		res.Requests += w.requests
		res.VerifyErrors += w.verifyErrs
		if res.FirstVerifyError == "" {
			res.FirstVerifyError = w.firstVerify
		}
		if w.err != nil {
			res.IOErrors++
			noteErr(w.err)
		}
		hist.Merge(&w.hist)
	}
	if p := firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	res.ReqPerS = float64(res.Requests) / window.Seconds()
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	res.P50us = us(hist.Quantile(0.50))
	res.P99us = us(hist.Quantile(0.99))
	res.P999us = us(hist.Quantile(0.999))
	res.P9999us = us(hist.Quantile(0.9999))
	res.MaxUs = us(hist.Max())

	// The machine.
	res.ClientCPUCores, res.MachineCPUCores, res.OtherCPUCores = -1, -1, -1
	if selfBeforeErr == nil && selfAfterErr == nil {
		cpu, _, _ := selfAfter.since(selfBefore)
		res.ClientCPUCores = float64(cpu) / float64(window.Nanoseconds())
	}
	if statBeforeErr == nil && statAfterErr == nil && statAfter.total > statBefore.total {
		res.MachineCPUCores = float64(statAfter.ncpu) * float64(statAfter.busy-statBefore.busy) /
			float64(statAfter.total-statBefore.total)
	}

	// Server side.
	if cfg.serverPID == 0 {
		if res.ClientCPUCores >= 0 && res.MachineCPUCores >= 0 {
			res.OtherCPUCores = res.MachineCPUCores - res.ClientCPUCores
		}
		return res, nil
	}
	var notes []string
	if beforeErr != nil || afterErr != nil {
		notes = append(notes, fmt.Sprintf("reading /proc/%d: %v", cfg.serverPID, errors.Join(beforeErr, afterErr)))
	} else {
		cpu, ctxsw, gone := after.since(before)
		user, sys := after.ticksSince(before)
		res.ServerThreads = len(after.threads)
		res.ServerCPUns = cpu
		res.CtxSwitches = ctxsw
		res.ServerCPUTicks = user + sys
		res.ServerCPUCores = float64(cpu) / float64(window.Nanoseconds())
		if res.Requests > 0 {
			res.ServerCPUusPerReq = float64(cpu) / 1e3 / float64(res.Requests)
			res.CtxSwitchesPerReq = float64(ctxsw) / float64(res.Requests)
			if user+sys > 0 {
				res.ServerUserUsPerReq, res.ServerKernelUsPerReq = splitCPU(res.ServerCPUusPerReq, user, sys)
			}
		}
		if cpu > 0 {
			res.ReqPerServerCPUs = float64(res.Requests) / (float64(cpu) / 1e9)
		}
		if gone > 0 {
			notes = append(notes, fmt.Sprintf("%d server threads exited during the window; their CPU time in it is missing", gone))
		}
	}
	if cfg.serverStats != "" {
		if loopErr != nil {
			notes = append(notes, "library counters: "+loopErr.Error())
		} else {
			res.LoopSyscalls = int64(loopAfter.Syscalls - loopBefore.Syscalls)
			if res.Requests > 0 {
				res.LoopSyscallsPerReq = float64(res.LoopSyscalls) / float64(res.Requests)
			}
		}
	}
	res.ServerNote = strings.Join(notes, "; ")
	if res.ClientCPUCores >= 0 && res.MachineCPUCores >= 0 && res.ServerCPUns > 0 {
		res.OtherCPUCores = res.MachineCPUCores - res.ClientCPUCores - res.ServerCPUCores
	}

	if pr.err != nil {
		res.SyscallsNote = pr.err.Error()
		return res, nil
	}
	res.Syscalls = pr.count
	res.SyscallsWindowS = pr.window.Seconds()
	if res.Requests > 0 {
		// Rates: perf counted for its own window, after ours, under the
		// same load.
		res.SyscallsPerReq = (float64(pr.count) / pr.window.Seconds()) / res.ReqPerS
	}
	return res, nil
}

// windowAborted explains a run that ended before its window did.
func windowAborted(ctx context.Context, workers []*worker, res *result, firstErr *atomic.Pointer[string]) error {
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	for _, w := range workers {
		if w.err != nil {
			return fmt.Errorf("all %d connections failed before the window ended (%d dial errors); first: %v", res.Conns, res.DialErrors, w.err)
		}
	}
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("all connections ended before the window did; first error: %s", *p)
	}
	return errors.New("all connections ended before the window did")
}

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
