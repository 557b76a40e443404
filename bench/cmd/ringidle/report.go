package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ringpoll/ringpoll"
)

// targetVsStd is the goal for the handler API: an idle connection costs
// less than this fraction of what it costs std net.
const targetVsStd = 0.25

// summary is one server's medians over its runs, also a JSON line of -out
// (kind "median").
type summary struct {
	Kind        string  `json:"kind"`
	Server      string  `json:"server"`
	Runs        int     `json:"runs"` // runs that succeeded
	Repeats     int     `json:"repeats"`
	N           int     `json:"n"`
	Error       string  `json:"error,omitempty"` // the first failed run's
	Unavailable bool    `json:"unavailable,omitempty"`
	PerConn     perConn `json:"per_conn"` // medians
	// VsStd and VsStdFree are PerConn.RSS and PerConn.RSSFree as fractions
	// of std's (0 when std was not measured).
	VsStd     float64 `json:"vs_std,omitempty"`
	VsStdFree float64 `json:"vs_std_free,omitempty"`
	// MeetsTarget, for the handler API, says whether both RSS figures are
	// under targetVsStd of std's.
	MeetsTarget *bool `json:"meets_target,omitempty"`

	spec serverSpec
}

// summarize computes each server's medians, in cfg's order, and their
// ratios to std's.
func summarize(cfg config, runs []runResult) []summary {
	var sums []summary
	for _, spec := range cfg.servers {
		s := summary{Kind: "median", Server: spec.name, Repeats: cfg.repeats, N: cfg.n, spec: spec}
		var ok []perConn
		for _, r := range runs {
			if r.Server != spec.name {
				continue
			}
			if r.Error != "" {
				if s.Error == "" {
					s.Error = r.Error
				}
				continue
			}
			ok = append(ok, r.PerConn)
		}
		s.Runs = len(ok)
		s.Unavailable = s.Runs == 0 && strings.Contains(s.Error, ringpoll.ErrEngineUnavailable.Error())
		s.PerConn = medianPerConn(ok)
		sums = append(sums, s)
	}
	var std *summary
	for i := range sums {
		if sums[i].Server == kindStd && sums[i].Runs > 0 {
			std = &sums[i]
		}
	}
	if std == nil {
		return sums
	}
	for i := range sums {
		s := &sums[i]
		if s.Runs == 0 {
			continue
		}
		s.VsStd = ratio(s.PerConn.RSS, std.PerConn.RSS)
		s.VsStdFree = ratio(s.PerConn.RSSFree, std.PerConn.RSSFree)
		if s.spec.kind == kindHandler {
			meets := s.VsStd < targetVsStd && s.VsStdFree < targetVsStd
			s.MeetsTarget = &meets
		}
	}
	return sums
}

// ratio returns a/b, or 0 if b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// medianPerConn takes the median of each field over ps.
func medianPerConn(ps []perConn) perConn {
	if len(ps) == 0 {
		return perConn{}
	}
	m := func(f func(perConn) float64) float64 {
		xs := make([]float64, len(ps))
		for i, p := range ps {
			xs[i] = f(p)
		}
		return median(xs)
	}
	return perConn{
		RSS:        m(func(p perConn) float64 { return p.RSS }),
		RSSFree:    m(func(p perConn) float64 { return p.RSSFree }),
		RssAnon:    m(func(p perConn) float64 { return p.RssAnon }),
		HeapInuse:  m(func(p perConn) float64 { return p.HeapInuse }),
		HeapAlloc:  m(func(p perConn) float64 { return p.HeapAlloc }),
		StackInuse: m(func(p perConn) float64 { return p.StackInuse }),
		Sys:        m(func(p perConn) float64 { return p.Sys }),
		Goroutines: m(func(p perConn) float64 { return p.Goroutines }),
		Slab:       m(func(p perConn) float64 { return p.Slab }),
		BaseRSS:    m(func(p perConn) float64 { return p.BaseRSS }),
	}
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// writeTable prints the medians as a markdown table.
func writeTable(w io.Writer, cfg config, sums []summary, wall time.Duration) {
	fmt.Fprintf(w, "## Idle connections: %d per run, medians of %d\n\n", cfg.n, cfg.repeats)
	fmt.Fprintf(w, "Cost of one idle connection = (measure with %d idle connections - baseline) / %d, in the server's process. "+
		"Baseline after %d echo round trips (warm-up) and FreeOSMemory; RSS after runtime.GC() and after debug.FreeOSMemory() (scavenged); "+
		"heap = HeapInuse, stack = StackInuse, after runtime.GC(); slab = /proc/meminfo Slab, system-wide (both ends of each connection). "+
		"Ratios are to std's RSS (after GC / scavenged); the handler API's target is under %.2f.\n\n",
		cfg.n, cfg.n, cfg.warmup, targetVsStd)
	fmt.Fprintln(w, "| server | RSS B/conn | RSS scavenged B/conn | heap B/conn | stack B/conn | goroutines/conn | slab B/conn (system) | baseline RSS MiB | vs std (RSS / scavenged) | under 1/4 of std |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, s := range sums {
		if s.Runs == 0 {
			what := "failed: " + s.Error
			if s.Unavailable {
				what = "unavailable here: " + s.Error
			}
			fmt.Fprintf(w, "| %s | %s | | | | | | | | |\n", s.Server, strings.ReplaceAll(what, "|", "/"))
			continue
		}
		p := s.PerConn
		vs, target := "", ""
		if s.VsStd != 0 || s.VsStdFree != 0 {
			vs = fmt.Sprintf("%.2f / %.2f", s.VsStd, s.VsStdFree)
		}
		if s.MeetsTarget != nil {
			target = "no"
			if *s.MeetsTarget {
				target = "yes"
			}
		}
		name := s.Server
		if s.Runs < s.Repeats {
			name = fmt.Sprintf("%s (%d of %d runs)", name, s.Runs, s.Repeats)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f | %s | %.1f | %s | %s |\n",
			name, bytesCell(p.RSS), bytesCell(p.RSSFree), bytesCell(p.HeapInuse), bytesCell(p.StackInuse),
			p.Goroutines, bytesCell(p.Slab), p.BaseRSS/(1<<20), vs, target)
	}
	fmt.Fprintf(w, "\nWall time: %s.\n", wall.Round(time.Second))
}

// bytesCell formats a per-connection byte count.
func bytesCell(v float64) string {
	return fmt.Sprintf("%.0f", math.Round(v))
}

// writeJSONLines writes every run, then every summary, one JSON object a
// line, to path.
func writeJSONLines(path string, runs []runResult, sums []summary) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for _, r := range runs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	for _, s := range sums {
		if err := enc.Encode(s); err != nil {
			f.Close()
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
