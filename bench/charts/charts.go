// Package charts renders ringbench results as SVG line charts.
//
// ringbench writes a JSON-lines file of benchfmt records: a Run per measured
// repeat and a Summary per cell of the benchmark matrix. Read collects the
// summaries; Render draws, for every chart group (benchfmt.Cell.Group: one
// scenario, mode, message size and offered load), four charts against the
// number of connections: throughput, p99 latency, server CPU per request
// and server syscalls per request, one line per server with the repeats'
// min..max as error bars.
//
// The output is deterministic: the same summaries give byte-identical SVG
// files, so the charts can be checked in and compared.
package charts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// Read parses a ringbench results file: one JSON object per line, each with
// a "kind". It returns the summaries (kind "summary") in file order and
// skips the other kinds and blank lines. A line that is not a JSON object
// of the expected shape is an error naming its line number.
func Read(r io.Reader) ([]benchfmt.Summary, error) {
	br := bufio.NewReader(r)
	var sums []benchfmt.Summary
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			var head struct {
				Kind string `json:"kind"`
			}
			if jerr := json.Unmarshal(line, &head); jerr != nil {
				return nil, fmt.Errorf("line %d: %w", n, jerr)
			}
			if head.Kind == "summary" {
				var s benchfmt.Summary
				if jerr := json.Unmarshal(line, &s); jerr != nil {
					return nil, fmt.Errorf("line %d: %w", n, jerr)
				}
				sums = append(sums, s)
			}
		}
		if err != nil { // io.EOF: the last line had no newline, or none was left
			return sums, nil
		}
	}
}

// metric is one of the four charts drawn per group.
type metric struct {
	name   string // in the file name: <group>-<name>.svg
	title  string // after the group's description in the title
	ylabel string
	stat   func(*benchfmt.Summary) benchfmt.Stat
}

var metrics = []metric{
	{"throughput", "requests/s", "requests/s",
		func(s *benchfmt.Summary) benchfmt.Stat { return s.ReqPerS }},
	{"p99", "p99 latency", "p99 latency (µs)",
		func(s *benchfmt.Summary) benchfmt.Stat { return s.P99us }},
	{"cpu", "server CPU per request", "server CPU per request (µs)",
		func(s *benchfmt.Summary) benchfmt.Stat { return s.CPUusPerReq }},
	{"syscalls", "server syscalls per request", "server syscalls per request",
		func(s *benchfmt.Summary) benchfmt.Stat { return s.SyscallsPerReq }},
}

// Metrics returns the metric names Render draws, in the order it draws
// them: the last part of each chart's file name.
func Metrics() []string {
	names := make([]string, len(metrics))
	for i, m := range metrics {
		names[i] = m.name
	}
	return names
}

// group is the summaries of one chart group: one per server and
// connection count.
type group struct {
	name    string
	cell    benchfmt.Cell // the first summary's cell, for the title
	servers []string      // sorted by serverLess
	// byServer holds each server's summaries sorted by connections.
	byServer map[string][]benchfmt.Summary
}

// serverLess orders servers by name with "std", the baseline, first.
func serverLess(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "std":
		return -1
	case b == "std":
		return 1
	}
	return strings.Compare(a, b)
}

// groups splits sums into chart groups sorted by name. When two summaries
// have the same cell, the later one wins (a re-run appended to the file).
func groups(sums []benchfmt.Summary) []*group {
	byName := map[string]*group{}
	var names []string
	for _, s := range sums {
		name := s.Group()
		g := byName[name]
		if g == nil {
			g = &group{name: name, cell: s.Cell, byServer: map[string][]benchfmt.Summary{}}
			byName[name] = g
			names = append(names, name)
		}
		list := g.byServer[s.Server]
		if list == nil {
			g.servers = append(g.servers, s.Server)
		}
		i := slices.IndexFunc(list, func(o benchfmt.Summary) bool { return o.Conns == s.Conns })
		if i >= 0 {
			list[i] = s
		} else {
			list = append(list, s)
		}
		g.byServer[s.Server] = list
	}
	slices.Sort(names)
	out := make([]*group, len(names))
	for i, name := range names {
		g := byName[name]
		slices.SortFunc(g.servers, serverLess)
		for _, list := range g.byServer {
			slices.SortStableFunc(list, func(a, b benchfmt.Summary) int { return a.Conns - b.Conns })
		}
		out[i] = g
	}
	return out
}

// describe is the human description of a group's cell, the start of every
// chart title, for example "echo, 1024 B, ping-pong, max load".
func describe(c benchfmt.Cell) string {
	mode := c.Mode
	switch c.Mode {
	case "pingpong":
		mode = "ping-pong"
	case "pipeline":
		mode = fmt.Sprintf("pipeline depth %d", c.Depth)
	}
	load := "max load"
	if c.Rate > 0 {
		load = strconv.FormatFloat(c.Rate, 'f', -1, 64) + " req/s offered"
	}
	return fmt.Sprintf("%s, %d B, %s, %s", c.Scenario, c.Size, mode, load)
}

// fileName makes a group name safe as a file name.
func fileName(group string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, group)
}

// finite reports whether all of vs are neither NaN nor infinite.
func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// Render draws the charts of sums into the directory dir, creating it if
// needed. For each chart group (benchfmt.Cell.Group) it writes up to four
// files named <group>-<metric>.svg, metric being each of Metrics():
// throughput (ReqPerS), p99 (P99us), cpu (CPUusPerReq) and syscalls
// (SyscallsPerReq). Each chart plots the metric's median against the
// number of connections, one line per server, with min..max error bars
// where a cell has more than one repeat. Cells whose metric was not
// measured (Stat.N == 0) are left out, and a chart in which no server has
// a point is not written. A server keeps the same color and glyph in every
// chart of one call.
//
// Render returns the paths it wrote, sorted; on error, the ones written
// before it.
func Render(sums []benchfmt.Summary, dir string) ([]string, error) {
	if len(sums) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Colors and glyphs by server over the whole input, so that a server
	// looks the same in every chart.
	var all []string
	for _, s := range sums {
		if !slices.Contains(all, s.Server) {
			all = append(all, s.Server)
		}
	}
	slices.SortFunc(all, serverLess)

	var paths []string
	seen := map[string]string{} // file name -> group
	for _, g := range groups(sums) {
		base := fileName(g.name)
		if other, dup := seen[base]; dup {
			slices.Sort(paths)
			return paths, fmt.Errorf("charts: groups %q and %q map to the same file name %q", other, g.name, base)
		}
		seen[base] = g.name
		for _, m := range metrics {
			svg, err := renderChart(g, m, all)
			if err != nil {
				slices.Sort(paths)
				return paths, fmt.Errorf("charts: %s-%s: %w", g.name, m.name, err)
			}
			if svg == nil {
				continue
			}
			path := filepath.Join(dir, base+"-"+m.name+".svg")
			if err := os.WriteFile(path, svg, 0o644); err != nil {
				slices.Sort(paths)
				return paths, err
			}
			paths = append(paths, path)
		}
	}
	slices.Sort(paths)
	return paths, nil
}
