//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// benchScale runs the scale family (scale.go) and writes scale.jsonl,
// scale.md and its charts in cfg.out; the int is the exit status.
func benchScale(ctx context.Context, cfg config, stdout, stderr io.Writer) (int, error) {
	start := time.Now()
	// The counts are fitted to the machine's limits first, so that a
	// count that cannot run fails before the build.
	nofile, err := raiseNofile()
	if err != nil {
		return 1, err
	}
	var fit []string
	cfg.conns, fit = scaleFit(cfg.conns, nofile, ephemeralPorts())
	for _, n := range fit {
		fmt.Fprintln(stderr, "ringbench:", n)
	}
	if len(cfg.conns) == 0 {
		return 1, errors.New("-scale: no connection count fits this machine's limits")
	}
	su, err := setUpRun(ctx, &cfg, false, "-scale: ", "scale.jsonl", stderr)
	if err != nil {
		return 1, err
	}
	jl := su.jl
	defer jl.Close()
	su.notes = append(fit, su.notes...)
	total := scaleRuns(&cfg)
	fmt.Fprintf(stderr, "ringbench: -scale: %d runs (%d servers x %d loads x %d connection counts x %d repeats; a server process per server, count and repeat), about %s\n",
		total, len(cfg.servers), len(cfg.loads), len(cfg.conns), cfg.repeats, clock(scaleEstimate(&cfg)))
	r := &runner{cfg: &cfg, bins: su.bins, recorder: recorder{out: jl, place: su.placement,
		prog: newProgress(stderr, isTerminal(stderr), total, cfg.repeats, scaleEstimate(&cfg)/time.Duration(max(total, 1)))}}
	runErr := r.runScale(ctx)
	r.prog.finish()
	if runErr != nil {
		su.notes = append(su.notes, fmt.Sprintf("the run was cut short (%v): the tables hold what was measured", runErr))
	}

	order := cfg.serverNames()
	sums := scaleSummaries(r.runs, order)
	if err := writeSummaries(jl, sums); err != nil {
		return 1, err
	}
	report, charts, err := writeScaleOutputs(cfg.out, cfg.charts, su.meta(&cfg), r.runs, order, sums, stdout)
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(stdout, "\nwrote %s, %s and %d charts in %s, in %s\n", jl.Name(), report, len(charts), cfg.out, clock(time.Since(start)))

	code := 0
	for _, run := range r.runs {
		if lr, ok := decode(run); run.Err != "" || (ok && lr.VerifyErrors > 0) {
			code = 1
		}
	}
	if runErr != nil {
		code = 1
	}
	return code, nil
}

// writeScaleOutputs writes scale.md in out, and to stdout, and with
// charts the charts; it returns the report's path and the charts' names.
func writeScaleOutputs(out string, charts bool, m meta, runs []benchfmt.Run, order []string, sums []scaleSummary, stdout io.Writer) (string, []string, error) {
	var names []string
	if charts {
		var err error
		if names, err = writeScaleCharts(out, order, sums); err != nil {
			m.Notes = append(slices.Clip(m.Notes), "charts failed: "+err.Error())
		}
	}
	var md bytes.Buffer
	writeScaleReport(&md, m, runs, sums, names)
	io.Copy(stdout, bytes.NewReader(md.Bytes()))
	report := filepath.Join(out, "scale.md")
	return report, names, os.WriteFile(report, md.Bytes(), 0o644)
}

// reportScaleAgain reads the runs of an earlier scale.jsonl and writes
// scale.md and, with charts, the charts in out from them, as the run did
// (without its notes).
func reportScaleAgain(results, out, command string, charts bool, stdout io.Writer) error {
	runs, order, err := readRuns(results)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	sums := scaleSummaries(runs, order)
	m := againMeta(results, command, runs[0].Placement, sums[0].Repeats)
	_, _, err = writeScaleOutputs(out, charts, m, runs, order, sums, stdout)
	return err
}

