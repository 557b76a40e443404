//go:build linux

package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// summarize folds the runs of each cell into a Summary, ordered by group
// (first seen first), then server (in serverOrder), then connections.
func summarize(runs []benchfmt.Run, serverOrder []string) []benchfmt.Summary {
	type acc struct {
		runs []benchfmt.Run
		lrs  []loadResult
	}
	cells := map[benchfmt.Cell]*acc{}
	var order []benchfmt.Cell
	groupRank := map[string]int{}
	for _, run := range runs {
		a := cells[run.Cell]
		if a == nil {
			a = &acc{}
			cells[run.Cell] = a
			order = append(order, run.Cell)
		}
		if _, ok := groupRank[run.Group()]; !ok {
			groupRank[run.Group()] = len(groupRank)
		}
		a.runs = append(a.runs, run)
		if lr, ok := decode(run); ok {
			a.lrs = append(a.lrs, lr)
		}
	}
	serverRank := func(s string) int {
		if i := slices.Index(serverOrder, s); i >= 0 {
			return i
		}
		return len(serverOrder)
	}
	slices.SortStableFunc(order, func(a, b benchfmt.Cell) int {
		return cmp.Or(
			cmp.Compare(groupRank[a.Group()], groupRank[b.Group()]),
			cmp.Compare(serverRank(a.Server), serverRank(b.Server)),
			strings.Compare(a.Server, b.Server),
			cmp.Compare(a.Conns, b.Conns))
	})
	var sums []benchfmt.Summary
	for _, c := range order {
		a := cells[c]
		s := benchfmt.Summary{Kind: "summary", Cell: c, Repeats: len(a.runs), Placement: a.runs[0].Placement}
		stat := func(f func(loadResult) float64) benchfmt.Stat {
			var vs []float64
			for _, lr := range a.lrs {
				vs = append(vs, f(lr))
			}
			return benchfmt.NewStat(vs)
		}
		s.ReqPerS = stat(func(l loadResult) float64 { return l.ReqPerS })
		s.P50us = stat(func(l loadResult) float64 { return l.P50us })
		s.P99us = stat(func(l loadResult) float64 { return l.P99us })
		s.P999us = stat(func(l loadResult) float64 { return l.P999us })
		s.P9999us = stat(func(l loadResult) float64 { return l.P9999us })
		s.ServerCPUCores = stat(func(l loadResult) float64 { return l.ServerCPUCores })
		s.CPUusPerReq = stat(func(l loadResult) float64 { return l.ServerCPUusPerReq })
		s.ReqPerCPUs = stat(func(l loadResult) float64 { return l.ReqPerServerCPUs })
		s.UserUsPerReq = stat(func(l loadResult) float64 { return l.UserUsPerReq })
		s.KernelUsPerReq = stat(func(l loadResult) float64 { return l.KernelUsPerReq })
		s.SyscallsPerReq = stat(func(l loadResult) float64 { return l.SyscallsPerReq })
		s.CtxSwPerReq = stat(func(l loadResult) float64 { return l.CtxSwitchesPerReq })
		if s.SyscallsPerReq.N > 0 {
			s.SyscallsSource = "perf"
		} else if lib := stat(func(l loadResult) float64 { return l.LoopSyscallsPerReq }); lib.N > 0 {
			// No perf: the library's own count, a lower bound.
			s.SyscallsPerReq, s.SyscallsSource = lib, "library"
		}
		for _, run := range a.runs {
			if run.Err != "" {
				s.Errors++
			}
		}
		for _, lr := range a.lrs {
			s.Errors += lr.DialErrors + lr.IOErrors
			s.VerifyErrors += int(lr.VerifyErrors)
		}
		sums = append(sums, s)
	}
	return sums
}

// groups splits summaries (in summarize's order) by chart group.
func groups(sums []benchfmt.Summary) [][]benchfmt.Summary {
	var out [][]benchfmt.Summary
	for i, s := range sums {
		if i == 0 || s.Group() != sums[i-1].Group() {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], s)
	}
	return out
}

// title is a group's heading, e.g. "echo, 1024 B, ping-pong, max load".
func title(c benchfmt.Cell) string {
	mode := "ping-pong"
	if c.Mode == "pipeline" {
		mode = fmt.Sprintf("pipelined, %d in flight", c.Depth)
	}
	load := "as fast as the load generator goes"
	if c.Rate > 0 {
		load = fmt.Sprintf("%.0f req/s offered", c.Rate)
	}
	return fmt.Sprintf("%s, %d B, %s, %s", c.Scenario, c.Size, mode, load)
}

// find returns the summary of server at conns in a group.
func find(g []benchfmt.Summary, server string, conns int) (benchfmt.Summary, bool) {
	for _, s := range g {
		if s.Server == server && s.Conns == conns {
			return s, true
		}
	}
	return benchfmt.Summary{}, false
}

// num formats a median with prec decimals, "-" if not measured.
func num(s benchfmt.Stat, prec int) string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, s.Median)
}

