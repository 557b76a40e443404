//go:build linux

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// isFwRun reports whether a run belongs to the -frameworks family.
func isFwRun(run benchfmt.Run) bool {
	_, ok := lookupFwScenario(run.Scenario)
	return ok
}

// writeFwReport writes the family's report: how it was made, then per
// scenario and load a table of the servers side by side with their ratios
// to the scenario's reference server, the runs flagged for errors, and the
// charts (charts lists the chart files written, by base name).
func writeFwReport(w io.Writer, m meta, runs []benchfmt.Run, sums []benchfmt.Summary, charts []string) {
	fmt.Fprintf(w, "# ringbench report\n\n## Frameworks, loaded by clients the project did not write\n\n")
	fmt.Fprintf(w, "- date: %s\n- command: `%s`\n- machine: %s\n- Go: %s\n- placement: %s\n",
		m.Date, m.Command, m.Machine, m.Go, m.Placement)
	servers := "on a server started afresh for each scenario and repeat, servers in an order that rotates from repeat to repeat"
	if m.Turns {
		servers = "in turns (-fw-turns): each scenario's servers started once, a repeat one run of each at each connection count, in an order that rotates from repeat to repeat"
	}
	fmt.Fprintf(w, "- each cell: %s, each a warm-up run of the client (%s; dropped) and its measured run (%s), "+
		"%s; medians (± is half the range of the repeats)\n",
		plural(m.Repeats, "repeat"), m.Warmup, m.Duration, servers)
	fmt.Fprintf(w, "- server CPU: `/proc/PID/task/*/schedstat` summed over the server's threads, from just before the measured client starts "+
		"to just after it exits (its connects included); per request it is that over the requests the client completed\n")
	fmt.Fprintf(w, "- file download: also bytes per busy second of the server's CPUs and of the server's and clients' CPUs together "+
		"(`/proc/stat` over the same window: the wall time less the CPUs' idle time, which the kernel measures exactly, softirqs counted as busy): "+
		"on loopback the kernel's TCP work runs on either side and is charged "+
		"to whatever thread ran there, so the server threads' CPU moves with that split and the busy time of all CPUs does not\n")
	fmt.Fprintf(w, "- client CPU (QUIC and DNS scenarios): the client process's user and system CPU-seconds over its whole run (its rusage, from wait4), "+
		"the same window as the server's; \"both\" is the two processes' together. On loopback the kernel delivers a datagram in the sender's softirq, "+
		"so part of the receiver's work is charged to the sender's threads: the sum does not move with that split\n")
	fmt.Fprintf(w, "- every server's answer is checked once before each measured run (`frameserve -check`); a run whose check failed, "+
		"whose client failed, or whose client counted errors (socket errors or non-2xx answers; failed streams for quicload; lost queries and answers other than NOERROR for dnsperf) is flagged\n")
	for _, n := range m.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	for _, g := range groups(sums) {
		writeFwGroup(w, runs, g, charts)
	}
}

// fwHeader is the header of sc's tables: scenarios compared in bytes
// add MiB columns, the file download the CPUs' busy time, the QUIC ones
// the client's CPU and both processes'.
func fwHeader(sc fwScenario) []string {
	h := []string{"server", "conns", "req/s", "p50 µs", "p99 µs", "p99.9 µs", "server CPU (cores)", "CPU µs/req", "req per server CPU-s"}
	if sc.bytes {
		h = append(h, "MiB/s", "MiB per server CPU-s")
	}
	h = append(h, "vs "+sc.ref, "paired vs "+sc.ref)
	if sc.file {
		h = append(h, "MiB per busy s, server's CPUs", "MiB per busy s, all CPUs", "paired vs "+sc.ref+", all CPUs")
	}
	if sc.both {
		if sc.bytes {
			h = append(h, "server CPU ms/MiB", "client CPU ms/MiB", "both CPU ms/MiB")
		} else {
			h = append(h, "client CPU µs/req", "both CPU µs/req")
		}
		h = append(h, "paired vs "+sc.ref+", both")
	}
	return append(h, "errors")
}