// runScale runs every repeat: count by count, each server (in an order
// rotating from repeat to repeat) on a server process of its own for
// each group of loads that can share connections, started for them and
// stopped after. A server that fails to start fails its runs, not the
// benchmark; only a cancelled context ends it.
func (r *runner) runScale(ctx context.Context) error {
	cfg := r.cfg
	for rep := 1; rep <= cfg.repeats; rep++ {
		for _, conns := range cfg.conns {
			for _, ls := range scaleLoadGroups(cfg.loads) {
				for i := range cfg.servers {
					srv := cfg.servers[(i+rep-1)%len(cfg.servers)]
					if srv.kind == "c" && ls[0].scenario != "echo" {
						continue // a byte echo, not an RPC server
					}
					if err := r.scaleOnce(ctx, rep, srv, ls, conns); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// scaleLoadGroups splits loads, in order, into the groups one ringload
// runs on the same connections (-rates): those that differ in their rate
// only.
func scaleLoadGroups(loads []load) [][]load {
	var out [][]load
	for _, l := range loads {
		i := slices.IndexFunc(out, func(g []load) bool {
			return g[0].scenario == l.scenario && g[0].size == l.size && g[0].depth == l.depth
		})
		if i < 0 {
			out = append(out, []load{l})
			continue
		}
		out[i] = append(out[i], l)
	}
	return out
}

// scaleOnce starts srv, runs the loads ls at conns against it, one after
// another on the same connections, and stops it.
func (r *runner) scaleOnce(ctx context.Context, rep int, srv server, ls []load, conns int) error {
	var cells []benchfmt.Cell
	for _, l := range ls {
		cells = append(cells, l.cell(srv.name, conns))
	}
	base := filepath.Join(r.cfg.out, "logs", fmt.Sprintf("scale-%s-%s-c%d-r%d", srv.name, ls[0].scenario, conns, rep))
	r.prog.start(rep, cells[0])
	p, err := r.start(ctx, srv, ls[0].scenario, base)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.notStarted(rep, cells, err)
		return nil
	}
	if srv.kind == "ringpoll" {
		p.statsFile = base + ".stats.json"
	}
	runs := r.measureRates(ctx, rep, cells, p)
	if serr := p.stop(); serr != nil && ctx.Err() == nil {
		r.prog.note(fmt.Sprintf("%s (%d conns): exit: %v; log %s", srv.name, conns, serr, base+".log"))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for _, run := range runs {
		r.record(run)
	}
	return nil
}

// measureRates runs ringload -rates for cells, which differ in their rate
// only, against p: the connections (spread over scaleSources source
// addresses) each echo once as they connect, and end with resets.
func (r *runner) measureRates(ctx context.Context, rep int, cells []benchfmt.Cell, p *process) []benchfmt.Run {
	cfg := r.cfg
	c := cells[0]
	var rates []string
	for _, cell := range cells {
		rates = append(rates, strconv.FormatFloat(cell.Rate, 'f', -1, 64))
	}
	args := []string{
		"-addr", p.addr, "-conns", strconv.Itoa(c.Conns), "-size", strconv.Itoa(c.Size),
		"-proto", c.Scenario, "-depth", strconv.Itoa(c.Depth), "-rates", strings.Join(rates, ","),
		"-warmup", cfg.warmup.String(), "-duration", cfg.duration.String(),
		"-server-pid", strconv.Itoa(p.cmd.Process.Pid), "-json",
		"-prime", "-close-reset", "-sources", strconv.Itoa(scaleSources(c.Conns, ephemeralPorts())),
	}
	if p.statsFile != "" {
		args = append(args, "-server-stats", p.statsFile)
	}
	// Each load's windows and its end at rest, and the connections'
	// setup; ringload's own bound, and a minute, back it up.
	limit := time.Duration(len(cells))*(cfg.warmup+cfg.duration+quiesceBound) + time.Duration(c.Conns)*time.Millisecond
	stdout, stderr, err := r.ringload(ctx, limit, args)
	return scaleResults(cells, rep, r.place, stdout.Bytes(), err, stderr.String())
}

// quiesceBound is how long ringload may take to end a load at rest, and
// to count syscalls after its window: the bound on its run.
const quiesceBound = 11 * time.Second

// scaleResults makes a run of each cell from ringload's JSON lines, in
// order; cells without a line failed, with ringload's error.
func scaleResults(cells []benchfmt.Cell, rep int, place string, out []byte, err error, stderr string) []benchfmt.Run {
	var runs []benchfmt.Run
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	for i, cell := range cells {
		run := benchfmt.Run{Kind: "run", Cell: cell, Repeat: rep, Placement: place}
		if i < len(lines) && len(lines[i]) > 0 {
			// ringload prints its results even when it exits 1 for
			// verify errors; keep them.
			if jerr := json.Unmarshal(lines[i], &run.Result); jerr != nil {
				run.Result = nil
				run.Err = fmt.Sprintf("reading ringload's result: %v (exit: %v)", jerr, err)
			}
		}
		if run.Result == nil && run.Err == "" {
			run.Err = fmt.Sprintf("ringload: %v: %s", err, tail0(stderr))
		}
		runs = append(runs, run)
	}
	return runs
}
