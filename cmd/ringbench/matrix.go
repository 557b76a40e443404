//go:build linux

package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// A server is one kind of server process ringbench can start.
type server struct {
	name string
	// kind is "ringpoll" (cmd/ringecho with -engine name), "std"
	// (cmd/ringload -serve-std), "peer" (bench/cmd/peerecho -impl name) or
	// "c" (bench/c/uring_echo.c, the C liburing reference server).
	kind string
	// inline: a ringpoll server named ENGINE-inline runs ringecho
	// -engine ENGINE -api inline (the handler on the event loop).
	inline bool
	// pinned: one named ENGINE-pinned gets -loop-cpus with the server
	// CPUs (ringpoll.WithLoopCPUs): its loops lock a thread each, pinned.
	pinned bool
	// busyPoll: one named ENGINE-busypoll gets -busy-poll 50µs
	// (ringpoll.WithBusyPoll): an idle loop polls 50µs before it sleeps.
	busyPoll bool
	// oneLoop: one named ENGINE-1loop gets -loops 1: every connection on
	// one loop, whatever the CPUs (the default before it followed
	// GOMAXPROCS), to show what a loop per CPU buys.
	oneLoop bool
	// twin: one named ENGINE-twin runs the very command ENGINE runs. The
	// default server paired with its twin shows how far two identical
	// servers drift apart in one run: the noise a ratio to a peer must
	// clear before it means anything.
	twin bool
}

// servers are every server ringbench knows, in report order.
var servers = []server{
	{name: "uring", kind: "ringpoll"},
	{name: "uring-twin", kind: "ringpoll", twin: true},
	{name: "uring-inline", kind: "ringpoll", inline: true},
	{name: "uring-pinned", kind: "ringpoll", pinned: true},
	{name: "uring-busypoll", kind: "ringpoll", busyPoll: true},
	{name: "uring-1loop", kind: "ringpoll", oneLoop: true},
	{name: "uring-hybrid", kind: "ringpoll"},
	{name: "uring-reactor", kind: "ringpoll"},
	{name: "uring-sqpoll", kind: "ringpoll"},
	{name: "epoll", kind: "ringpoll"},
	{name: "epoll-inline", kind: "ringpoll", inline: true},
	{name: "std", kind: "std"},
	{name: "netpoll", kind: "peer"},
	{name: "gnet", kind: "peer"},
	{name: "c-liburing", kind: "c"},
}

func lookupServer(name string) (server, bool) {
	for _, s := range servers {
		if s.name == name {
			return s, true
		}
	}
	return server{}, false
}

// The matrices. The default one finishes in about 4 minutes on 2 cores;
// -full runs the seeds' whole sweep, with the twin and the turns. "uring"
// is what a Server on the default engine runs where io_uring works.
const (
	defaultServers = "uring,epoll,std,netpoll,gnet,c-liburing"
	defaultConns   = "10,100,1000"
	defaultLoads   = "echo:1024:pp:max,echo:1024:pp:40000"

	fullServers = "uring,uring-twin,uring-inline,uring-pinned,uring-busypoll,uring-hybrid,uring-reactor,uring-sqpoll,epoll,epoll-inline,std,netpoll,gnet,c-liburing"
	fullConns   = "10,50,100,200,300,400,500,1000"
	fullTurns   = 12 * time.Second
	fullLoads   = "echo:1024:pp:max,echo:1024:pp:40000,echo:512:pp:max,echo:1024:p16:max,rpc:1024:pp:40000"
)

// load is one load of the matrix: a scenario, message size, mode and rate
// (every cell of the matrix is a load at a connection count on a server).
type load struct {
	scenario string
	size     int
	mode     string
	depth    int
	rate     float64
}

// parseLoads reads a comma-separated list of loads, each
// scenario:size:mode:rate, for example "echo:1024:pp:max" (ping-pong, as
// fast as the load generator goes) or "rpc:512:p16:40000" (pipelines of
// 16, 40000 requests/s offered).
func parseLoads(s string) ([]load, error) {
	var ls []load
	for _, spec := range splitList(s) {
		f := strings.Split(spec, ":")
		if len(f) != 4 {
			return nil, fmt.Errorf("load %q: want scenario:size:mode:rate, e.g. echo:1024:pp:max or rpc:512:p16:40000", spec)
		}
		var l load
		switch f[0] {
		case "echo", "rpc":
			l.scenario = f[0]
		default:
			return nil, fmt.Errorf("load %q: scenario %q: want echo or rpc", spec, f[0])
		}
		size, err := strconv.Atoi(f[1])
		if err != nil || size < 16 || size > 1<<20 {
			return nil, fmt.Errorf("load %q: size %q: want 16 to 1048576 bytes", spec, f[1])
		}
		l.size = size
		switch {
		case f[2] == "pp":
			l.mode, l.depth = "pingpong", 1
		case strings.HasPrefix(f[2], "p"):
			d, err := strconv.Atoi(f[2][1:])
			if err != nil || d < 2 || d > 1024 {
				return nil, fmt.Errorf("load %q: mode %q: want pp (ping-pong) or pN, N from 2 to 1024 (pipelined)", spec, f[2])
			}
			l.mode, l.depth = "pipeline", d
		default:
			return nil, fmt.Errorf("load %q: mode %q: want pp (ping-pong) or pN (pipelined, N in flight)", spec, f[2])
		}
		if f[3] != "max" {
			r, err := strconv.ParseFloat(f[3], 64)
			if err != nil || r < 1 || r > 1e9 {
				return nil, fmt.Errorf("load %q: rate %q: want max or requests/s from 1 to 1e9", spec, f[3])
			}
			l.rate = r
		}
		ls = append(ls, l)
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("no loads in %q", s)
	}
	return ls, nil
}

// parseServers reads a comma-separated list of server names.
func parseServers(s string) ([]server, error) {
	var ss []server
	for _, name := range splitList(s) {
		srv, ok := lookupServer(name)
		if !ok {
			var names []string
			for _, s := range servers {
				names = append(names, s.name)
			}
			return nil, fmt.Errorf("server %q: want one of %s", name, strings.Join(names, ", "))
		}
		if slices.Contains(ss, srv) {
			return nil, fmt.Errorf("server %q listed twice", name)
		}
		ss = append(ss, srv)
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("no servers in %q", s)
	}
	return ss, nil
}

// parseConns reads a comma-separated list of connection counts.
func parseConns(s string) ([]int, error) {
	var cs []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 100000 {
			return nil, fmt.Errorf("connections %q: want 1 to 100000", f)
		}
		if !slices.Contains(cs, n) {
			cs = append(cs, n)
		}
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("no connection counts in %q", s)
	}
	slices.Sort(cs)
	return cs, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// cell is the matrix cell of a load at conns on srv.
func (l load) cell(srv string, conns int) benchfmt.Cell {
	return benchfmt.Cell{
		Scenario: l.scenario, Mode: l.mode, Depth: l.depth, Rate: l.rate,
		Server: srv, Conns: conns, Size: l.size,
	}
}
