//go:build linux

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// The targets for the default server, as one -scale run checks
// them side by side:
//
//   - its CPU per request at the largest count (19,000) within 15% of its
//     figure at 1,000 connections, at the paced load (the same work at
//     every count);
//   - from 1,000 connections up, ahead of every Go peer (std, netpoll,
//     gnet) in requests per server CPU-second, paced and saturated;
//   - its resident memory per idle connection at or below gnet's
//     (marginal figures, which leave out what a fresh server pays once).
//
// Each is judged on the medians of the repeats; the paired ratios under
// each load's table say how far the repeats agree.

// scaleCPUSlack is how much more CPU per request the default may spend at
// the largest count than at scaleBase connections.
const scaleCPUSlack = 1.15

// scaleTarget is one row of the targets table.
type scaleTarget struct {
	what, load, figure, verdict string
}

// writeScaleTargets writes the targets table.
func writeScaleTargets(w io.Writer, runs []benchfmt.Run, sums []scaleSummary) {
	var ts []scaleTarget
	for _, g := range scaleGroups(sums) {
		if g[0].Rate > 0 {
			ts = append(ts, cpuFlatTarget(g))
		}
	}
	for _, g := range scaleGroups(sums) {
		ts = append(ts, aheadTarget(g))
	}
	ts = append(ts, rssTarget(runs))
	fmt.Fprintf(w, "\n## Targets\n\nThe default server (%s) against the issue's targets, on the medians of this run:\n\n", defaultServer)
	fmt.Fprintln(w, "| target | load | figure | verdict |\n|---|---|---|---|")
	for _, t := range ts {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.what, t.load, t.figure, t.verdict)
	}
}

// loadName is a load's short name in the targets table.
func loadName(c benchfmt.Cell) string {
	if c.Rate > 0 {
		return fmt.Sprintf("%.0f req/s", c.Rate)
	}
	return "saturated"
}

// cpuFlatTarget checks, at a paced load, the default's CPU per request at
// the largest count against its figure at scaleBase.
func cpuFlatTarget(g []scaleSummary) scaleTarget {
	t := scaleTarget{what: fmt.Sprintf("CPU per request at the largest count within %.0f%% of the figure at %d connections", 100*(scaleCPUSlack-1), scaleBase), load: loadName(g[0].Cell)}
	base, ok := scaleFind(g, defaultServer, scaleBase)
	top := base
	for _, s := range g {
		if s.Server == defaultServer && s.Conns > top.Conns && s.CPUusPerReq.N > 0 {
			top = s
		}
	}
	if !ok || base.CPUusPerReq.N == 0 || top.Conns == scaleBase {
		t.figure, t.verdict = fmt.Sprintf("needs %s at %d connections and at a larger count", defaultServer, scaleBase), "not measured"
		return t
	}
	r := top.CPUusPerReq.Median / base.CPUusPerReq.Median
	t.figure = fmt.Sprintf("%.2f× (%.2f µs at %d, %.2f at %d; user %s×, kernel %s×)", r,
		base.CPUusPerReq.Median, base.Conns, top.CPUusPerReq.Median, top.Conns,
		ratio(top.UserUsPerReq, base.UserUsPerReq), ratio(top.KernelUsPerReq, base.KernelUsPerReq))
	t.verdict = "met"
	if r > scaleCPUSlack {
		t.verdict = "missed"
	}
	return t
}

// aheadTarget checks, at a load, the default's requests per server
// CPU-second against every Go peer's at every count from scaleBase up.
func aheadTarget(g []scaleSummary) scaleTarget {
	t := scaleTarget{what: fmt.Sprintf("ahead of every Go peer in requests per server CPU-second from %d connections up", scaleBase), load: loadName(g[0].Cell)}
	lowest, lowPeer, lowConns, n := 0.0, "", 0, 0
	var misses []string
	for _, d := range g {
		if d.Server != defaultServer || d.Conns < scaleBase || d.ReqPerCPUs.N == 0 {
			continue
		}
		for _, p := range g {
			if p.Conns != d.Conns || !isGoPeer(p.Server) || p.ReqPerCPUs.N == 0 || p.ReqPerCPUs.Median == 0 {
				continue
			}
			r := d.ReqPerCPUs.Median / p.ReqPerCPUs.Median
			if n == 0 || r < lowest {
				lowest, lowPeer, lowConns = r, p.Server, p.Conns
			}
			n++
			if r <= 1 {
				misses = append(misses, fmt.Sprintf("%s at %d (%.2f×)", p.Server, p.Conns, r))
			}
		}
	}
	if n == 0 {
		t.figure, t.verdict = fmt.Sprintf("needs %s and a Go peer at %d connections or more", defaultServer, scaleBase), "not measured"
		return t
	}
	t.figure = fmt.Sprintf("lowest %.2f× (%s at %d connections), over %d comparisons", lowest, lowPeer, lowConns, n)
	t.verdict = "met"
	if len(misses) > 0 {
		t.verdict = "missed: " + strings.Join(misses, ", ")
	}
	return t
}

// rssTarget checks the default's marginal RSS per idle connection
// against gnet's.
func rssTarget(runs []benchfmt.Run) scaleTarget {
	t := scaleTarget{what: "RSS per idle connection at or below gnet's", load: "every load"}
	d, dlo, dhi, ok1 := scaleMarginal(runs, defaultServer)
	g, glo, ghi, ok2 := scaleMarginal(runs, "gnet")
	if !ok1 || !ok2 {
		t.figure, t.verdict = fmt.Sprintf("needs %s and gnet", defaultServer), "not measured"
		return t
	}
	span := func(lo, hi int) string {
		if lo == hi {
			return fmt.Sprintf("at %d", hi)
		}
		return fmt.Sprintf("%d → %d", lo, hi)
	}
	t.figure = fmt.Sprintf("%s %.0f B (%s), gnet %.0f B (%s), marginal", defaultServer, d, span(dlo, dhi), g, span(glo, ghi))
	t.verdict = "met"
	if d > g {
		t.verdict = "missed"
	}
	if dlo != glo || dhi != ghi {
		t.verdict += " (over different counts)"
	}
	return t
}

// scaleServers lists the servers of sums, in their order.
func scaleServers(sums []scaleSummary) []string {
	var ss []string
	for _, s := range sums {
		if !slices.Contains(ss, s.Server) {
			ss = append(ss, s.Server)
		}
	}
	return ss
}

// scaleCounts lists the connection counts of sums, sorted.
func scaleCounts(sums []scaleSummary) []int {
	var cs []int
	for _, s := range sums {
		if !slices.Contains(cs, s.Conns) {
			cs = append(cs, s.Conns)
		}
	}
	slices.Sort(cs)
	return cs
}