// writeFwGroup writes one scenario at one load: the table, the flagged
// runs and the charts.
func writeFwGroup(w io.Writer, runs []benchfmt.Run, g []benchfmt.Summary, charts []string) {
	c := g[0].Cell
	sc, _ := lookupFwScenario(c.Scenario)
	about := sc.about
	if sc.file {
		about += ", a " + sizeText(c.Size) + " file"
	}
	load := ""
	switch sc.client {
	case "h2load":
		load = fmt.Sprintf(", %d streams per connection", c.Depth)
	case "grpc":
		load = fmt.Sprintf(", %d calls at a time per connection, %s payloads", c.Depth, sizeText(c.Size))
	case "quicload":
		load = fmt.Sprintf(", %s at a time per connection, each asking for %s", plural(c.Depth, "stream"), sizeText(c.Size))
	case "dnsperf":
		load = fmt.Sprintf(", %d outstanding per client (conns: dnsperf's clients, a UDP socket each)", c.Depth)
	}
	fmt.Fprintf(w, "\n### %s: %s%s\n\n", sc.name, about, load)
	per := "requests"
	if sc.bytes {
		per = "bytes"
	}
	fmt.Fprintf(w, "Reference: %s. \"vs %s\" is the ratio of the medians of %s per server CPU-second; \"paired\" the median of the ratios taken within each repeat, with its 95%% bootstrap interval (above 1: more work per CPU-second than %s)",
		sc.ref, sc.ref, per, sc.ref)
	if sc.both {
		fmt.Fprintf(w, "; \"paired vs %s, both\" the same of %s per CPU-second of the server and the client together", sc.ref, per)
	}
	fmt.Fprintf(w, ".\n\n")
	header := fwHeader(sc)
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, s := range g {
		fmt.Fprintf(w, "| %s |\n", strings.Join(fwRow(runs, g, s, sc), " | "))
	}
	var flagged []string
	for _, run := range runs {
		cell := run.Cell
		cell.Server, cell.Conns = c.Server, c.Conns
		if cell != c {
			continue
		}
		switch {
		case run.Err != "":
			flagged = append(flagged, fmt.Sprintf("repeat %d, %s, %d conns: %s", run.Repeat, run.Server, run.Conns, run.Err))
		case runErrors(run) > 0:
			text, _ := run.Result["error_text"].(string)
			flagged = append(flagged, fmt.Sprintf("repeat %d, %s, %d conns: %d errors (%s)", run.Repeat, run.Server, run.Conns, runErrors(run), text))
		}
	}
	if len(flagged) > 0 {
		fmt.Fprintf(w, "\n**Flagged runs** (those that measured count in the medians above):\n\n")
		for _, f := range flagged {
			fmt.Fprintf(w, "- %s\n", f)
		}
	}
	for _, metric := range []string{"throughput", "p99", "cpu"} {
		name := c.Group() + "-" + metric + ".svg"
		if slices.Contains(charts, name) {
			fmt.Fprintf(w, "\n![%s: %s](%s)\n", c.Group(), metric, name)
		}
	}
}

