//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// udpRepeats says how the repeats were run.
func udpRepeats(cfg udpConfig) string {
	if cfg.turns {
		return fmt.Sprintf("%d repeats in turns (each size and rate's servers up throughout, a repeat one turn of each in rotating order)", cfg.repeats)
	}
	return fmt.Sprintf("%d repeats, each run on a fresh server", cfg.repeats)
}

// writeUDPReport writes the medians per server and size, with each
// server's ratio to std: on datagrams per busy CPU-second one way, on busy
// CPU per request for request/response.
func writeUDPReport(w io.Writer, cfg udpConfig, runs []udpRun) {
	if cfg.rr {
		fmt.Fprintf(w, "\n## UDP, request/response (%s)\n\n", cfg.commandLine)
		client := "ringload -proto udp-rr, paced from a thread of its own"
		if cfg.cClient {
			client = "bench/c/udp_rr.c, one C thread"
		}
		fmt.Fprintf(w, "%d clients (%s), each awaiting its echo, %.0f requests/s offered over all, on CPUs %s; servers on CPUs %s; lo's RPS: off (each side's softirqs run where its peer sends). %s, medians, min-max in brackets.\n\n",
			cfg.flows, client, cfg.rate, cfg.loadCPUs, cfg.serverCPUs, udpRepeats(cfg))
	} else {
		fmt.Fprintf(w, "\n## UDP, one way (%s)\n\n", cfg.commandLine)
		steer := "off (the receive softirqs run on the sender's CPUs)"
		if cfg.rps {
			steer = "to CPUs " + cfg.rpsCPUs.String()
		}
		fmt.Fprintf(w, "%d flows from ringload -proto udp (sendmmsg, GSO) on CPUs %s; servers on CPUs %s; lo's RPS %s; the busy figure counts the server CPUs only; server sockets' SO_RCVBUF %d. %s, medians, min-max in brackets.\n\n",
			cfg.flows, cfg.loadCPUs, cfg.serverCPUs, steer, cfg.rcvbuf, udpRepeats(cfg))
	}
	offered := cfg.offered
	if cfg.rr || len(offered) == 0 {
		offered = []float64{cfg.rate}
	}
	for _, size := range cfg.sizes {
		for _, rate := range offered {
			if cfg.rr {
				fmt.Fprintf(w, "### %d-byte datagrams\n\n", size)
			} else {
				fmt.Fprintf(w, "### %d-byte datagrams, %s\n\n", size, offeredText(rate))
			}
			tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
			per := func(srv string) []udpRun {
				var rs []udpRun
				for _, r := range runs {
					if r.Server == srv && r.Size == size && (cfg.rr || r.Offered == rate) && r.Err == "" {
						rs = append(rs, r)
					}
				}
				return rs
			}
			f := func(rs []udpRun, get func(udpRun) float64, prec int) string {
				xs := valuesOf(rs, get)
				return fmt.Sprintf("%.*f [%.*f-%.*f]", prec, benchfmt.Median(xs), prec, slices.Min(xs), prec, slices.Max(xs))
			}
			key := func(r udpRun) float64 { return r.PerCPU }
			if cfg.rr {
				key = func(r udpRun) float64 { return r.CPUusReq }
				fmt.Fprintln(tw, "| server\t requests/s\t p99 µs\t p99.9 µs\t server CPUs busy\t CPU-µs per request\t user / kernel µs\t vs std\t lost\t")
				fmt.Fprintln(tw, "|---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
			} else {
				fmt.Fprintln(tw, "| server\t received/s\t sent/s\t server CPUs busy\t received per busy CPU-s\t user / kernel ns per datagram\t vs std\t drops/s\t")
				fmt.Fprintln(tw, "|---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
			}
			stdKey := medianOf(per("std"), key)
			for _, srv := range cfg.servers {
				rs := per(srv)
				if len(rs) == 0 {
					fmt.Fprintf(tw, "| %s\t failed\t\t\t\t\t\t\t%s\n", srv, map[bool]string{true: "\t"}[cfg.rr])
					continue
				}
				vs := "-"
				if stdKey > 0 {
					vs = fmt.Sprintf("%.2f", medianOf(rs, key)/stdKey)
				}
				if cfg.rr {
					fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t\n", srv,
						f(rs, func(r udpRun) float64 { return r.ReqPerS }, 0), f(rs, func(r udpRun) float64 { return r.P99us }, 0),
						f(rs, func(r udpRun) float64 { return r.P999us }, 0), f(rs, func(r udpRun) float64 { return r.Busy }, 2),
						f(rs, key, 2), udpSplit(rs, 1e6, func(r udpRun) float64 { return r.ReqPerS }), vs,
						f(rs, func(r udpRun) float64 { return float64(r.Lost) }, 0))
					continue
				}
				fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t\n", srv,
					f(rs, func(r udpRun) float64 { return r.RecvPPS }, 0), f(rs, func(r udpRun) float64 { return r.SentPPS }, 0),
					f(rs, func(r udpRun) float64 { return r.Busy }, 2), f(rs, key, 0),
					udpSplit(rs, 1e9, func(r udpRun) float64 { return r.RecvPPS }), vs,
					f(rs, func(r udpRun) float64 { return r.DropPPS }, 0))
			}
			tw.Flush()
			fmt.Fprintln(w)
			writeUDPPaired(w, cfg, runs, size, rate)
		}
	}
}

