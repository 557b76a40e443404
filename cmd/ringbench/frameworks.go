//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The -frameworks family: frameworks and protocol stacks on ringpoll
// against the same on their usual network layer, loaded by clients the
// project did not write (but for QUIC, which has no standard load tool:
// the bench module's quicload). The servers are bench/cmd/frameserve (the
// bench module, so the library's go.mod stays free of Hertz, gRPC and
// quic-go), one process per scenario and repeat, pinned to the server
// CPUs; the client is pinned to the load CPUs.

// fwScenario is one scenario of the family.
type fwScenario struct {
	name   string
	about  string // for the report's heading
	client string // "wrk", "h2load", "grpc", "quicload" or "dnsperf"
	path   string // the URL path the HTTP clients ask for
	header string // a request header wrk adds to every request, if any
	check  string // frameserve -check, before every measured run
	mode   string // benchfmt.Cell.Mode: http1, h2c, unary, streaming
	size   int    // the answer's body bytes; 0: set from the flags
	// servers are frameserve -server kinds; ref is the one the others
	// are compared with.
	servers []string
	ref     string
	h2c     bool // the servers get -h2c
	file    bool // the servers get -file
	// bytes: the servers are compared in bytes per CPU-second, not
	// requests (a download under way at the end counts in its bytes
	// only), and the tables add MiB columns.
	bytes bool
	udp   bool // the servers listen on UDP
	// both: the tables add the client's CPU and both processes'.
	both bool
}

var (
	hertzServers = []string{"hertz-ringpoll", "hertz-netpoll", "hertz-std"}
	httpServers  = []string{"http-ringpoll", "http-ringpoll-epoll", "http-std"}
	grpcServers  = []string{"grpc-ringpoll", "grpc-ringpoll-epoll", "grpc-std"}
	quicServers  = []string{"quic-ringpoll", "quic-std"}
	dnsServers   = []string{"dns-ringpoll", "dns-ringpoll-epoll", "dns-std"}
)

// fwScenarios are the family's scenarios, in report order.
var fwScenarios = []fwScenario{
	{name: "hertz-hello", about: "Hertz, GET /hello (13 B), HTTP/1.1 keep-alive, wrk", client: "wrk", path: "/hello", check: "hello",
		mode: "http1", size: 13, servers: hertzServers, ref: "hertz-netpoll"},
	{name: "hertz-json", about: "Hertz, GET /json (a 4096 B JSON document, marshalled per request), HTTP/1.1 keep-alive, wrk", client: "wrk",
		path: "/json", check: "json", mode: "http1", size: 4096, servers: hertzServers, ref: "hertz-netpoll"},
	{name: "http-hello", about: "net/http, GET /hello (13 B), HTTP/1.1 keep-alive, wrk", client: "wrk", path: "/hello", check: "hello",
		mode: "http1", size: 13, servers: httpServers, ref: "http-std"},
	{name: "http-close", about: "net/http, GET /hello (13 B), HTTP/1.1, a connection a request (Connection: close), wrk", client: "wrk",
		path: "/hello", header: "Connection: close", check: "hello", mode: "http1", size: 13, servers: httpServers, ref: "http-std"},
	{name: "h2c-hello", about: "net/http with h2c, GET /hello (13 B), HTTP/2 without TLS (prior knowledge), h2load", client: "h2load",
		path: "/hello", check: "h2c-hello", mode: "h2c", size: 13, servers: httpServers, ref: "http-std", h2c: true},
	{name: "file", about: "net/http, http.ServeFile download, HTTP/1.1 keep-alive, wrk", client: "wrk", path: "/file", check: "file",
		mode: "http1", servers: []string{"http-ringpoll", "http-ringpoll-epoll", "http-std"}, ref: "http-std", file: true, bytes: true},
	{name: "grpc-unary", about: "grpc-go benchmark service, unary calls, grpc-go's benchmark client", client: "grpc", check: "grpc-unary",
		mode: "unary", servers: grpcServers, ref: "grpc-std"},
	{name: "grpc-stream", about: "grpc-go benchmark service, ping-pong on streams, grpc-go's benchmark client", client: "grpc",
		check: "grpc-stream", mode: "streaming", servers: grpcServers, ref: "grpc-std"},
	{name: "quic-bulk", about: "quic-go, large answers, quicload", client: "quicload", check: "quic-bulk", mode: "quic",
		servers: quicServers, ref: "quic-std", bytes: true, udp: true, both: true},
	{name: "quic-small", about: "quic-go, 64 B answers on many streams, quicload", client: "quicload", check: "quic-small", mode: "quic",
		size: 64, servers: quicServers, ref: "quic-std", udp: true, both: true},
	{name: "dns", about: "miekg/dns, A queries over UDP, dnsperf", client: "dnsperf", check: "dns", mode: "dns",
		servers: dnsServers, ref: "dns-std", udp: true, both: true},
}