// withSpread formats a median with prec decimals and, over two or more
// repeats, their spread as ± half the range, in percent of the median.
func withSpread(s benchfmt.Stat, prec int) string {
	if s.N < 2 {
		return num(s, prec)
	}
	return fmt.Sprintf("%s ±%.0f%%", num(s, prec), 50*s.Spread())
}

// ratio formats a/b of medians, "-" if either is missing.
func ratio(a, b benchfmt.Stat) string {
	if a.N == 0 || b.N == 0 || b.Median == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a.Median/b.Median)
}

// rateMark flags a rate-capped cell whose server did not keep up (less
// than 95% of the offered rate done).
func rateMark(s benchfmt.Summary) string {
	if s.Rate > 0 && s.ReqPerS.N > 0 && s.ReqPerS.Median < 0.95*s.Rate {
		return " (behind)"
	}
	return ""
}

// libMark flags syscalls counted by the library rather than perf.
func libMark(s benchfmt.Summary) string {
	if s.SyscallsSource == "library" {
		return " (lib)"
	}
	return ""
}

func errs(s benchfmt.Summary) string {
	if s.Errors == 0 && s.VerifyErrors == 0 {
		return "0"
	}
	return fmt.Sprintf("%d, %d verify", s.Errors, s.VerifyErrors)
}

// row is the figures of one summary, shared by the table and the report.
func row(g []benchfmt.Summary, s benchfmt.Summary) []string {
	var vsStd string
	if std, ok := find(g, "std", s.Conns); ok {
		vsStd = ratio(s.CPUusPerReq, std.CPUusPerReq)
	} else {
		vsStd = "-"
	}
	return []string{
		s.Server, fmt.Sprint(s.Conns),
		withSpread(s.ReqPerS, 0) + rateMark(s),
		num(s.P50us, 0), num(s.P99us, 0), num(s.P999us, 0), num(s.P9999us, 0),
		num(s.ServerCPUCores, 2), withSpread(s.CPUusPerReq, 2), num(s.UserUsPerReq, 2), num(s.KernelUsPerReq, 2), vsStd,
		num(s.ReqPerCPUs, 0), num(s.SyscallsPerReq, 2) + libMark(s), num(s.CtxSwPerReq, 2), errs(s),
	}
}

var header = []string{
	"server", "conns", "req/s", "p50 µs", "p99 µs", "p99.9 µs", "p99.99 µs",
	"server CPU (cores)", "CPU µs/req", "user µs/req", "kernel µs/req", "CPU/req vs std", "req per CPU-s", "syscalls/req", "ctx sw/req", "errors",
}

// termHeader and termColumns are the terminal's table: the columns of
// header that fit 100 columns ("vs std" is CPU per request over std's);
// report.md has them all.
var (
	termHeader  = []string{"server", "conns", "req/s", "p50 µs", "p99 µs", "CPU µs/req", "vs std", "req/CPU-s", "sys/req", "errors"}
	termColumns = []int{0, 1, 2, 3, 4, 8, 11, 12, 13, 15}
)

// writeTable prints the summaries as aligned text tables, one per group,
// each followed by the default server's verdict against the peers.
func writeTable(w io.Writer, sums []benchfmt.Summary) {
	for i, g := range groups(sums) {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "== %s (%s, medians, ± half the range)\n", title(g[0].Cell), plural(g[0].Repeats, "repeat"))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(termHeader, "\t")+"\t")
		behind := false
		for _, s := range g {
			full := row(g, s)
			cells := make([]string, len(termColumns))
			for j, c := range termColumns {
				cells[j] = full[c]
			}
			if m := rateMark(s); m != "" {
				cells[2] = strings.TrimSuffix(cells[2], m) + " *"
				behind = true
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
		tw.Flush()
		if behind {
			fmt.Fprintln(w, "   * below the offered rate")
		}
		writeVerdict(w, g)
	}
}

// defaultServer is the server a ringpoll Server runs with no options where
// io_uring works; twinServer runs it again, so that a run shows how far
// two identical servers come apart in it.
const (
	defaultServer = "uring"
	twinServer    = defaultServer + "-twin"
)

