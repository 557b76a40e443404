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
// requests, whichever comes first; with -first-wait, a window in which no
// request completed goes on until one does): requests completed, req/s and latency
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
// Connections are dialled 64 at a time, before the warm-up; with -prime
// each then echoes one message at once, so that the server's setup of
// every connection (its accept, first buffers, a goroutine) is over
// before the warm-up, however many there are. The load needs a descriptor
// per connection: ringload checks the RLIMIT_NOFILE the Go runtime raised
// to the hard limit at start, and fails before dialling if it is short.
// With -server-pid it also reports the server's resident memory (VmRSS)
// before the first dial, once every connection is open and idle, and at
// the end of the window.
//
// -rates R1,R2,... runs loads one after another on the same connections,
// each at its rate (0: as fast as replies come) with its own warm-up and
// window, and prints a result for each (with -json, a line each): the
// connections' setup, which at thousands of them costs more than a load,
// is paid once. Every load but the last ends at rest (phase.go): the
// pacer stops, each connection finishes the request it has in flight,
// and one whose next request the pacer does not send stops waiting
// for its reply, so the next load starts on clean streams.
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
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
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
	firstWait := fs.Duration("first-wait", 0, "if no request completed by the end of -duration, keep the window open until one does, for up to this long (at most 5s; 0: end it empty, which fails the run)")
	warmup := fs.Duration("warmup", 2*time.Second, "load before measuring")
	duration := fs.Duration("duration", 10*time.Second, "measurement window")
	serverPID := fs.Int("server-pid", 0, "server process to measure (CPU, syscalls, context switches); 0: none")
	prime := fs.Bool("prime", false, "each connection echoes one message as it connects, before the warm-up, so that the server's setup of every connection is over before it (-proto echo or rpc)")
	closeReset := fs.Bool("close-reset", false, "end the connections with a reset (SO_LINGER 0) rather than a FIN, leaving no TIME_WAIT behind: runs that open thousands of connections one after the other would otherwise pile them up, slowing the next dials and every read of /proc/net/tcp")
	rates := fs.String("rates", "", "loads one after another on the same connections, at these offered rates in requests/s over all connections (0: as fast as replies come), comma-separated, each with its own -warmup and -duration: one result each (with -json, a line each); every load but the last ends at rest, each connection finishing the request it has in flight (-proto echo or rpc; instead of -rate)")
	sources := fs.Int("sources", 1, "spread the connections over the source addresses 127.0.0.1 to 127.0.0.N (-addr must be a loopback address): connect(2)'s search for a free port grows with the connections open from one address to the same destination, to a millisecond or more a connection at 19,000")
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
		firstWait:   min(*firstWait, firstLimit),
		warmup:      *warmup,
		duration:    *duration,
		serverPID:   *serverPID,
		serverStats: *serverStats,
		slowloris:   *slowloris,
		prime:       *prime,
		closeReset:  *closeReset,
		sources:     *sources,
		dialTimeout: 5 * time.Second,

		slowlorisFirst: 2 * time.Second,
		kvRecords:      *kvRecords,
		kvWrites:       *kvWrites,
		outstanding:    *outstanding,
	}
	if *rates != "" {
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "rate" })
		var err error
		if cfg.rates, err = parseRateList(*rates); err == nil && set {
			err = errors.New("-rates gives the loads' rates: no -rate")
		}
		if err != nil {
			fmt.Fprintln(stderr, "ringload:", err)
			return 2
		}
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(stderr, "ringload:", err)
		return 2
	}
	if err := checkNofile(cfg.conns + cfg.slowloris + nofileMargin); err != nil {
		fmt.Fprintln(stderr, "ringload:", err)
		return 1
	}
	rs := []float64{cfg.rate}
	if len(cfg.rates) > 0 {
		rs = cfg.rates
	}
	results, err := loadRates(ctx, cfg, rs)
	if err != nil {
		fmt.Fprintln(stderr, "ringload:", err)
		return 1
	}
	code := 0
	for i, res := range results {
		if *asJSON {
			// One object, or with -rates a line each.
			if err := json.NewEncoder(stdout).Encode(res); err != nil {
				fmt.Fprintln(stderr, "ringload:", err)
				return 1
			}
		} else {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			res.writeText(stdout)
		}
		switch {
		case res.VerifyErrors > 0:
			fmt.Fprintf(stderr, "ringload: %d echoes failed verification; first: %s\n", res.VerifyErrors, res.FirstVerifyError)
			code = 1
		case res.Requests == 0:
			fmt.Fprintf(stderr, "ringload: no request completed in the window (first error: %s)\n", orNone(res.FirstError))
			code = 1
		}
	}
	return code
}
