//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"
)

// runSetup is what a run of cfg's servers, the matrix (bench) or the
// scale family (benchScale), has ready before its first run.
type runSetup struct {
	placement string // where the servers and the load generator run
	bins      bins
	syscalls  string   // how syscalls are counted, for the report
	notes     []string // for the report: what was left out, and why; the run adds its own
	jl        *os.File // the results file; the caller closes it
}

// setUpRun makes cfg.out's logs folder, says on stderr where the
// processes run (after label, the mode's own prefix), builds cfg's
// servers and with plot the chart renderer (buildServers, which may
// leave servers out of cfg), and creates the results file name in
// cfg.out. The results file comes last, so that a build that fails
// leaves an earlier one as it was.
func setUpRun(ctx context.Context, cfg *config, plot bool, label, name string, stderr io.Writer) (runSetup, error) {
	var s runSetup
	if err := os.MkdirAll(filepath.Join(cfg.out, "logs"), 0o755); err != nil {
		return s, err
	}
	s.placement = cfg.placement()
	fmt.Fprintf(stderr, "ringbench: %s%s\n", label, s.placement)
	var err error
	if s.bins, s.notes, err = buildServers(ctx, cfg, plot, stderr); err != nil {
		return s, err
	}
	how, note := syscallsHow()
	s.syscalls = how
	if note != "" {
		s.notes = append(s.notes, note)
	}
	s.jl, err = os.Create(filepath.Join(cfg.out, name))
	return s, err
}

// serverNames are cfg's servers' names, in cfg's order: the order of
// the tables.
func (cfg *config) serverNames() []string {
	var names []string
	for _, s := range cfg.servers {
		names = append(names, s.name)
	}
	return names
}

// meta is the report's account of how the run of cfg set up by s was
// made.
func (s *runSetup) meta(cfg *config) meta {
	return meta{
		Date:      time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Command:   cfg.commandLine,
		Machine:   machine(),
		Go:        runtime.Version(),
		Placement: s.placement,
		Repeats:   cfg.repeats,
		Warmup:    cfg.warmup.String(),
		Duration:  cfg.duration.String(),
		Syscalls:  s.syscalls,
		Notes:     s.notes,
	}
}

// writeSummaries writes sums to the results file jl after its runs and
// syncs it: what reads the file next (the charts renderer, a later
// -report) finds every line on disk.
func writeSummaries[S any](jl *os.File, sums []S) error {
	for _, s := range sums {
		if err := writeJSONLine(jl, s); err != nil {
			return err
		}
	}
	return jl.Sync()
}

// buildInto makes out's logs folder and builds pkgs of the module in src
// into out/bin, for the modes that build only their own servers (-kv,
// -udp); it returns the two folders.
func buildInto(ctx context.Context, src, out string, pkgs ...string) (logs, bin string, err error) {
	logs, bin = filepath.Join(out, "logs"), filepath.Join(out, "bin")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return "", "", err
	}
	return logs, bin, goBuild(ctx, src, bin, pkgs...)
}

// rotation is servers in the order repeat rep runs them (-kv, -udp):
// rotated by one a repeat, so that no server always runs first or last.
func rotation(servers []string, rep int) []string {
	k := rep % len(servers)
	return append(slices.Clone(servers[k:]), servers[:k]...)
}
