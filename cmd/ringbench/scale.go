//go:build linux

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The scale family (-scale): the servers of the matrix from 10 to 19,000
// connections, 1 KiB ping-pong at one fixed total rate (so every count
// does the same work: 20,000 requests a second are 2,000 a connection at
// 10 and about one at 19,000) and saturated. Its questions (issue
// "scale"): does the default server's CPU per request stay flat as the
// connections grow, is it ahead of every Go peer in requests per server
// CPU-second from 1,000 connections up, and what does a connection cost
// it in resident memory, next to gnet?
//
// At each count every server runs in a process of its own, started for
// the count and stopped after it, and one ringload runs the loads one
// after another on the same connections (-rates: their setup, which at
// 19,000 costs more than a load's window, is paid once; every load but
// the last ends at rest). ringload dials the connections 64 at a time,
// spread over loopback source addresses (-sources: connect(2)'s search
// for a free port slows with the connections already open from one
// address), each echoing one message as it connects (-prime: the
// connection's setup in the server, accept and first buffers and
// goroutine, is over before the warm-up), and ends them with resets
// (-close-reset: no TIME_WAIT piles up from run to run).
//
// The server's resident memory (VmRSS) counts from a process that has
// held no connection: ringload reads it before its first dial, once
// every connection is open and has echoed once, and at the end of each
// load's window. The growth over the connections is the RSS per
// connection, idle and under the load (the later loads' figures include
// what the earlier ones left); the first traffic's fixed costs (heap
// spans, buffer arenas) weigh on it at small counts, so the report also
// gives the marginal figure, the growth from the smallest count to the
// largest over the connections added.
//
// The runs of a repeat go count by count, every server one after the
// other (their order rotating from repeat to repeat), so the runs
// compared at a count are seconds apart. CPU, its split into user and
// kernel, latency and syscalls are ringload's, as in the matrix.
//
// Every connection is a descriptor in the server and one in ringload:
// ringbench raises its soft RLIMIT_NOFILE to the hard limit, which the
// servers inherit (Go programs raise their own anyway), and leaves out,
// with a note, the counts the limit or the ephemeral port range cannot
// hold.

// The family's defaults. With every server of the default list (the C
// one included), repeats 3, -warmup 300ms and -duration 1s, a run takes
// about 10 minutes on 2 CPUs (scaleEstimate; TestScaleEstimate holds it
// to that).
const (
	defaultScaleConns = "10,100,1000,5000,10000,19000"
	defaultScaleLoads = "echo:1024:pp:20000,echo:1024:pp:max"
)

// scaleNofileMargin is the descriptors a server or ringload needs besides
// its connections: listeners, rings, epoll and event descriptors, pipes,
// the runtime's.
const scaleNofileMargin = 512

// The estimate's figures, from runs on 2 CPUs: a server process's own
// overhead (starting it, ringload and perf, and stopping them), each
// connection's dial, first echo and close on both sides (CPU-bound, in
// ringload above all: 19,000 took 3.9 s), and each load's beyond its
// windows (perf's start, the end at rest).
const (
	scaleProcOverhead = 600 * time.Millisecond
	scaleConnSetup    = 200 * time.Microsecond
	scaleLoadOverhead = 100 * time.Millisecond
)

// scaleRuns is how many runs cfg makes: every server at every count and
// load, but the C server, a byte echo, at echo loads only.
func scaleRuns(cfg *config) int {
	n := 0
	for _, s := range cfg.servers {
		for _, l := range cfg.loads {
			if s.kind != "c" || l.scenario == "echo" {
				n += len(cfg.conns)
			}
		}
	}
	return n * cfg.repeats
}

// scaleEstimate is how long cfg's runs take: a server process per
// server, count, group of loads and repeat, with the setup of its
// connections, and per load its warm-up, its window and perf's syscall
// window after it (at most 500 ms).
func scaleEstimate(cfg *config) time.Duration {
	total := 0
	for _, c := range cfg.conns {
		total += c
	}
	procs := 0
	for _, s := range cfg.servers {
		for _, g := range scaleLoadGroups(cfg.loads) {
			if s.kind != "c" || g[0].scenario == "echo" {
				procs += cfg.repeats
			}
		}
	}
	perLoad := cfg.warmup + cfg.duration + min(cfg.duration, 500*time.Millisecond) + scaleLoadOverhead
	return time.Duration(procs*len(cfg.conns))*scaleProcOverhead + time.Duration(procs*total)*scaleConnSetup +
		time.Duration(scaleRuns(cfg))*perLoad
}

// scalePerSource is the most connections -scale opens from one source
// address: connect(2)'s search for a free port walks the ones in use
// from the same address to the same destination (ringload -sources).
const scalePerSource = 2000

// scaleSources is how many loopback source addresses conns connections
// are spread over: enough that none has more than scalePerSource, nor
// more than half the ephemeral ports.
func scaleSources(conns, ports int) int {
	per := max(min(scalePerSource, ports/2), 1)
	return min(max((conns+per-1)/per, 1), maxLoadSources)
}

// maxLoadSources is ringload's most source addresses (127.0.0.1 to
// 127.0.0.250).
const maxLoadSources = 250

// scaleFit keeps the connection counts that nofile (the hard
// RLIMIT_NOFILE, which server and load generator each need a descriptor
// per connection under) and ports (the ephemeral ports of each source
// address) can hold, and says why it left the others out.
func scaleFit(conns []int, nofile uint64, ports int) (keep []int, notes []string) {
	for _, c := range conns {
		switch {
		case uint64(c)+scaleNofileMargin > nofile:
			notes = append(notes, fmt.Sprintf("%d connections left out: the open-files limit (RLIMIT_NOFILE) is %d, and server and load generator each need %d descriptors and about %d more", c, nofile, c, scaleNofileMargin))
		case c > scaleSources(c, ports)*ports/2:
			notes = append(notes, fmt.Sprintf("%d connections left out: the ephemeral port range (net.ipv4.ip_local_port_range) holds %d ports, and %d source addresses cannot spread them thin enough", c, ports, maxLoadSources))
		default:
			keep = append(keep, c)
		}
	}
	return keep, notes
}

// raiseNofile raises the soft RLIMIT_NOFILE to the hard one and returns
// the hard one. The Go runtime raised the soft limit already, but lowers
// it again in the processes it starts unless the program sets the limit
// itself (syscall's rlimit.go): the C server needs it raised.
func raiseNofile() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, os.NewSyscallError("getrlimit", err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, os.NewSyscallError("setrlimit", err)
	}
	return lim.Max, nil
}

// ephemeralPorts is the size of the range connect(2) picks local ports
// from (net.ipv4.ip_local_port_range), or a large number if it cannot be
// read.
func ephemeralPorts() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 1 << 20
	}
	return parsePortRange(string(b))
}

// parsePortRange reads "32768\t60999" into the number of ports in it, or
// a large number if it cannot.
func parsePortRange(s string) int {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 1 << 20
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || hi < lo {
		return 1 << 20
	}
	return hi - lo + 1
}