// fwRow is the figures of one summary.
func fwRow(runs []benchfmt.Run, g []benchfmt.Summary, s benchfmt.Summary, sc fwScenario) []string {
	row := []string{s.Server, fmt.Sprint(s.Conns), withSpread(s.ReqPerS, 0), num(s.P50us, 0), num(s.P99us, 0),
		num(s.P999us, 0), num(s.ServerCPUCores, 2), withSpread(s.CPUusPerReq, 2), num(s.ReqPerCPUs, 0)}
	if sc.bytes {
		mib := func(key string) benchfmt.Stat {
			st := resultStat(runs, s.Cell, key)
			st.Median, st.Min, st.Max = st.Median/(1<<20), st.Min/(1<<20), st.Max/(1<<20)
			return st
		}
		row = append(row, withSpread(mib("bytes_per_s"), 0), num(mib("bytes_per_server_cpu_s"), 0))
	}
	// The file and bulk scenarios compare bytes per CPU-second: a
	// download still under way when the client stops counts in its bytes,
	// not in its requests.
	key, bothKey := "req_per_server_cpu_s", "req_per_both_cpu_s"
	if sc.bytes {
		key, bothKey = "bytes_per_server_cpu_s", "bytes_per_both_cpu_s"
	}
	vs := "-"
	if ref, ok := find(g, sc.ref, s.Conns); ok {
		vs = ratio(resultStat(runs, s.Cell, key), resultStat(runs, ref.Cell, key))
	}
	if s.Server == sc.ref {
		vs = "1"
	}
	row = append(row, vs, pairedText(runs, s, sc.ref, key))
	if sc.file {
		// The kernel's TCP work on loopback runs on either side's CPU,
		// and the split moves from run to run: the busy time of the
		// server's CPUs, and of all, say what the download cost the
		// machine (fwresult.go, busySample).
		mib := func(key string) string {
			st := resultStat(runs, s.Cell, key)
			st.Median /= 1 << 20
			return num(st, 0)
		}
		row = append(row, mib("bytes_per_server_cpus_busy_s"), mib("bytes_per_all_cpus_busy_s"),
			pairedText(runs, s, sc.ref, "bytes_per_all_cpus_busy_s"))
	}
	if sc.both {
		fig := func(key string) string { return num(resultStat(runs, s.Cell, key), 2) }
		if sc.bytes {
			row = append(row, fig("server_cpu_ms_per_mib"), fig("client_cpu_ms_per_mib"), fig("both_cpu_ms_per_mib"))
		} else {
			row = append(row, fig("client_cpu_us_per_req"), fig("both_cpu_us_per_req"))
		}
		row = append(row, pairedText(runs, s, sc.ref, bothKey))
	}
	flag := "0"
	if s.Errors > 0 {
		flag = fmt.Sprintf("**%d**", s.Errors)
	}
	return append(row, flag)
}

// pairedText is the paired ratio of figure key of s's server over ref's,
// with its bootstrap interval; "1" for ref itself, "-" where no repeat
// measured both.
func pairedText(runs []benchfmt.Run, s benchfmt.Summary, ref, key string) string {
	if s.Server == ref {
		return "1"
	}
	rs := pairedBy(runs, s.Cell, ref, key)
	if len(rs) == 0 {
		return "-"
	}
	lo, hi := benchfmt.Bootstrap(rs)
	return fmt.Sprintf("%.3f (%.3f–%.3f, n=%d)", benchfmt.Median(rs), lo, hi, len(rs))
}

// resultValue returns a figure of a run's result, and whether it has it
// (measured: not negative).
func resultValue(run benchfmt.Run, key string) (float64, bool) {
	v, ok := run.Result[key].(float64)
	return v, ok && v >= 0
}

// resultStat summarizes a figure of the runs of cell.
func resultStat(runs []benchfmt.Run, c benchfmt.Cell, key string) benchfmt.Stat {
	var xs []float64
	for _, run := range runs {
		if v, ok := resultValue(run, key); ok && run.Cell == c {
			xs = append(xs, v)
		}
	}
	return benchfmt.NewStat(xs)
}

// pairedBy returns, for each repeat that ran both, the figure key of
// cell c's server over ref's at the same load, sorted.
func pairedBy(runs []benchfmt.Run, c benchfmt.Cell, ref, key string) []float64 {
	perRepeat := map[int][2]float64{}
	for _, run := range runs {
		cell := run.Cell
		cell.Server = c.Server
		v, ok := resultValue(run, key)
		if cell != c || !ok || v == 0 || (run.Server != c.Server && run.Server != ref) {
			continue
		}
		pair, i := perRepeat[run.Repeat], 1
		if run.Server == c.Server {
			i = 0
		}
		pair[i] = v
		perRepeat[run.Repeat] = pair
	}
	return ratios(perRepeat)
}