// udpSplit is the median user and kernel CPU time per unit of work (per
// request, or per datagram received) of the runs that counted both, in
// the unit scale gives (1e6: µs, 1e9: ns), or "-" where none did.
func udpSplit(rs []udpRun, scale float64, per func(udpRun) float64) string {
	var us, ks []float64
	for _, r := range rs {
		if n := per(r); r.UserBusy >= 0 && r.KernelBusy >= 0 && n > 0 {
			us = append(us, r.UserBusy*scale/n)
			ks = append(ks, r.KernelBusy*scale/n)
		}
	}
	if len(us) == 0 {
		return "-"
	}
	prec := 2
	if scale > 1e6 {
		prec = 0
	}
	return fmt.Sprintf("%.*f / %.*f", prec, benchfmt.Median(us), prec, benchfmt.Median(ks))
}

// writeUDPOutputs writes the report (to cfg.stdout and name.md in cfg.out)
// and, unless cfg.noCharts, a chart per datagram size and offered rate.
func writeUDPOutputs(cfg udpConfig, runs []udpRun, name string, offered []float64) error {
	var md bytes.Buffer
	writeUDPReport(&md, cfg, runs)
	for _, size := range cfg.sizes {
		for _, rate := range offered {
			if cfg.noCharts {
				break
			}
			var svg bytes.Buffer
			writeUDPChart(&svg, cfg, runs, size, rate)
			chart := fmt.Sprintf("%s-%d-%.0f.svg", name, size, rate)
			if err := os.WriteFile(filepath.Join(cfg.out, chart), svg.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(&md, "![%s, %d-byte datagrams, %s](%s)\n\n", name, size, offeredText(rate), chart)
		}
	}
	io.Copy(cfg.stdout, bytes.NewReader(md.Bytes()))
	return os.WriteFile(filepath.Join(cfg.out, name+".md"), md.Bytes(), 0o644)
}

// udpPaired is one figure of the paired comparison: its name, its value
// in a run, and the server it is taken over (std unless named).
type udpPaired struct {
	name string
	get  func(udpRun) float64
	over string
}

// writeUDPPaired writes each server's figures over std's, paired within
// each repeat (a repeat runs every server on the same load, one after the
// other, so a ratio taken within it cancels the machine's drifts that the
// medians only dampen): the median of the per-repeat ratios and its 95%
// bootstrap interval. Request/response compares busy CPU per request,
// p99 and p99.9 (below 1: less than std's); one way, datagrams received
// per busy CPU-second (above 1: more), over std's and, when the C server
// ran, over C's too. It writes nothing without std's runs.
func writeUDPPaired(w io.Writer, cfg udpConfig, runs []udpRun, size int, rate float64) {
	perCPU := func(r udpRun) float64 { return r.PerCPU }
	figures := []udpPaired{{"received per busy CPU-s", perCPU, "std"}}
	how := "above 1: more datagrams per CPU-second than std"
	if slices.Contains(cfg.servers, cRecvmmsg) {
		figures = append(figures, udpPaired{"received per busy CPU-s over C's", perCPU, cRecvmmsg})
		how += "; in the last column, than the C server"
	}
	if cfg.rr {
		figures = []udpPaired{
			{"CPU-µs per request", func(r udpRun) float64 { return r.CPUusReq }, "std"},
			{"p99", func(r udpRun) float64 { return r.P99us }, "std"},
			{"p99.9", func(r udpRun) float64 { return r.P999us }, "std"},
		}
		how = "below 1: less CPU, or a shorter tail, than std's"
	}
	var rows []string
	for _, srv := range cfg.servers {
		if srv == "std" {
			continue
		}
		row := "| " + srv
		found := false
		for _, f := range figures {
			var rs []float64
			if srv != f.over {
				rs = udpPairedRatios(runs, cfg.rr, size, rate, srv, f.over, f.get)
			}
			if len(rs) == 0 {
				row += " | -"
				continue
			}
			found = true
			lo, hi := benchfmt.Bootstrap(rs)
			row += fmt.Sprintf(" | %.3f (%.3f-%.3f, n=%d)", benchfmt.Median(rs), lo, hi, len(rs))
		}
		if found {
			rows = append(rows, row+" |")
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "Each server paired with std (and where a column says so, with C) within each repeat: the median of the per-repeat ratios and its 95%% bootstrap interval (%s):\n\n| server", how)
	for _, f := range figures {
		fmt.Fprintf(w, " | %s", f.name)
	}
	fmt.Fprintf(w, " |\n|---%s\n", strings.Repeat("|---", len(figures))+"|")
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	fmt.Fprintln(w)
}

// udpPairedRatios returns, for each repeat in which both a and b ran
// size (at rate, one way) without error, get of a's run over get of b's,
// sorted.
func udpPairedRatios(runs []udpRun, rr bool, size int, rate float64, a, b string, get func(udpRun) float64) []float64 {
	perRepeat := map[int][2]float64{}
	for _, r := range runs {
		if r.Size != size || (!rr && r.Offered != rate) || r.Err != "" || (r.Server != a && r.Server != b) {
			continue
		}
		v := perRepeat[r.Repeat]
		if r.Server == a {
			v[0] = get(r)
		} else {
			v[1] = get(r)
		}
		perRepeat[r.Repeat] = v
	}
	return ratios(perRepeat)
}

// offeredText names an offered rate.
func offeredText(rate float64) string {
	if rate == 0 {
		return "unpaced"
	}
	return fmt.Sprintf("%.0f/s offered", rate)
}

func valuesOf(rs []udpRun, get func(udpRun) float64) []float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = get(r)
	}
	return xs
}

