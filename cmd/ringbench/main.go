//go:build linux

// Command ringbench replays the seed experiments on this machine: echo
// servers built on every ringpoll engine (uring-inline and epoll-inline:
// the handler on the event loop, ringpoll.WithInlineHandler;
// uring-pinned: the loops' threads pinned to the server CPUs,
// ringpoll.WithLoopCPUs; uring-busypoll: idle loops poll 50µs before they
// sleep, ringpoll.WithBusyPoll; uring-1loop: one loop whatever the CPUs,
// ringpoll.WithLoops(1)), std net (a
// goroutine per connection), cloudwego/netpoll, panjf2000/gnet and a C
// liburing echo server (bench/c/uring_echo.c, when gcc and liburing-dev are
// there), each in its own process, loaded by cmd/ringload in another,
// pinned to different CPUs; uring-twin is the default server again, the
// run's yardstick for noise. It prints a table, the default server's
// requests per CPU-second over each peer's, and writes JSON lines, a
// markdown report and SVG charts. With -full, and with -turns, it then
// (turns.go) loads the default and each peer side by side in alternating
// half-second turns and reports the default over each with an interval.
//
//	go run ./cmd/ringbench            # the default matrix, about 4 minutes
//	go run ./cmd/ringbench -full      # the seeds' whole sweep and the turns (much longer)
//
// It builds what it needs from the checkout it runs in: cmd/ringecho and
// cmd/ringload from the ringpoll module, and from the separate bench module
// (so the library's go.mod never requires them) the netpoll and gnet
// servers and the chart renderer, and with cc the C server. If the bench
// module cannot be built (no access to the module proxy), those servers
// and the charts are left out and the report says why; so is the C server
// without gcc or liburing-dev. The C server echoes bytes, so it runs the
// echo scenario only.
//
// The matrix is servers x loads x connection counts, each cell repeated
// -repeats times; each repeat starts every server afresh, and the servers'
// order rotates between repeats. A load is scenario:size:mode:rate:
//
//   - scenario echo is the seeds' echo server; rpc follows netpoll-benchmark's
//     RPC rules: length-prefixed messages, the handler off the event loop,
//     the reply built in a buffer of its own;
//   - mode pp is strict ping-pong, pN pipelines N messages per connection;
//   - rate max loads as fast as the load generator goes (on 2 CPUs that
//     measures the generator more than the server), a number caps the
//     offered load at that many requests per second over all connections,
//     the better way to compare servers' CPU and syscalls per request.
//
// Per cell it reports throughput, latency percentiles (p50 to p99.99),
// server CPU over all its threads (kernel SQPOLL threads included),
// requests per server CPU-second, syscalls per request (perf stat on the
// server, when perf is installed), context switches per request, and
// errors; every echoed byte is verified. Medians of the repeats, with the
// spread.
//
// -cores K places the servers of every family on the first K CPUs this
// process may use and the load generator on the rest (it sets
// -server-cpus and -load-cpus), so that a machine with more cores runs
// the same scenarios with the server on 1, 2, 4... of them; the Go
// servers' GOMAXPROCS is then K (Go's default: the CPUs a process may
// use), and the default ringpoll server keeps its own default loops.
//
// With -frameworks it runs instead the framework family, frameworks and
// protocol stacks on ringpoll against the same on their usual network
// layer, loaded by clients the project did not write, but for QUIC
// (-fw-scenarios picks some of them):
//
//   - hertz-hello, hertz-json: CloudWeGo Hertz answering GET /hello (13 B)
//     and GET /json (a 4 KiB JSON document, marshalled per request) over
//     HTTP/1.1 keep-alive, loaded by wrk at -fw-conns connections; Hertz
//     on ringpoll (adapters/hertz, the default engine), on netpoll (its
//     default transport, the reference) and on its standard transport;
//   - http-hello: net/http's http.Serve on a ringpoll.Listen listener (the
//     default engine, and epoll) and on std net.Listen (the reference),
//     loaded by wrk; http-close (not in the default list): the same with a
//     connection a request ("Connection: close"), where the accepts and
//     closes count; h2c-hello: the same with golang.org/x/net/http2/h2c,
//     loaded by h2load (HTTP/2 with prior knowledge, -fw-h2-conns
//     connections of -fw-h2-streams streams);
//   - file: an http.ServeFile download of a -fw-file-mib file the harness
//     writes, ringpoll listener (the default engine, and epoll) against
//     std, by wrk over -fw-file-conns
//     connections (HTTP/1.1, where net/http hands the file to the
//     connection's ReadFrom when it has one, sendfile on std net; HTTP/2
//     would frame it in user space), compared in bytes per server
//     CPU-second;
//   - grpc-unary, grpc-stream: grpc-go's benchmark service
//     (benchmark.StartServer) on a ringpoll listener (the default engine,
//     and epoll) and on std net (the reference), loaded by grpc-go's own benchmark client
//     (google.golang.org/grpc/benchmark/client, built from the bench
//     module) at -fw-grpc-conns connections of -fw-grpc-rpcs calls each;
//   - quic-bulk, quic-small: quic-go (a quic.Transport) on the MessageConn
//     of a ringpoll.ListenPacket socket (the default engine) and on a std
//     *net.UDPConn (the reference), each stream asking for a number of
//     bytes, loaded by bench/cmd/quicload (quic-go on std UDP sockets, the
//     same client for both; there is no standard QUIC load tool):
//     quic-bulk at -fw-quic-bulk-conns connections of one stream at a
//     time asking for -fw-quic-bulk-mib MiB, compared in bytes per server
//     CPU-second; quic-small at -fw-quic-conns connections of
//     -fw-quic-streams streams asking for 64 B. Both add the client's CPU
//     (its rusage) and both processes' per MiB or per request;
//   - dns: miekg/dns's dns.Server on a ringpoll.ListenPacket socket (the
//     default engine, and epoll) and on net.ListenPacket (the reference),
//     answering A queries, loaded by dnsperf at -fw-dns-clients clients
//     (a UDP socket each) of -fw-dns-depth queries outstanding each, with
//     the client's CPU and both processes' as for QUIC.
//
// The servers are bench/cmd/frameserve, one process per scenario and
// repeat, pinned to the server CPUs; the clients run on the load CPUs.
// wrk, h2load and dnsperf come from Debian (wrk, nghttp2-client, dnsperf):
// missing, they are installed with apt-get when ringbench runs as root,
// and otherwise their scenarios are left out and the report says why;
// quicload is built from the bench module with frameserve. Before every
// measured run one answer is checked (frameserve -check); each client runs
// once for -warmup (dropped), then for -duration (both in whole seconds:
// the clients take no less), with the server's CPU read from
// /proc/PID/task/*/schedstat just before and just after. Per cell it
// reports the client's throughput and p50/p99 (p99.9 from wrk, through a
// Lua script, from h2load's per-request log and from quicload; dnsperf
// gives none), the server's CPU, requests per server CPU-second and their
// ratio to the reference, also paired within each repeat; runs whose check
// failed or whose client counted socket errors, non-2xx answers, failed
// streams or lost queries are flagged.
//
// With -scale it runs the scale family instead (scale.go): -servers (by
// default the matrix's) from 10 to 19,000 connections (-scale-conns), at
// 1 KiB ping-pong offered 20,000 requests/s over all connections, the
// same work at every count, and saturated (-scale-loads). Every run has
// a fresh server, whose connections each echo once before the warm-up
// (ringload -prime), so that their setup stays out of the window; beside
// the matrix's figures it measures the server's resident memory per
// connection, idle and under the load, and it checks the targets
// for the default server: its CPU per request flat from 1,000 connections
// to the largest count, ahead of every Go peer in requests per server
// CPU-second from 1,000 up, and no more memory per idle connection than
// gnet. It writes scale.md, scale.jsonl and a chart of each figure
// against the connection count; the defaults take about 10 minutes on 2
// CPUs, as it says before it starts.
//
//	go run ./cmd/ringbench -scale
//	go run ./cmd/ringbench -scale -cores 4   # a machine with more CPUs
//
// With -kv it runs the key-value scenario instead (kv.go): cmd/ringkv
// serving random 4 KiB records of a data file of -kv-file-size (2 GiB by
// default, made once in -kv-dir and reused) with O_DIRECT, with the file
// on the network's ring (ringpoll.File), as an os.File under ringpoll,
// and as an os.File under std net, loaded by ringload -proto kv at
// -kv-conns connections with -kv-outstanding requests in flight in
// total, gets only and with puts; it reports requests per second and per
// server CPU-second, latency and the server's most OS threads, in kv.md
// and kv.jsonl.
//
//	go run ./cmd/ringbench -kv
//
// Outputs, in -out (default ringbench-results): results.jsonl (a line per
// run and per cell summary, internal/benchfmt), report.md, the charts
// (<group>-{throughput,p99,cpu,syscalls}.svg) and each server's log in
// logs/; -frameworks writes the same files (report.md its own, with a
// section per scenario and load), so give it an -out of its own to keep
// both. The exit status is 1 if an echo failed verification or a run
// failed or was flagged, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is one benchmark run.
type config struct {
	src, out    string
	servers     []server
	conns       []int
	loads       []load
	repeats     int
	warmup      time.Duration
	duration    time.Duration
	serverCPUs  cpuSet
	loadCPUs    cpuSet
	charts      bool
	commandLine string
	// turns is how long the default meets each peer in alternating
	// turns after the matrix (turns.go); 0: not at all.
	turns time.Duration
	// turnsPaced adds the paced loads to the turns.
	turnsPaced bool
	// cores is -cores: the server CPUs are the first cores CPUs this
	// process may use; 0: not given.
	cores int
}

