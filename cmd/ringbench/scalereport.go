//go:build linux

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// scaleSummary is a cell of -scale over its repeats: the matrix's summary
// and the server's resident memory per connection. It is a line of
// scale.jsonl (kind "summary", so ringplot reads it as a matrix summary).
type scaleSummary struct {
	benchfmt.Summary
	// RSSIdle and RSSEnd are the growth of the server's VmRSS from before
	// the first dial, over the connections, in bytes: with every
	// connection open and idle (each has echoed once), and at the end of
	// the window, under the load.
	RSSIdle benchfmt.Stat `json:"rss_idle_per_conn"`
	RSSEnd  benchfmt.Stat `json:"rss_per_conn"`
}

// scaleGrowth returns a run's server RSS growth from before the first
// dial, idle and at the end, in bytes; ok is false where either was not
// measured.
func scaleGrowth(run benchfmt.Run) (idle, end float64, ok bool) {
	lr, decoded := decode(run)
	if !decoded || run.Err != "" || lr.RSSBase < 0 || lr.RSSIdle < 0 || lr.RSSEnd < 0 {
		return 0, 0, false
	}
	return float64(lr.RSSIdle - lr.RSSBase), float64(lr.RSSEnd - lr.RSSBase), true
}

// scaleSummaries summarizes the runs as the matrix does, adding the RSS
// per connection.
func scaleSummaries(runs []benchfmt.Run, order []string) []scaleSummary {
	var out []scaleSummary
	for _, s := range summarize(runs, order) {
		var idle, end []float64
		for _, run := range runs {
			if run.Cell != s.Cell {
				continue
			}
			if i, e, ok := scaleGrowth(run); ok {
				idle = append(idle, i/float64(s.Conns))
				end = append(end, e/float64(s.Conns))
			}
		}
		// Growth may be negative (a server that gave memory back): a
		// Stat would leave it out as not measured; zero it.
		clamp := func(xs []float64) []float64 {
			for i := range xs {
				xs[i] = max(xs[i], 0)
			}
			return xs
		}
		out = append(out, scaleSummary{Summary: s, RSSIdle: benchfmt.NewStat(clamp(idle)), RSSEnd: benchfmt.NewStat(clamp(end))})
	}
	return out
}

// scaleGroups splits the summaries (in summarize's order) by load.
func scaleGroups(sums []scaleSummary) [][]scaleSummary {
	var out [][]scaleSummary
	for i, s := range sums {
		if i == 0 || s.Group() != sums[i-1].Group() {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], s)
	}
	return out
}

// plain returns the matrix summaries of a group, for the matrix's helpers.
func plain(g []scaleSummary) []benchfmt.Summary {
	out := make([]benchfmt.Summary, len(g))
	for i, s := range g {
		out[i] = s.Summary
	}
	return out
}

// scaleFind returns the summary of server at conns in a group.
func scaleFind(g []scaleSummary, server string, conns int) (scaleSummary, bool) {
	for _, s := range g {
		if s.Server == server && s.Conns == conns {
			return s, true
		}
	}
	return scaleSummary{}, false
}

// isGoPeer reports whether server is one of the Go peers the default
// must be ahead of: std net, netpoll, gnet.
func isGoPeer(server string) bool {
	s, _ := lookupServer(server)
	return s.kind == "std" || s.kind == "peer"
}

// writeScaleReport writes scale.md: how it was made, the targets
// as the run checks them, then per load a table, the paired ratios and
// the charts, and the memory per connection.
func writeScaleReport(w io.Writer, m meta, runs []benchfmt.Run, sums []scaleSummary, charts []string) {
	fmt.Fprintf(w, "# ringbench -scale\n\n")
	fmt.Fprintf(w, "- date: %s\n- command: `%s`\n- machine: %s\n- Go: %s\n- placement: %s\n",
		m.Date, m.Command, m.Machine, m.Go, m.Placement)
	fmt.Fprintf(w, "- each count: every server in a process of its own, started for the count; one ringload (-rates) runs the loads one after another on the same connections, each load %s of warm-up and %s measured, every load but the last ending at rest; it dials the connections 64 at a time over loopback source addresses (-sources), each echoing one message as it connects (-prime: the server's setup of every connection is over before the warm-up), and ends them with resets (-close-reset: no TIME_WAIT piles up from run to run); %s per cell, medians (± is half the range of the repeats)\n",
		m.Warmup, m.Duration, plural(m.Repeats, "repeat"))
	fmt.Fprintf(w, "- syscalls: %s\n", m.Syscalls)
	fmt.Fprintf(w, "- user and kernel µs/req: CPU µs/req split by the share of the server's user and system time in the kernel's tick samples of its threads (kernel time includes the softirq work that ran on the server's threads)\n")
	fmt.Fprintf(w, "- RSS per connection: the growth of the server's VmRSS (/proc/PID/status) from before the first dial, over the connections: idle, once every connection has echoed once, before the first load; at end, at the end of a load's window, under the load (a later load's figure includes what the earlier ones left). It includes what first traffic costs a fresh server (heap spans, buffer arenas), which weighs at small counts; the marginal figure, the growth from the smallest count to the largest over the connections added, leaves it out (bench/cmd/ringidle measures an idle connection alone, after a warm-up and a GC)\n")
	for _, n := range m.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	writeScaleTargets(w, runs, sums)
	for _, g := range scaleGroups(sums) {
		fmt.Fprintf(w, "\n## %s\n\n", title(g[0].Cell))
		writeScaleTable(w, g)
		writeScaleCPUGrowth(w, g)
		writePaired(w, runs, plain(g))
		for _, mt := range scaleMetrics {
			name := scaleChartName(g[0].Group(), mt.name)
			if slices.Contains(charts, name) {
				fmt.Fprintf(w, "\n![%s: %s](%s)\n", g[0].Group(), mt.title, name)
			}
		}
	}
	writeScaleRSS(w, runs, sums)
}