func medianOf(rs []udpRun, get func(udpRun) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	return benchfmt.Median(valuesOf(rs, get))
}

// writeUDPChart draws, as SVG, one bar per server: the median of the
// scenario's key figure (datagrams per busy CPU-second one way, busy
// CPU-µs per request for request/response) for one datagram size, with
// the repeats' range as a whisker.
func writeUDPChart(w io.Writer, cfg udpConfig, runs []udpRun, size int, rate float64) {
	type bar struct {
		name        string
		med, lo, hi float64
	}
	key, unit := func(r udpRun) float64 { return r.PerCPU }, "datagrams received per busy server CPU-second"
	if cfg.rr {
		key, unit = func(r udpRun) float64 { return r.CPUusReq }, "busy server CPU-µs per request (lower is better)"
	}
	var bars []bar
	top := 0.0
	for _, srv := range cfg.servers {
		var xs []float64
		for _, r := range runs {
			if r.Server == srv && r.Size == size && (cfg.rr || r.Offered == rate) && r.Err == "" {
				xs = append(xs, key(r))
			}
		}
		if len(xs) == 0 {
			continue
		}
		b := bar{srv, benchfmt.Median(xs), slices.Min(xs), slices.Max(xs)}
		bars = append(bars, b)
		top = max(top, b.hi)
	}
	const width, rowH, left, right = 720, 28, 120, 90
	height := 50 + rowH*len(bars)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	title := fmt.Sprintf("%d-byte datagrams, %s", size, offeredText(rate))
	if cfg.rr {
		title = fmt.Sprintf("%d-byte requests, %.0f/s", size, rate)
	}
	fmt.Fprintf(w, `<text x="10" y="18" font-size="13">%s: %s</text>`+"\n", title, unit)
	if top <= 0 {
		top = 1
	}
	scale := float64(width-left-right) / top
	for i, b := range bars {
		y := 32 + i*rowH
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-6, y+15, b.name)
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y+3, b.med*scale, rowH-8, udpBarColor(b.name))
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black"/>`+"\n", left+b.lo*scale, left+b.hi*scale, y+rowH/2, y+rowH/2)
		fmt.Fprintf(w, `<text x="%.1f" y="%d">%s</text>`+"\n", left+b.hi*scale+6, y+15, udpFigure(b.med))
	}
	fmt.Fprintln(w, "</svg>")
}

func udpBarColor(server string) string {
	if strings.HasPrefix(server, "ringpoll") {
		return "#2f6fb0"
	}
	return "#9a9a9a"
}

// udpFigure prints a bar's value to three significant figures.
func udpFigure(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}
