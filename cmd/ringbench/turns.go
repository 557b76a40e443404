//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// Turns (-turns D): after the matrix, the default server meets its twin
// and each peer of the run in alternating turns of turnPeriod, both
// servers up at once, the load generator loading one and then the other
// (ringload -alt-addr), for D at each saturated echo load and connection
// count. Each pair of turns gives one ratio of the default's requests per
// server CPU-second over the other's; the median of the pairs and its
// bootstrap interval are the run's sharpest answer to "which does more
// work per CPU-second": the matrix's runs, seconds apart, catch the
// machine at different paces (its twin there lands up to 16% away from
// the default), turns of half a second catch it at the same.

// turnPeriod is one turn of -turns.
const turnPeriod = 500 * time.Millisecond

// turnsRun is one comparison in turns, as results.jsonl holds it.
type turnsRun struct {
	Kind   string                `json:"kind"` // "turns"
	Peer   string                `json:"peer"`
	Conns  int                   `json:"conns"`
	Size   int                   `json:"size"`
	Err    string                `json:"err,omitempty"`
	Result *benchfmt.TurnsResult `json:"result,omitempty"`
}

// turnsPeers are the servers of the run the default meets in turns: its
// twin and the peers, in the run's order.
func turnsPeers(servers []server) []server {
	var out []server
	for _, s := range servers {
		if s.name == twinServer || s.kind == "std" || s.kind == "peer" || s.kind == "c" {
			out = append(out, s)
		}
	}
	return out
}

// turnsSizes are the message sizes of the run's saturated echo
// ping-pong loads, the ones turns measure.
func turnsSizes(loads []load) []int {
	var sizes []int
	for _, l := range loads {
		if l.scenario == "echo" && l.depth == 1 && l.rate == 0 && !slices.Contains(sizes, l.size) {
			sizes = append(sizes, l.size)
		}
	}
	return sizes
}

// turnsCount is how many comparisons runTurns makes for cfg.
func turnsCount(cfg *config) int {
	if !slices.ContainsFunc(cfg.servers, func(s server) bool { return s.name == defaultServer }) {
		return 0
	}
	return len(turnsSizes(cfg.loads)) * len(cfg.conns) * len(turnsPeers(cfg.servers))
}

// runTurns runs every comparison in turns, each for d, records it, says
// how it went on log and returns them.
func (r *runner) runTurns(ctx context.Context, d time.Duration, log io.Writer) []turnsRun {
	if turnsCount(r.cfg) == 0 {
		return nil
	}
	def, _ := lookupServer(defaultServer)
	var runs []turnsRun
	for _, size := range turnsSizes(r.cfg.loads) {
		for _, c := range r.cfg.conns {
			for _, peer := range turnsPeers(r.cfg.servers) {
				if ctx.Err() != nil {
					return runs
				}
				run := turnsRun{Kind: "turns", Peer: peer.name, Conns: c, Size: size}
				if err := r.turns(ctx, def, peer, &run, d); err != nil {
					run.Err = err.Error()
				}
				fmt.Fprintln(log, "ringbench:", turnsLine(run))
				if b, err := json.Marshal(run); err == nil {
					r.out.Write(append(b, '\n'))
				}
				runs = append(runs, run)
			}
		}
	}
	return runs
}

// turns starts def and peer side by side and runs ringload -alt-addr on
// them into run.
func (r *runner) turns(ctx context.Context, def, peer server, run *turnsRun, d time.Duration) error {
	cfg := r.cfg
	var procs [2]*process
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.stop()
			}
		}
	}()
	for i, srv := range []server{def, peer} {
		base := filepath.Join(cfg.out, "logs", fmt.Sprintf("turns-%s-%s-%d-%d", srv.name, peer.name, run.Conns, i))
		var err error
		if procs[i], err = r.start(ctx, srv, "echo", base); err != nil {
			return fmt.Errorf("%s did not start: %v", srv.name, err)
		}
	}
	args := []string{
		"-addr", procs[0].addr, "-server-pid", strconv.Itoa(procs[0].cmd.Process.Pid),
		"-alt-addr", procs[1].addr, "-alt-pid", strconv.Itoa(procs[1].cmd.Process.Pid),
		"-conns", strconv.Itoa(run.Conns), "-size", strconv.Itoa(run.Size),
		"-warmup", cfg.warmup.String(), "-duration", d.String(), "-alt-period", turnPeriod.String(), "-json",
	}
	stdout, stderr, err := r.ringload(ctx, 2*cfg.warmup+d, args)
	if stdout.Len() > 0 {
		// Printed even when it exits 1 for verify errors.
		var f benchfmt.TurnsResult
		if jerr := json.Unmarshal(stdout.Bytes(), &f); jerr == nil {
			run.Result = &f
			if f.VerifyErrors > 0 {
				return fmt.Errorf("%d echoes failed verification; first: %s", f.VerifyErrors, f.FirstError)
			}
			return nil
		}
	}
	return fmt.Errorf("ringload: %v: %s", err, tail0(stderr.String()))
}