const defaultFwScenarios = "hertz-hello,hertz-json,http-hello,h2c-hello,file,grpc-unary,grpc-stream,quic-bulk,quic-small,dns"

// fwScenarioNames lists every scenario, those the default leaves out
// (http-close) too.
func fwScenarioNames() string {
	names := make([]string, len(fwScenarios))
	for i, sc := range fwScenarios {
		names[i] = sc.name
	}
	return strings.Join(names, ",")
}

func lookupFwScenario(name string) (fwScenario, bool) {
	i := slices.IndexFunc(fwScenarios, func(s fwScenario) bool { return s.name == name })
	if i < 0 {
		return fwScenario{}, false
	}
	return fwScenarios[i], true
}

// fwConfig is one run of the family.
type fwConfig struct {
	scenarios     []fwScenario
	conns         []int // wrk connections, hello and JSON
	h2Conns       []int
	h2Streams     int
	fileConns     []int
	fileSize      int64
	grpcConns     []int
	grpcRPCs      int // concurrent calls per connection
	grpcSize      int // request and response payload bytes
	quicConns     []int
	quicStreams   int   // quic-small's streams at a time per connection
	quicBulkConns []int // quic-bulk's, one stream at a time each
	quicBulkSize  int   // the bytes each quic-bulk stream asks for
	dnsClients    []int // dnsperf's clients (sockets)
	dnsDepth      int   // queries outstanding per dnsperf client
	threads       int   // client threads (wrk, h2load)
	repeats       int
	warmup        time.Duration
	duration      time.Duration
	serverCPUs    cpuSet
	loadCPUs      cpuSet
	charts        bool
	turns         bool // each scenario's servers stay up, measured in turns

	src, out, commandLine string
	stdout, stderr        io.Writer
}

// fwFlagSet holds the family's flags as the flag package fills them.
type fwFlagSet struct {
	scenarios, conns, h2Conns, fileConns, grpcConns, quicConns, bulkConns, dnsClients *string
	h2Streams, fileMiB, grpcRPCs, grpcSize, threads, quicStreams, bulkMiB, dnsDepth   *int
	turns                                                                             *bool
}

// addFwFlags defines the family's flags on fs.
func addFwFlags(fs *flag.FlagSet) fwFlagSet {
	return fwFlagSet{
		scenarios: fs.String("fw-scenarios", defaultFwScenarios, "with -frameworks: scenarios, comma-separated"),
		conns:     fs.String("fw-conns", "100,1000", "with -frameworks: wrk's connections for the hello and JSON scenarios"),
		h2Conns:   fs.String("fw-h2-conns", "100", "with -frameworks: h2load's connections (h2c-hello)"),
		h2Streams: fs.Int("fw-h2-streams", 10, "with -frameworks: h2load's concurrent streams per connection"),
		fileConns: fs.String("fw-file-conns", "4", "with -frameworks: wrk's connections for the file download"),
		fileMiB:   fs.Int("fw-file-mib", 64, "with -frameworks: the size of the downloaded file, MiB"),
		grpcConns: fs.String("fw-grpc-conns", "10,100", "with -frameworks: the gRPC client's connections"),
		grpcRPCs:  fs.Int("fw-grpc-rpcs", 10, "with -frameworks: concurrent gRPC calls on each connection"),
		grpcSize:  fs.Int("fw-grpc-size", 1, "with -frameworks: gRPC request and response payload bytes (the client's default: 1)"),
		threads:   fs.Int("fw-threads", 0, "with -frameworks: wrk and h2load threads (0: one per load CPU)"),
		quicConns: fs.String("fw-quic-conns", "100", "with -frameworks: quicload's connections for quic-small"),
		quicStreams: fs.Int("fw-quic-streams", 10,
			"with -frameworks: quicload's streams at a time on each connection for quic-small (each asks for 64 B)"),
		bulkConns:  fs.String("fw-quic-bulk-conns", "2", "with -frameworks: quicload's connections for quic-bulk, one stream at a time each"),
		bulkMiB:    fs.Int("fw-quic-bulk-mib", 4, "with -frameworks: the MiB each quic-bulk stream asks for"),
		dnsClients: fs.String("fw-dns-clients", "10,100", "with -frameworks: dnsperf's clients (UDP sockets) for dns"),
		dnsDepth:   fs.Int("fw-dns-depth", 2, "with -frameworks: queries outstanding per dnsperf client"),
		turns: fs.Bool("fw-turns", false, "with -frameworks: start each scenario's servers once and measure them in turns "+
			"(a repeat is one run of each server at each connection count, in rotating order), so that the runs paired in a repeat are seconds apart; "+
			"without it each server starts afresh in every repeat"),
	}
}

