//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The UDP scenario (-udp): datagrams one way, from cmd/ringload -proto udp
// (several sockets, sendmmsg, GSO) on the load CPUs to a server on the
// server CPUs that counts them. On loopback the sender's CPU would run the
// receive path's softirqs too; with -rps (the default) lo's receive
// packet steering sends that work to the server CPUs, as a NIC's interrupt
// would, so the server pays for the stack and the sender outruns it. The
// server CPUs' busy time (from /proc/stat, softirqs included) is the cost;
// drops are the kernel's UDP receive-buffer errors (/proc/net/snmp).
//
// With -udp-rate it is request/response instead (DNS-like): clients that
// each await their request's echo, from ringload -proto udp-rr (whose
// pacer sends the requests evenly spaced, from a thread of its own), or
// with -udp-client c from bench/c/udp_rr.c, one C thread without a
// language runtime, to check the Go client against (docs/bench/HISTORY.md,
// "UDP's DNS-like tail" and "ringload's pacer: the load as asked").

// udpServers are the UDP servers ringbench knows: argv builders given the
// binaries, port, stats file and whether to answer each datagram.
// "ringpoll" is a PacketServer with WithInlineHandler on the default
// engine; "ringpoll-pooled" is one without options, its handler on a
// pooled goroutine.
var udpServers = map[string]func(b bins, port int, stats string, reply bool, rcvbuf int) []string{
	"ringpoll":        ringechoUDP("-api", "inline"),
	"ringpoll-pooled": ringechoUDP("-api", "handler"),
	"ringpoll-gro":    ringechoUDP("-api", "inline", "-gro"),
	// The epoll engine's reader: recvmmsg(2) through ReadBatch, where the
	// default (uring) reads through a multishot RECVMSG.
	"ringpoll-epoll": ringechoUDP("-api", "inline", "-engine", "epoll"),
	// A PacketConn read and answered one datagram per call
	// (ReadFromAddrPort, WriteToAddrPort), as a std user's loop.
	"ringpoll-conn":       ringechoUDP("-api", "conn"),
	"ringpoll-conn-epoll": ringechoUDP("-api", "conn", "-engine", "epoll"),
	"std":                 ringechoUDP("-api", "std"),
	// std again: paired with std like every server, its ratios show how far
	// two identical servers land apart in the run, the floor under which
	// no difference can be told.
	"std-twin": ringechoUDP("-api", "std"),
	"xnet":     ringechoUDP("-api", "xnet"),
	"gnet": func(b bins, port int, stats string, reply bool, rcvbuf int) []string {
		proto := "udp"
		if reply {
			proto = "udp-reply"
		}
		return []string{b.peerecho, "-impl", "gnet", "-proto", proto, "-addr", fmt.Sprint("127.0.0.1:", port), "-stats-file", stats, "-rcvbuf", fmt.Sprint(rcvbuf)}
	},
	cRecvmmsg: func(b bins, port int, stats string, reply bool, rcvbuf int) []string {
		argv := []string{b.cUDP, "-b", fmt.Sprint(rcvbuf)}
		if reply {
			argv = append(argv, "-r")
		}
		return append(argv, fmt.Sprint(port), stats)
	},
}

func ringechoUDP(args ...string) func(b bins, port int, stats string, reply bool, rcvbuf int) []string {
	return func(b bins, port int, stats string, reply bool, rcvbuf int) []string {
		argv := append([]string{b.ringecho, "-network", "udp4", "-addr", fmt.Sprint("127.0.0.1:", port), "-stats-file", stats, "-rcvbuf", fmt.Sprint(rcvbuf)}, args...)
		if reply {
			argv = append(argv, "-reply")
		}
		return argv
	}
}

// cRecvmmsg is the C server (bench/c/udp_recv.c, recvmmsg(2) in a loop),
// the anchor the one-way figures are also taken over.
const cRecvmmsg = "c-recvmmsg"

const (
	defaultUDPOffered = "600000,1200000"
	defaultUDPServers = "ringpoll,ringpoll-epoll,ringpoll-gro,std,xnet,gnet,c-recvmmsg"
	defaultUDPSizes   = "32,1200"
)

type udpConfig struct {
	servers               []string
	sizes                 []int
	flows, repeats        int
	warmup, duration      time.Duration
	serverCPUs, loadCPUs  cpuSet
	rps                   bool
	rpsCPUs               cpuSet    // where RPS sends lo's receive work
	offered               []float64 // one way: offered datagrams/s; 0: unpaced
	rcvbuf                int       // each server socket's SO_RCVBUF
	turns                 bool      // each cell's servers stay up, measured in turns
	rr                    bool      // request/response instead of one way
	rate                  float64   // with rr: offered requests/s
	cClient               bool      // with rr: bench/c/udp_rr.c, not ringload, is the client
	noCharts              bool      // -charts=false: the report only
	src, out, commandLine string
	stdout, stderr        io.Writer
	bins                  bins
}

// udpRun is one measured run.
type udpRun struct {
	Server  string  `json:"server"`
	Size    int     `json:"size"`
	Offered float64 `json:"offered_rate"`
	Repeat  int     `json:"repeat"`
	Window  float64 `json:"window_s"`
	RecvPPS float64 `json:"recv_pps"`
	SentPPS float64 `json:"sent_pps"`
	// Busy is the server CPUs' busy fraction (1 per CPU), softirqs
	// included; PerCPU is datagrams received per busy CPU-second.
	Busy   float64 `json:"server_cpu_busy"`
	PerCPU float64 `json:"recv_per_cpu_s"`
	// UserBusy and KernelBusy split Busy by the share of user ticks
	// (user, nice) and kernel ticks (system, irq, softirq) the server
	// CPUs counted; both -1 when they counted none.
	UserBusy   float64 `json:"server_cpu_user"`
	KernelBusy float64 `json:"server_cpu_kernel"`
	DropPPS    float64 `json:"drops_per_s"`
	// Request/response runs: requests answered per second, their latency,
	// requests lost, and busy server-CPU µs per request.
	Mode     string  `json:"mode"`
	ReqPerS  float64 `json:"req_per_s,omitempty"`
	P99us    float64 `json:"p99_us,omitempty"`
	P999us   float64 `json:"p999_us,omitempty"`
	Lost     uint64  `json:"lost,omitempty"`
	CPUusReq float64 `json:"cpu_us_per_req,omitempty"`
	Err      string  `json:"error,omitempty"`
}

func parseUDP(servers, sizes string) ([]string, []int, error) {
	var ss []string
	for _, s := range splitList(servers) {
		if _, ok := udpServers[s]; !ok {
			return nil, nil, fmt.Errorf("-udp-servers: unknown server %q (want some of %s)", s, strings.Join(slices.Sorted(maps.Keys(udpServers)), ","))
		}
		ss = append(ss, s)
	}
	var zs []int
	for _, s := range splitList(sizes) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 16 || n > 1472 {
			return nil, nil, fmt.Errorf("-udp-sizes: %q: want 16 to 1472 bytes (one datagram per 1500-byte frame)", s)
		}
		zs = append(zs, n)
	}
	if len(ss) == 0 || len(zs) == 0 {
		return nil, nil, errors.New("-udp-servers and -udp-sizes must name at least one each")
	}
	return ss, zs, nil
}

// parseRates reads a comma-separated list of rates per second.
func parseRates(s string) ([]float64, error) {
	var rs []float64
	for _, f := range splitList(s) {
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || r < 0 {
			return nil, fmt.Errorf("%q: want a rate per second, 0 or more", f)
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return nil, errors.New("no rate")
	}
	return rs, nil
}
