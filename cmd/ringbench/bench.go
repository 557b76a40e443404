//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// bench runs cfg and writes its outputs; the int is the exit status.
func bench(ctx context.Context, cfg config, stdout, stderr io.Writer) (int, error) {
	su, err := setUpRun(ctx, &cfg, cfg.charts, "", "results.jsonl", stderr)
	if err != nil {
		return 1, err
	}
	jl := su.jl
	defer jl.Close()
	total := cfg.repeats * len(cfg.servers) * len(cfg.loads) * len(cfg.conns)
	perRun := cfg.warmup + cfg.duration + 400*time.Millisecond
	estimate := time.Duration(total) * perRun
	if cfg.turns > 0 {
		estimate += time.Duration(turnsCount(&cfg)) * (cfg.turns + 2*cfg.warmup + 1500*time.Millisecond)
	}
	var turns string
	if cfg.turns > 0 {
		turns = fmt.Sprintf(" and %d comparisons in turns", turnsCount(&cfg))
	}
	fmt.Fprintf(stderr, "ringbench: %d runs (%d servers x %d loads x %d connection counts x %d repeats)%s, about %s\n",
		total, len(cfg.servers), len(cfg.loads), len(cfg.conns), cfg.repeats, turns, clock(estimate))
	r := &runner{cfg: &cfg, bins: su.bins, recorder: recorder{out: jl, place: su.placement,
		prog: newProgress(stderr, isTerminal(stderr), total, cfg.repeats, perRun)}}
	runErr := r.run(ctx)
	r.prog.finish()
	if runErr != nil {
		su.notes = append(su.notes, fmt.Sprintf("the run was cut short (%v): the tables hold what was measured", runErr))
	}
	var turnRuns []turnsRun
	if cfg.turns > 0 && runErr == nil && turnsCount(&cfg) > 0 {
		fmt.Fprintf(stderr, "ringbench: the default against each server in turns, %v each\n", cfg.turns)
		turnRuns = r.runTurns(ctx, cfg.turns, stderr)
	}

	sums := summarize(r.runs, cfg.serverNames())
	if err := writeSummaries(jl, sums); err != nil {
		return 1, err
	}
	fmt.Fprintln(stdout)
	writeTable(stdout, sums)
	writeTurns(stdout, turnRuns, false)

	var charts []string
	if cfg.charts && len(sums) > 0 {
		charts, err = renderCharts(ctx, su.bins.ringplot, jl.Name(), cfg.out)
		if err != nil {
			su.notes = append(su.notes, "charts failed: "+err.Error())
			fmt.Fprintln(stderr, "ringbench: charts failed:", err)
		}
	}
	report := filepath.Join(cfg.out, "report.md")
	f, err := os.Create(report)
	if err != nil {
		return 1, err
	}
	writeMarkdown(f, su.meta(&cfg), r.runs, sums, charts)
	writeTurns(f, turnRuns, true)
	if err := f.Close(); err != nil {
		return 1, err
	}
	fmt.Fprintf(stdout, "\nwrote %s, %s", jl.Name(), report)
	if len(charts) > 0 {
		fmt.Fprintf(stdout, " and %d charts in %s", len(charts), cfg.out)
	}
	fmt.Fprintln(stdout)

	code := 0
	for _, s := range sums {
		if s.VerifyErrors > 0 {
			fmt.Fprintf(stderr, "ringbench: %s %s %d conns: %d echoes failed verification\n", s.Server, s.Group(), s.Conns, s.VerifyErrors)
			code = 1
		}
	}
	for _, run := range r.runs {
		if run.Err != "" {
			code = 1
		}
	}
	if runErr != nil {
		code = 1
	}
	return code, nil
}

// placement says where the servers and the load generator run.
func (cfg *config) placement() string {
	p := fmt.Sprintf("servers on CPUs %s, load generator on CPUs %s", cfg.serverCPUs, cfg.loadCPUs)
	if cfg.cores > 0 {
		p += fmt.Sprintf(" (-cores %d)", cfg.cores)
	}
	if len(cfg.serverCPUs) == 0 || len(cfg.loadCPUs) == 0 {
		p += " (not pinned: fewer than 2 CPUs, or not asked; expect noisier numbers)"
	}
	return p
}

// buildServers builds what cfg's servers need, and the chart renderer if
// plot, and leaves out the servers that did not build, saying so in the
// notes it returns (without the bench module, plot's charts too).
func buildServers(ctx context.Context, cfg *config, plot bool, stderr io.Writer) (bins, []string, error) {
	var notes []string
	needPeers, needC := plot, false
	for _, s := range cfg.servers {
		needPeers = needPeers || s.kind == "peer"
		needC = needC || s.kind == "c"
	}
	fmt.Fprintf(stderr, "ringbench: building servers and the load generator from %s\n", cfg.src)
	b, err := build(ctx, cfg.src, filepath.Join(cfg.out, "bin"), needPeers, needC)
	if err != nil {
		return b, nil, err
	}
	if needC && b.cErr != nil {
		cfg.servers = slices.DeleteFunc(cfg.servers, func(s server) bool { return s.kind == "c" })
		msg := fmt.Sprintf("the C reference server did not build, so c-liburing is left out: %v", b.cErr)
		notes = append(notes, msg)
		fmt.Fprintln(stderr, "ringbench:", msg)
	}
	if needPeers && b.peersErr != nil {
		var kept []server
		var dropped []string
		for _, s := range cfg.servers {
			if s.kind == "peer" {
				dropped = append(dropped, s.name)
			} else {
				kept = append(kept, s)
			}
		}
		cfg.servers = kept
		what := strings.Join(dropped, " and ")
		if plot {
			what = strings.Join(append(dropped, "the charts"), " and ")
			cfg.charts = false
		}
		msg := fmt.Sprintf("the bench module did not build, so %s are left out: %v", what, b.peersErr)
		notes = append(notes, msg)
		fmt.Fprintln(stderr, "ringbench:", msg)
		if len(cfg.servers) == 0 {
			return b, notes, errors.New("no server left to run")
		}
	}
	return b, notes, nil
}

// syscallsHow says how syscalls are counted, and a note for the report
// if perf is missing.
func syscallsHow() (how, note string) {
	if _, err := exec.LookPath("perf"); err != nil {
		return "perf is not installed (install linux-perf), so only ringpoll servers have a count: " +
				"their own count of event-loop syscalls (io_uring_enter, epoll_wait), marked (lib), a lower bound",
			"syscalls per request: perf is missing; ringpoll's figures are the library's own counts, marked (lib), and the peers have none"
	}
	return "`perf stat -e raw_syscalls:sys_enter -p PID` on the server, in a window of its own (up to 500 ms) right after the measured one, under the same load (perf's tracepoint costs the server time on every call, which the CPU figures must not carry)", ""
}