var scaleHeader = []string{
	"server", "conns", "req/s", "p50 µs", "p99 µs", "p99.9 µs", "CPU µs/req", "user µs/req", "kernel µs/req",
	"req per CPU-s", defaultServer + " over it", "syscalls/req", "RSS/conn idle", "RSS/conn at end", "errors",
}

// writeScaleTable writes a load's figures per server and count.
func writeScaleTable(w io.Writer, g []scaleSummary) {
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(scaleHeader, " | "), strings.Repeat("---|", len(scaleHeader)))
	for _, s := range g {
		vs := "-"
		if d, ok := scaleFind(g, defaultServer, s.Conns); ok && s.Server != defaultServer {
			vs = ratio(d.ReqPerCPUs, s.ReqPerCPUs)
		}
		cells := []string{
			s.Server, fmt.Sprint(s.Conns), withSpread(s.ReqPerS, 0) + rateMark(s.Summary),
			num(s.P50us, 0), num(s.P99us, 0), num(s.P999us, 0),
			withSpread(s.CPUusPerReq, 2), num(s.UserUsPerReq, 2), num(s.KernelUsPerReq, 2),
			num(s.ReqPerCPUs, 0), vs, num(s.SyscallsPerReq, 2) + libMark(s.Summary),
			bytesPer(s.RSSIdle), bytesPer(s.RSSEnd), errs(s.Summary),
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// bytesPer formats a per-connection byte figure, "-" if not measured.
func bytesPer(s benchfmt.Stat) string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f B", s.Median)
}

// scaleBase is the count the CPU per request at larger counts is held
// against.
const scaleBase = 1000

// writeScaleCPUGrowth writes, at a paced load, each server's CPU per
// request at every count over its figure at scaleBase connections: at a
// fixed total rate every count does the same work, so above 1 is what
// the connections themselves cost.
func writeScaleCPUGrowth(w io.Writer, g []scaleSummary) {
	if g[0].Rate <= 0 {
		return
	}
	conns, servers := scaleCounts(g), scaleServers(g)
	if !slices.Contains(conns, scaleBase) || len(conns) < 2 {
		return
	}
	fmt.Fprintf(w, "\nCPU per request over its figure at %d connections (the same work at every count: above 1 is what the connections cost):\n\n| server |", scaleBase)
	for _, c := range conns {
		fmt.Fprintf(w, " %d |", c)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(conns)))
	for _, srv := range servers {
		base, ok := scaleFind(g, srv, scaleBase)
		fmt.Fprintf(w, "| %s |", srv)
		for _, c := range conns {
			s, found := scaleFind(g, srv, c)
			if !ok || !found {
				fmt.Fprint(w, " - |")
				continue
			}
			fmt.Fprintf(w, " %s |", ratio(s.CPUusPerReq, base.CPUusPerReq))
		}
		fmt.Fprintln(w)
	}
}

// scaleRSSGrowth is a server's RSS growth in bytes at each count, idle,
// over the runs of every load.
func scaleRSSGrowth(runs []benchfmt.Run, server string) map[int][]float64 {
	out := map[int][]float64{}
	for _, run := range runs {
		if run.Server != server {
			continue
		}
		if idle, _, ok := scaleGrowth(run); ok {
			out[run.Conns] = append(out[run.Conns], idle)
		}
	}
	return out
}

// scaleMarginal is a server's idle RSS per connection from the smallest
// count to the largest it was measured at: the growth between them over
// the connections added, which leaves out what every count pays once.
// With one count, the growth at it over its connections. ok is false
// without a measurement.
func scaleMarginal(runs []benchfmt.Run, server string) (perConn float64, lo, hi int, ok bool) {
	g := scaleRSSGrowth(runs, server)
	if len(g) == 0 {
		return 0, 0, 0, false
	}
	var conns []int
	for c := range g {
		conns = append(conns, c)
	}
	slices.Sort(conns)
	lo, hi = conns[0], conns[len(conns)-1]
	if lo == hi {
		return benchfmt.Median(g[hi]) / float64(hi), lo, hi, true
	}
	return (benchfmt.Median(g[hi]) - benchfmt.Median(g[lo])) / float64(hi-lo), lo, hi, true
}

// writeScaleRSS writes the idle RSS per connection of every server at
// every count, over the runs of every load, and the marginal figure.
func writeScaleRSS(w io.Writer, runs []benchfmt.Run, sums []scaleSummary) {
	conns, servers := scaleCounts(sums), scaleServers(sums)
	fmt.Fprintf(w, "\n## Resident memory per idle connection\n\nThe server's VmRSS growth from before the first dial to every connection open and idle (each has echoed once), over the connections, in bytes; medians over the runs of every load. Marginal: the growth from the smallest count to the largest over the connections added.\n\n| server |")
	for _, c := range conns {
		fmt.Fprintf(w, " %d |", c)
	}
	fmt.Fprintf(w, " marginal |\n|---|%s---|\n", strings.Repeat("---|", len(conns)))
	for _, srv := range servers {
		g := scaleRSSGrowth(runs, srv)
		fmt.Fprintf(w, "| %s |", srv)
		for _, c := range conns {
			if xs := g[c]; len(xs) > 0 {
				fmt.Fprintf(w, " %.0f |", max(benchfmt.Median(xs), 0)/float64(c))
			} else {
				fmt.Fprint(w, " - |")
			}
		}
		if m, _, _, ok := scaleMarginal(runs, srv); ok {
			fmt.Fprintf(w, " %.0f |\n", m)
		} else {
			fmt.Fprint(w, " - |\n")
		}
	}
}