// fwConfigFrom validates the family's flags and fills a config from them
// and the shared ones in cfg.
func fwConfigFrom(f fwFlagSet, cfg config, stdout, stderr io.Writer) (fwConfig, error) {
	fc := fwConfig{h2Streams: *f.h2Streams, fileSize: int64(*f.fileMiB) << 20, grpcRPCs: *f.grpcRPCs,
		grpcSize: *f.grpcSize, quicStreams: *f.quicStreams, quicBulkSize: *f.bulkMiB << 20, dnsDepth: *f.dnsDepth, threads: *f.threads,
		repeats: cfg.repeats, warmup: cfg.warmup, duration: cfg.duration,
		serverCPUs: cfg.serverCPUs, loadCPUs: cfg.loadCPUs, charts: cfg.charts, src: cfg.src, out: cfg.out,
		commandLine: cfg.commandLine, stdout: stdout, stderr: stderr, turns: *f.turns}
	for _, name := range splitList(*f.scenarios) {
		sc, ok := lookupFwScenario(name)
		if !ok {
			return fc, fmt.Errorf("-fw-scenarios: %q: want some of %s", name, fwScenarioNames())
		}
		if slices.ContainsFunc(fc.scenarios, func(s fwScenario) bool { return s.name == name }) {
			return fc, fmt.Errorf("-fw-scenarios: %q listed twice", name)
		}
		switch {
		case sc.file:
			sc.size = int(fc.fileSize)
		case sc.client == "grpc":
			sc.size = fc.grpcSize
		case sc.client == "quicload" && sc.bytes:
			sc.size = fc.quicBulkSize
		}
		fc.scenarios = append(fc.scenarios, sc)
	}
	if len(fc.scenarios) == 0 {
		return fc, errors.New("-fw-scenarios: no scenario")
	}
	var err error
	for _, l := range []struct {
		name string
		s    *string
		dst  *[]int
	}{{"-fw-conns", f.conns, &fc.conns}, {"-fw-h2-conns", f.h2Conns, &fc.h2Conns},
		{"-fw-file-conns", f.fileConns, &fc.fileConns}, {"-fw-grpc-conns", f.grpcConns, &fc.grpcConns},
		{"-fw-quic-conns", f.quicConns, &fc.quicConns}, {"-fw-quic-bulk-conns", f.bulkConns, &fc.quicBulkConns},
		{"-fw-dns-clients", f.dnsClients, &fc.dnsClients}} {
		if *l.dst, err = parseConns(*l.s); err != nil {
			return fc, fmt.Errorf("%s: %w", l.name, err)
		}
	}
	switch {
	case fc.h2Streams < 1 || fc.h2Streams > 1000:
		return fc, fmt.Errorf("-fw-h2-streams %d: want 1 to 1000", fc.h2Streams)
	case *f.fileMiB < 1 || *f.fileMiB > 4096:
		return fc, fmt.Errorf("-fw-file-mib %d: want 1 to 4096", *f.fileMiB)
	case fc.grpcRPCs < 1 || fc.grpcRPCs > 10000:
		return fc, fmt.Errorf("-fw-grpc-rpcs %d: want 1 to 10000", fc.grpcRPCs)
	case fc.grpcSize < 0 || fc.grpcSize > 4<<20:
		return fc, fmt.Errorf("-fw-grpc-size %d: want 0 to 4194304 bytes (gRPC's default message limit)", fc.grpcSize)
	case fc.quicStreams < 1 || fc.quicStreams > 1000:
		return fc, fmt.Errorf("-fw-quic-streams %d: want 1 to 1000 (what frameserve's QUIC servers allow)", fc.quicStreams)
	case *f.bulkMiB < 1 || *f.bulkMiB > 1024:
		return fc, fmt.Errorf("-fw-quic-bulk-mib %d: want 1 to 1024", *f.bulkMiB)
	case fc.dnsDepth < 1 || fc.dnsDepth > 1000:
		return fc, fmt.Errorf("-fw-dns-depth %d: want 1 to 1000", fc.dnsDepth)
	case fc.threads < 0 || fc.threads > 256:
		return fc, fmt.Errorf("-fw-threads %d: want 0 (one per load CPU) to 256", fc.threads)
	}
	if fc.threads == 0 {
		fc.threads = max(1, len(fc.loadCPUs))
	}
	return fc, nil
}