// writeVerdict prints, by connections, the default server's requests per
// server CPU-second over each peer's (above 1: the default is ahead), and
// whether it is ahead of every Go peer.
func writeVerdict(w io.Writer, g []benchfmt.Summary) {
	var peers []string
	for _, s := range g {
		if srv, _ := lookupServer(s.Server); srv.kind != "ringpoll" && !slices.Contains(peers, s.Server) {
			peers = append(peers, s.Server)
		}
	}
	var lines []string
	for _, s := range g {
		if s.Server != defaultServer || len(peers) == 0 {
			continue
		}
		var parts []string
		ahead := true
		for _, p := range peers {
			ps, ok := find(g, p, s.Conns)
			if !ok {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s", ratio(s.ReqPerCPUs, ps.ReqPerCPUs), p))
			if srv, _ := lookupServer(p); srv.kind != "c" && s.ReqPerCPUs.Median <= ps.ReqPerCPUs.Median {
				ahead = false
			}
		}
		verdict := "behind a Go peer"
		if ahead {
			verdict = "ahead of every Go peer"
		}
		if ts, ok := find(g, twinServer, s.Conns); ok {
			// The noise yardstick: the same server again, in the same run.
			verdict += fmt.Sprintf("; %s, the same server again, %s", twinServer, ratio(s.ReqPerCPUs, ts.ReqPerCPUs))
		}
		lines = append(lines, fmt.Sprintf("   %4d conns: %s (%s)", s.Conns, strings.Join(parts, ", "), verdict))
	}
	if len(lines) > 0 {
		fmt.Fprintf(w, "-- the default server (%s), requests per server CPU-second over each peer's:\n%s\n", defaultServer, strings.Join(lines, "\n"))
	}
}

// meta is what the report says about how it was made.
type meta struct {
	Date      string
	Command   string
	Machine   string // CPU model and count, kernel
	Go        string
	Placement string
	Repeats   int
	Warmup    string
	Duration  string
	Syscalls  string // how syscalls were counted
	Notes     []string
	// Turns: the servers stayed up and were measured in turns, not
	// started afresh for each repeat (-frameworks -fw-turns).
	Turns bool
}

// writeMarkdown writes the report: how it was made, then per group a
// table, the ratios of the ringpoll servers to the peers, and the charts
// (charts lists the chart files written, by base name).
func writeMarkdown(w io.Writer, m meta, runs []benchfmt.Run, sums []benchfmt.Summary, charts []string) {
	fmt.Fprintf(w, "# ringbench report\n\n")
	fmt.Fprintf(w, "- date: %s\n- command: `%s`\n- machine: %s\n- Go: %s\n- placement: %s\n",
		m.Date, m.Command, m.Machine, m.Go, m.Placement)
	fmt.Fprintf(w, "- each cell: %s of %s warm-up and %s measured, medians (± is half the range of the repeats)\n",
		plural(m.Repeats, "repeat"), m.Warmup, m.Duration)
	fmt.Fprintf(w, "- syscalls: %s\n", m.Syscalls)
	fmt.Fprintf(w, "- user and kernel µs/req: CPU µs/req split by the share of the server's user and system time in the kernel's tick samples of its threads (ringload; a run's user figure is good to about 10%%, its median over the repeats better; kernel time includes the softirq work that ran on the server's threads)\n")
	for _, n := range m.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	for _, g := range groups(sums) {
		fmt.Fprintf(w, "\n## %s\n\n", title(g[0].Cell))
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
		for _, s := range g {
			fmt.Fprintf(w, "| %s |\n", strings.Join(row(g, s), " | "))
		}
		writeRatios(w, g)
		writePaired(w, runs, g)
		for _, metric := range []string{"throughput", "p99", "cpu", "syscalls"} {
			name := g[0].Group() + "-" + metric + ".svg"
			if slices.Contains(charts, name) {
				fmt.Fprintf(w, "\n![%s: %s](%s)\n", g[0].Group(), metric, name)
			}
		}
	}
}

// writeRatios writes, for each ringpoll server in the group, its CPU per
// request, syscalls per request and p99 latency over each peer's, by
// connections: below 1 means ringpoll spends or waits less.
func writeRatios(w io.Writer, g []benchfmt.Summary) {
	var peers, ours []string
	for _, s := range g {
		srv, _ := lookupServer(s.Server)
		list := &ours
		if srv.kind != "ringpoll" {
			list = &peers
		}
		if !slices.Contains(*list, s.Server) {
			*list = append(*list, s.Server)
		}
	}
	if len(peers) == 0 || len(ours) == 0 {
		return
	}
	cols := []string{"server", "conns"}
	for _, what := range []string{"CPU/req", "syscalls/req", "p99"} {
		for _, p := range peers {
			cols = append(cols, what+" vs "+p)
		}
	}
	fmt.Fprintf(w, "\nRatios, ringpoll over the peer (below 1: ringpoll spends or waits less):\n\n")
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for _, s := range g {
		if !slices.Contains(ours, s.Server) {
			continue
		}
		cells := []string{s.Server, fmt.Sprint(s.Conns)}
		for _, metric := range []func(benchfmt.Summary) benchfmt.Stat{
			func(s benchfmt.Summary) benchfmt.Stat { return s.CPUusPerReq },
			func(s benchfmt.Summary) benchfmt.Stat { return s.SyscallsPerReq },
			func(s benchfmt.Summary) benchfmt.Stat { return s.P99us },
		} {
			for _, p := range peers {
				ps, ok := find(g, p, s.Conns)
				if !ok {
					cells = append(cells, "-")
					continue
				}
				cells = append(cells, ratio(metric(s), metric(ps)))
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// plural says "1 repeat" or "3 repeats".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