// run is main without the exit.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ringbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	full := fs.Bool("full", false, "run the seeds' whole matrix: every server, "+fullConns+" connections, loads "+fullLoads)
	serversFlag := fs.String("servers", defaultServers, "servers, comma-separated: uring, uring-inline, uring-pinned, uring-busypoll, uring-1loop, uring-hybrid, uring-reactor, uring-sqpoll, epoll, epoll-inline, std, netpoll, gnet")
	connsFlag := fs.String("conns", defaultConns, "connection counts, comma-separated")
	loadsFlag := fs.String("loads", defaultLoads, "loads, comma-separated scenario:size:mode:rate (echo|rpc : bytes : pp|pN : max|req/s)")
	repeats := fs.Int("repeats", 3, "repeats of every cell (medians are reported)")
	warmup := fs.Duration("warmup", 300*time.Millisecond, "load before each measurement")
	duration := fs.Duration("duration", time.Second, "measurement window of each run")
	turns := fs.Duration("turns", 0, "after the matrix, at each saturated load (echo or rpc, rate max; with -turns-paced, the paced loads too) and connection count, load the default server and each peer (and its twin) in alternating half-second turns for this long, both up at once, and report the default over each with an interval (0: skip; -full: 12s)")
	turnsPaced := fs.Bool("turns-paced", false, "with -turns, the paced loads too (each turn offered the load's rate): CPU per request at a fixed rate, side by side")
	cores := fs.Int("cores", 0, "the server on this many CPUs, the load on the rest: sets -server-cpus to the first K CPUs this process may use and -load-cpus to the others, for every family (the matrix, -scale, -udp, -kv, -frameworks); the Go servers' GOMAXPROCS is then K (Go's default: the CPUs a process may use), the default ringpoll server's loops follow their own default; K from 1 to the CPUs less one (0: -server-cpus and -load-cpus, or half and half)")
	serverCPUs := fs.String("server-cpus", "", "CPUs for the servers, e.g. 0 or 0-1 (default: the first half of this process's CPUs)")
	loadCPUs := fs.String("load-cpus", "", "CPUs for the load generator (default: the second half)")
	out := fs.String("out", "ringbench-results", "directory for results.jsonl, report.md, charts and logs")
	src := fs.String("src", "", "the ringpoll checkout to build from (default: found from the working directory)")
	charts := fs.Bool("charts", true, "render SVG charts (needs the bench module to build, except with -udp)")
	udp := fs.Bool("udp", false, "run the UDP scenario instead: datagrams one way to -udp-servers, received per server CPU-second")
	udpServersFlag := fs.String("udp-servers", defaultUDPServers, "with -udp: servers, comma-separated (also ringpoll-pooled: a PacketServer without options, its handler on a pooled goroutine, where ringpoll is one with WithInlineHandler; ringpoll-conn and ringpoll-conn-epoll: a PacketConn one datagram per call; std-twin: std again, to show the spread between identical servers)")
	udpSizes := fs.String("udp-sizes", defaultUDPSizes, "with -udp: datagram sizes in bytes, comma-separated")
	udpFlows := fs.Int("udp-flows", 8, "with -udp: sending sockets (with -udp-rate: clients)")
	udpOffered := fs.String("udp-offered", defaultUDPOffered, "with -udp one way: offered datagrams per second, comma-separated (0: unpaced, which livelocks a server sharing its CPU with the softirqs)")
	udpRcvbuf := fs.Int("udp-rcvbuf", 4<<20, "with -udp: every server's socket receive buffer (SO_RCVBUF; the kernel caps it at net.core.rmem_max)")
	udpRate := fs.Float64("udp-rate", 0, "with -udp: request/response instead of one way, DNS-like: -udp-flows clients each awaiting its echo, this many requests/s offered over all")
	udpClient := fs.String("udp-client", "ringload", "with -udp-rate: the clients, ringload (Go, ringload -proto udp-rr) or c (bench/c/udp_rr.c: one C thread, no runtime of its own; needs a C compiler)")
	udpTurns := fs.Bool("udp-turns", false, "with -udp: start each cell's servers once and measure them in turns (a repeat is one turn of each, in rotating order), so that the runs paired in a repeat are seconds apart, not minutes, and a machine's slow spells fall on both; without it each run has a fresh server")
	rps := fs.Bool("rps", true, "with -udp one way: steer lo's receive work to the server CPUs (RPS, as a NIC's interrupt would land), restored after")
	rpsCPUs := fs.String("rps-cpus", "", "with -udp one way: steer lo's receive work to these CPUs instead of the server's (to measure a server away from its softirqs)")
	frameworks := fs.Bool("frameworks", false, "run the framework family instead: Hertz, net/http (HTTP/1.1, h2c, a file download), grpc-go, quic-go and miekg/dns on ringpoll and on their usual network layer, loaded by wrk, h2load, grpc-go's benchmark client, quicload and dnsperf")
	fwf := addFwFlags(fs)
	scale := fs.Bool("scale", false, "run the scale family instead: -servers from -scale-conns connections at each of -scale-loads, each run on a fresh server, with its resident memory per connection; scale.md, scale.jsonl and charts against the connection count (the defaults take about 10 minutes on 2 CPUs)")
	scaleConns := fs.String("scale-conns", defaultScaleConns, "with -scale: connection counts, comma-separated (counts past the open-files limit or the ephemeral ports are left out, with a note)")
	scaleLoads := fs.String("scale-loads", defaultScaleLoads, "with -scale: loads, as -loads takes them (the default: 1 KiB ping-pong at 20,000 requests/s over all connections, the same work at every count, and saturated)")
	kv := fs.Bool("kv", false, "run the key-value scenario instead: ringkv serving 4 KiB records with O_DIRECT, the file on the network's ring, as an os.File under ringpoll, and under std net")
	kvServersFlag := fs.String("kv-servers", defaultKVServers, "with -kv: servers, comma-separated: ring, osfile, std, sendfile")
	kvConns := fs.String("kv-conns", defaultKVConns, "with -kv: connection counts, comma-separated")
	kvWrites := fs.String("kv-writes", defaultKVWrites, "with -kv: variants, as percentages of puts (each acknowledged after a group-commit fsync), comma-separated")
	kvOutstanding := fs.Int("kv-outstanding", 64, "with -kv: requests in flight over all connections")
	kvFileSize := fs.String("kv-file-size", "2GiB", "with -kv: the data file's size (made once, reused by later runs)")
	kvDir := fs.String("kv-dir", os.TempDir(), "with -kv: where the data file lives")
	again := fs.String("report", "", "run nothing: print the tables and write report.md in -out again from this results.jsonl of an earlier run (with -scale: scale.md and the charts from a scale.jsonl)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "ringbench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *again != "" {
		command := strings.TrimSpace("ringbench " + strings.Join(args, " "))
		report := func() error { return reportAgain(*again, *out, command, stdout) }
		if *scale {
			report = func() error { return reportScaleAgain(*again, *out, command, *charts, stdout) }
		}
		if err := report(); err != nil {
			fmt.Fprintln(stderr, "ringbench:", err)
			return 1
		}
		return 0
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	families := 0
	for _, on := range []bool{*scale, *udp, *kv, *frameworks} {
		if on {
			families++
		}
	}
	switch {
	case families > 1:
		fmt.Fprintln(stderr, "ringbench: -scale, -udp, -kv and -frameworks each run a family of their own: give one")
		return 2
	case *scale && (set["conns"] || set["loads"] || *full || set["turns"]):
		fmt.Fprintln(stderr, "ringbench: -scale takes its counts and loads from -scale-conns and -scale-loads, and has no -full or -turns")
		return 2
	}
	if *scale {
		*connsFlag, *loadsFlag = *scaleConns, *scaleLoads
	}
	if *full {
		if !set["servers"] {
			*serversFlag = fullServers
		}
		if !set["conns"] {
			*connsFlag = fullConns
		}
		if !set["loads"] {
			*loadsFlag = fullLoads
		}
		if !set["turns"] {
			*turns = fullTurns
		}
	}
	cfg := config{
		out: *out, repeats: *repeats, warmup: *warmup, duration: *duration, charts: *charts, turns: *turns, turnsPaced: *turnsPaced,
		commandLine: strings.TrimSpace("ringbench " + strings.Join(args, " ")),
	}
	var err error
	bad := func(err error) int {
		fmt.Fprintln(stderr, "ringbench:", err)
		return 2
	}
	if cfg.servers, err = parseServers(*serversFlag); err != nil {
		return bad(fmt.Errorf("-servers: %w", err))
	}
	connsName, loadsName := "-conns", "-loads"
	if *scale {
		connsName, loadsName = "-scale-conns", "-scale-loads"
	}
	if cfg.conns, err = parseConns(*connsFlag); err != nil {
		return bad(fmt.Errorf("%s: %w", connsName, err))
	}
	if cfg.loads, err = parseLoads(*loadsFlag); err != nil {
		return bad(fmt.Errorf("%s: %w", loadsName, err))
	}
	switch {
	case cfg.repeats < 1 || cfg.repeats > 100:
		return bad(fmt.Errorf("-repeats %d: want 1 to 100", cfg.repeats))
	case cfg.warmup < 0:
		return bad(fmt.Errorf("-warmup %v: want 0 or more", cfg.warmup))
	case cfg.duration < 100*time.Millisecond:
		return bad(fmt.Errorf("-duration %v: want at least 100ms", cfg.duration))
	case cfg.turns != 0 && cfg.turns < 2*turnPeriod*2:
		return bad(fmt.Errorf("-turns %v: want 0 (none) or at least %v (two pairs of %v turns)", cfg.turns, 2*turnPeriod*2, turnPeriod))
	case cfg.turnsPaced && cfg.turns == 0:
		return bad(errors.New("-turns-paced adds the paced loads to the turns, and -turns 0 runs none: give -turns a duration"))
	case cfg.out == "":
		return bad(errors.New("-out is empty"))
	}
	cfg.serverCPUs, cfg.loadCPUs = defaultPlacement()
	if *cores != 0 {
		if *serverCPUs != "" || *loadCPUs != "" {
			return bad(errors.New("-cores sets -server-cpus and -load-cpus: give one or the others"))
		}
		if v := os.Getenv("GOMAXPROCS"); v != "" {
			// The servers would inherit it, and K would not be their
			// GOMAXPROCS.
			return bad(fmt.Errorf("-cores %d: GOMAXPROCS=%s is set in the environment, which the Go servers would take over K: unset it", *cores, v))
		}
		if cfg.serverCPUs, cfg.loadCPUs, err = coresPlacement(*cores, allowedCPUs()); err != nil {
			return bad(err)
		}
		cfg.cores = *cores
	}
	if *serverCPUs != "" {
		if cfg.serverCPUs, err = parseCPUs(*serverCPUs); err != nil {
			return bad(fmt.Errorf("-server-cpus: %w", err))
		}
	}
	if *loadCPUs != "" {
		if cfg.loadCPUs, err = parseCPUs(*loadCPUs); err != nil {
			return bad(fmt.Errorf("-load-cpus: %w", err))
		}
	}
	if cfg.src, err = findSource(*src); err != nil {
		return bad(err)
	}
	// Absolute, since builds run in other directories.
	if cfg.out, err = filepath.Abs(cfg.out); err != nil {
		return bad(fmt.Errorf("-out: %w", err))
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *scale {
		code, err := benchScale(ctx, cfg, stdout, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "ringbench:", err)
			return 1
		}
		return code
	}
	if *kv {
		kc, err := parseKV(*kvServersFlag, *kvConns, *kvWrites, *kvFileSize)
		if err != nil {
			return bad(err)
		}
		if *kvOutstanding < 1 || *kvOutstanding > 100000 {
			return bad(fmt.Errorf("-kv-outstanding %d: want 1 to 100000", *kvOutstanding))
		}
		kc.outstanding, kc.dir = *kvOutstanding, *kvDir
		kc.repeats, kc.warmup, kc.duration = cfg.repeats, cfg.warmup, cfg.duration
		kc.serverCPUs, kc.loadCPUs, kc.src, kc.out = cfg.serverCPUs, cfg.loadCPUs, cfg.src, cfg.out
		kc.commandLine, kc.stdout, kc.stderr = cfg.commandLine, stdout, stderr
		code, err := benchKV(ctx, kc)
		if err != nil {
			fmt.Fprintln(stderr, "ringbench:", err)
			return 1
		}
		return code
	}
	if *udp {
		uc := udpConfig{flows: *udpFlows, repeats: cfg.repeats, warmup: cfg.warmup, duration: cfg.duration,
			serverCPUs: cfg.serverCPUs, loadCPUs: cfg.loadCPUs, rps: *rps, src: cfg.src, out: cfg.out,
			rr: *udpRate > 0, rate: *udpRate, rcvbuf: *udpRcvbuf, turns: *udpTurns,
			commandLine: cfg.commandLine, stdout: stdout, stderr: stderr, noCharts: !cfg.charts}
		if uc.servers, uc.sizes, err = parseUDP(*udpServersFlag, *udpSizes); err != nil {
			return bad(err)
		}
		if uc.flows < 1 || uc.flows > 1024 {
			return bad(fmt.Errorf("-udp-flows %d: want 1 to 1024", uc.flows))
		}
		if uc.offered, err = parseRates(*udpOffered); err != nil {
			return bad(fmt.Errorf("-udp-offered: %w", err))
		}
		uc.rpsCPUs = uc.serverCPUs
		if *rpsCPUs != "" {
			if uc.rpsCPUs, err = parseCPUs(*rpsCPUs); err != nil {
				return bad(fmt.Errorf("-rps-cpus: %w", err))
			}
		}
		if *udpRate < 0 {
			return bad(fmt.Errorf("-udp-rate %v: want 0 (one way) or a rate", *udpRate))
		}
		switch *udpClient {
		case "ringload":
		case "c":
			if *udpRate == 0 {
				return bad(errors.New("-udp-client c: the C client is request/response only; give -udp-rate"))
			}
			uc.cClient = true
		default:
			return bad(fmt.Errorf("-udp-client %q: want ringload or c", *udpClient))
		}
		code, err := benchUDP(ctx, uc)
		if err != nil {
			fmt.Fprintln(stderr, "ringbench:", err)
			return 1
		}
		return code
	}
	if *frameworks {
		fc, err := fwConfigFrom(fwf, cfg, stdout, stderr)
		if err != nil {
			return bad(err)
		}
		code, err := benchFrameworks(ctx, fc)
		if err != nil {
			fmt.Fprintln(stderr, "ringbench:", err)
			return 1
		}
		return code
	}
	code, err := bench(ctx, cfg, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "ringbench:", err)
		return 1
	}
	return code
}