// connsOf returns the connection counts of a scenario.
func (fc *fwConfig) connsOf(sc fwScenario) []int {
	switch {
	case sc.file:
		return fc.fileConns
	case sc.client == "h2load":
		return fc.h2Conns
	case sc.client == "grpc":
		return fc.grpcConns
	case sc.client == "quicload" && sc.bytes:
		return fc.quicBulkConns
	case sc.client == "quicload":
		return fc.quicConns
	case sc.client == "dnsperf":
		return fc.dnsClients
	}
	return fc.conns
}

// depthOf is what a scenario runs at once on each connection: h2load's
// streams, the gRPC client's calls, quicload's streams (1 in bulk),
// dnsperf's queries per client, 1 for wrk.
func (fc *fwConfig) depthOf(sc fwScenario) int {
	switch {
	case sc.client == "h2load":
		return fc.h2Streams
	case sc.client == "grpc":
		return fc.grpcRPCs
	case sc.client == "quicload" && !sc.bytes:
		return fc.quicStreams
	case sc.client == "dnsperf":
		return fc.dnsDepth
	}
	return 1
}

// fwServerArgv is the command line of a frameserve server of kind for
// scenario sc on addr; file is the file the file scenario serves.
func fwServerArgv(bin, kind string, sc fwScenario, addr, file string) []string {
	argv := []string{bin, "-server", kind, "-addr", addr}
	if sc.file {
		argv = append(argv, "-file", file)
	}
	if sc.h2c {
		argv = append(argv, "-h2c")
	}
	return argv
}

// fwCheckArgv is the command line that checks one answer of the server
// at addr before a measured run.
func fwCheckArgv(bin string, sc fwScenario, addr, file string) []string {
	argv := []string{bin, "-check", sc.check, "-addr", addr}
	if sc.file {
		argv = append(argv, "-file", file)
	}
	return argv
}

// clientArgv is the command line of sc's client at conns connections
// against addr for seconds; aux is the client's extra file: wrk's script,
// h2load's log, the name the gRPC client gives its profiles, or dnsperf's
// query file.
func (fc *fwConfig) clientArgv(tools map[string]string, sc fwScenario, addr string, conns, seconds int, aux string) []string {
	switch sc.client {
	case "h2load":
		return h2loadArgv(tools["h2load"], fc.threads, conns, fc.h2Streams, seconds, aux, "http://"+addr+sc.path)
	case "grpc":
		_, port, _ := strings.Cut(addr, ":")
		return grpcArgv(tools["grpc"], port, conns, fc.grpcRPCs, fc.grpcSize, seconds, sc.mode, aux)
	case "quicload":
		return quicloadArgv(tools["quicload"], addr, conns, fc.depthOf(sc), sc.size, seconds)
	case "dnsperf":
		return dnsperfArgv(tools["dnsperf"], addr, fc.threads, conns, fc.depthOf(sc), seconds, aux)
	}
	return wrkArgv(tools["wrk"], fc.threads, conns, seconds, sc.header, aux, "http://"+addr+sc.path)
}

// fwTotalRuns counts the measured runs of fc.
func (fc *fwConfig) fwTotalRuns() int {
	n := 0
	for _, sc := range fc.scenarios {
		n += len(sc.servers) * len(fc.connsOf(sc))
	}
	return n * fc.repeats
}

// sizeText names a body size for people.
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}
