//go:build linux

package main

import (
	"bytes"
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// -scale's charts: for every load, each metric against the connection
// count (a logarithmic axis), a line per server through the medians with
// the repeats' range as whiskers. They are drawn here, as -udp's are,
// rather than by ringplot: its charts are the matrix summary's four
// metrics, and the resident memory is not one.

// scaleMetric is one chart per load.
type scaleMetric struct {
	name, title string
	stat        func(scaleSummary) benchfmt.Stat
}

var scaleMetrics = []scaleMetric{
	{"throughput", "requests/s", func(s scaleSummary) benchfmt.Stat { return s.ReqPerS }},
	{"cpu", "server CPU µs per request", func(s scaleSummary) benchfmt.Stat { return s.CPUusPerReq }},
	{"cpu-user", "server CPU µs per request in user space", func(s scaleSummary) benchfmt.Stat { return s.UserUsPerReq }},
	{"cpu-kernel", "server CPU µs per request in the kernel", func(s scaleSummary) benchfmt.Stat { return s.KernelUsPerReq }},
	{"per-cpu", "requests per server CPU-second", func(s scaleSummary) benchfmt.Stat { return s.ReqPerCPUs }},
	{"p50", "p50 latency, µs", func(s scaleSummary) benchfmt.Stat { return s.P50us }},
	{"p99", "p99 latency, µs", func(s scaleSummary) benchfmt.Stat { return s.P99us }},
	{"p999", "p99.9 latency, µs", func(s scaleSummary) benchfmt.Stat { return s.P999us }},
	{"syscalls", "server syscalls per request", func(s scaleSummary) benchfmt.Stat { return s.SyscallsPerReq }},
	{"rss-idle", "server RSS per idle connection, bytes", func(s scaleSummary) benchfmt.Stat { return s.RSSIdle }},
	{"rss", "server RSS per connection at the end of the window, bytes", func(s scaleSummary) benchfmt.Stat { return s.RSSEnd }},
}

// scaleChartName is the file of a load's chart of a metric.
func scaleChartName(group, metric string) string {
	return "scale-" + group + "-" + metric + ".svg"
}

// writeScaleCharts writes every load's charts into dir and returns their
// names; a chart no server has a point in is not written. order is the
// servers' order, which fixes their colors.
func writeScaleCharts(dir string, order []string, sums []scaleSummary) ([]string, error) {
	var names []string
	for _, g := range scaleGroups(sums) {
		for _, m := range scaleMetrics {
			var svg bytes.Buffer
			if !writeScaleChart(&svg, title(g[0].Cell)+": "+m.title, order, g, m.stat) {
				continue
			}
			name := scaleChartName(g[0].Group(), m.name)
			if err := os.WriteFile(filepath.Join(dir, name), svg.Bytes(), 0o644); err != nil {
				return names, err
			}
			names = append(names, name)
		}
	}
	return names, nil
}

// scaleColors are the servers' colors, in order; the default server is
// drawn first, in the first, and thicker.
var scaleColors = []string{"#2f6fb0", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"}

// writeScaleChart draws stat against the connection count, one line per
// server of g in order; false if no server has a point.
func writeScaleChart(w io.Writer, heading string, order []string, g []scaleSummary, stat func(scaleSummary) benchfmt.Stat) bool {
	type point struct {
		x           float64
		med, lo, hi float64
	}
	lines := map[string][]point{}
	top, xmin, xmax := 0.0, math.Inf(1), math.Inf(-1)
	for _, s := range g {
		st := stat(s)
		if st.N == 0 {
			continue
		}
		x := math.Log10(float64(s.Conns))
		lines[s.Server] = append(lines[s.Server], point{x, st.Median, st.Min, st.Max})
		top, xmin, xmax = max(top, st.Max), min(xmin, x), max(xmax, x)
	}
	if len(lines) == 0 {
		return false
	}
	if xmin == xmax {
		xmin, xmax = xmin-0.5, xmax+0.5
	}
	step := niceStep(top / 5)
	top = math.Ceil(top/step) * step
	if top == 0 {
		top, step = 1, 0.2
	}
	const width, height, left, right, up, down = 760, 420, 70, 130, 40, 50
	pw, ph := float64(width-left-right), float64(height-up-down)
	px := func(x float64) float64 { return left + (x-xmin)/(xmax-xmin)*pw }
	py := func(y float64) float64 { return up + ph - y/top*ph }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(w, `<text x="10" y="20" font-size="13">%s</text>`+"\n", html.EscapeString(heading))
	for y := 0.0; y <= top+step/2; y += step {
		fmt.Fprintf(w, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, left+pw, py(y), py(y))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, py(y)+4, udpFigure(y))
	}
	var xs []float64
	for _, pts := range lines {
		for _, p := range pts {
			if !slices.Contains(xs, p.x) {
				xs = append(xs, p.x)
			}
		}
	}
	slices.Sort(xs)
	for _, x := range xs {
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#eee"/>`+"\n", px(x), px(x), up, up+ph)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%.0f</text>`+"\n", px(x), up+ph+16, math.Round(math.Pow(10, x)))
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">connections (logarithmic)</text>`+"\n", left+pw/2, height-8)
	fmt.Fprintf(w, `<line x1="%d" x2="%d" y1="%d" y2="%.1f" stroke="black"/><line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black"/>`+"\n",
		left, left, up, up+ph, left, left+pw, up+ph, up+ph)
	row := 0
	for i, srv := range order {
		pts := lines[srv]
		if len(pts) == 0 {
			continue
		}
		color, stroke := scaleColors[i%len(scaleColors)], 1.5
		if srv == defaultServer {
			stroke = 3
		}
		slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.x, b.x) })
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.med)))
		}
		fmt.Fprintf(w, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%.1f"/>`+"\n", strings.Join(path, " "), color, stroke)
		for _, p := range pts {
			fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`+"\n", px(p.x), px(p.x), py(p.lo), py(p.hi), color)
			fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(p.x), py(p.med), color)
		}
		ly := up + 10 + 18*row
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-width="%.1f"/>`+"\n", left+pw+12, left+pw+32, ly, ly, color, stroke)
		fmt.Fprintf(w, `<text x="%.1f" y="%d">%s</text>`+"\n", left+pw+38, ly+4, html.EscapeString(srv))
		row++
	}
	fmt.Fprintln(w, "</svg>")
	return true
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