// turnsLine is one comparison as the progress and the table show it.
func turnsLine(run turnsRun) string {
	if run.Result == nil {
		return fmt.Sprintf("turns, %d conns, %s: %s", run.Conns, run.Peer, run.Err)
	}
	f := run.Result
	return fmt.Sprintf("turns, %d conns, the default over %s: %.3f (%.3f–%.3f, %d pairs); %.2f against %.2f µs CPU/req",
		run.Conns, run.Peer, f.RatioMedian, f.RatioLo, f.RatioHi, f.Pairs, f.CPUusPerReq[0], f.CPUusPerReq[1])
}

// writeTurns writes the comparisons in turns as a table, one row per
// message size and connection count, with a verdict against the Go peers:
// ahead where every interval lies above 1, behind where one lies below,
// level otherwise.
func writeTurns(w io.Writer, runs []turnsRun, markdown bool) {
	if len(runs) == 0 {
		return
	}
	var peers []string
	for _, run := range runs {
		if !slices.Contains(peers, run.Peer) {
			peers = append(peers, run.Peer)
		}
	}
	type row struct{ size, conns int }
	var rows []row
	for _, run := range runs {
		if !slices.Contains(rows, row{run.Size, run.Conns}) {
			rows = append(rows, row{run.Size, run.Conns})
		}
	}
	head := fmt.Sprintf("The default server (%s) against each other server in alternating turns of %v, both up at once (ringload -alt-addr): the default's requests per server CPU-second over the other's, median of the pairs of turns and its 95%% bootstrap interval (above 1: the default does more work per CPU-second); %s is the default again, so its interval is the run's noise:", defaultServer, turnPeriod, twinServer)
	if markdown {
		fmt.Fprintf(w, "\n## Turns: the default against each server, side by side\n\n%s\n\n| size | conns | %s | verdict |\n|%s\n", head, strings.Join(peers, " | "), strings.Repeat("---|", len(peers)+3))
	} else {
		fmt.Fprintf(w, "\n== turns\n%s\n", head)
	}
	for _, rw := range rows {
		cells := []string{fmt.Sprint(rw.size), fmt.Sprint(rw.conns)}
		var ahead, behind, measured int
		for _, p := range peers {
			i := slices.IndexFunc(runs, func(run turnsRun) bool { return run.Peer == p && run.Size == rw.size && run.Conns == rw.conns })
			if i < 0 || runs[i].Result == nil {
				cells = append(cells, "-")
				continue
			}
			f := runs[i].Result
			cells = append(cells, fmt.Sprintf("%.3f (%.3f–%.3f)", f.RatioMedian, f.RatioLo, f.RatioHi))
			if srv, _ := lookupServer(p); srv.kind == "std" || srv.kind == "peer" {
				measured++
				switch {
				case f.RatioLo > 1:
					ahead++
				case f.RatioHi < 1:
					behind++
				}
			}
		}
		verdict := "level with the Go peers"
		switch {
		case measured == 0:
			verdict = "no Go peer"
		case behind > 0:
			verdict = "behind a Go peer"
		case ahead == measured:
			verdict = "ahead of every Go peer"
		}
		cells = append(cells, verdict)
		if markdown {
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		} else {
			fmt.Fprintf(w, "   %d B, %4d conns: %s\n", rw.size, rw.conns, strings.Join(cells[2:], ", "))
		}
	}
	if !markdown {
		fmt.Fprintf(w, "   (columns: %s, verdict)\n", strings.Join(peers, ", "))
	}
}
