//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// The paired comparison: each repeat runs every server on the same load,
// one after the other, so a ratio taken within a repeat cancels the drifts
// of the machine that the medians of the table only dampen. For the
// default server against each peer, by load and connections, it reports
// the median of the per-repeat ratios of requests per server CPU-second
// and a 95% bootstrap interval of that median.

// pairedRatios returns, for each repeat that ran both, a's requests per
// server CPU-second over b's in cell c (server names aside).
func pairedRatios(runs []benchfmt.Run, c benchfmt.Cell, a, b string) []float64 {
	perRepeat := map[int][2]float64{}
	for _, run := range runs {
		cell := run.Cell
		cell.Server = c.Server
		if cell != c || (run.Server != a && run.Server != b) {
			continue
		}
		lr, ok := decode(run)
		if !ok || lr.ReqPerServerCPUs <= 0 {
			continue
		}
		v := perRepeat[run.Repeat]
		if run.Server == a {
			v[0] = lr.ReqPerServerCPUs
		} else {
			v[1] = lr.ReqPerServerCPUs
		}
		perRepeat[run.Repeat] = v
	}
	return ratios(perRepeat)
}

// ratios returns, sorted, the first figure over the second of each
// repeat in perRepeat that has both.
func ratios(perRepeat map[int][2]float64) []float64 {
	var rs []float64
	for _, v := range perRepeat {
		if v[0] > 0 && v[1] > 0 {
			rs = append(rs, v[0]/v[1])
		}
	}
	slices.Sort(rs)
	return rs
}

// writePaired writes the paired comparison of the default server with
// every other server in each group of sums.
func writePaired(w io.Writer, runs []benchfmt.Run, g []benchfmt.Summary) {
	var others []string
	hasDefault := false
	for _, s := range g {
		if s.Server == defaultServer {
			hasDefault = true
		} else if !slices.Contains(others, s.Server) {
			others = append(others, s.Server)
		}
	}
	if !hasDefault || len(others) == 0 {
		return
	}
	fmt.Fprintf(w, "\nThe default server (%s) paired with each other server within each repeat: requests per server CPU-second, %s over the other, median of the per-repeat ratios and its 95%% bootstrap interval (above 1: %s does more work per CPU-second):\n\n", defaultServer, defaultServer, defaultServer)
	cols := append([]string{"conns"}, others...)
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	for _, s := range g {
		if s.Server != defaultServer {
			continue
		}
		cells := []string{fmt.Sprint(s.Conns)}
		for _, o := range others {
			rs := pairedRatios(runs, s.Cell, defaultServer, o)
			if len(rs) == 0 {
				cells = append(cells, "-")
				continue
			}
			lo, hi := benchfmt.Bootstrap(rs)
			cells = append(cells, fmt.Sprintf("%.3f (%.3f–%.3f, n=%d)", benchfmt.Median(rs), lo, hi, len(rs)))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// reportAgain reads the runs of an earlier results.jsonl and prints the
// tables and writes report.md in out from them, as the run did (without
// its notes and charts).
func reportAgain(results, out, command string, stdout io.Writer) error {
	runs, order, err := readRuns(results)
	if err != nil {
		return err
	}
	turnRuns, err := readLines[turnsRun](results, "turns")
	if err != nil {
		return err
	}
	sums := summarize(runs, order)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "report.md"))
	if err != nil {
		return err
	}
	m := againMeta(results, command, runs[0].Placement, sums[0].Repeats)
	if slices.ContainsFunc(runs, isFwRun) {
		// The -frameworks family's runs: its own report, to the terminal
		// too.
		writeFwReport(io.MultiWriter(f, stdout), m, runs, sums, nil)
		return f.Close()
	}
	writeTable(stdout, sums)
	writeTurns(stdout, turnRuns, false)
	writeMarkdown(f, m, runs, sums, nil)
	writeTurns(f, turnRuns, true)
	return f.Close()
}
