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
// (ringload -alt-addr), for D at each saturated load (echo or rpc, ping-pong
// or pipelined) and, with -turns-paced, each paced one, at each
// connection count. Each pair of turns gives one ratio of the default's requests per
// server CPU-second over the other's; the median of the pairs and its
// bootstrap interval are the run's sharpest answer to "which does more
// work per CPU-second": the matrix's runs, seconds apart, catch the
// machine at different paces (its twin there lands up to 16% away from
// the default), turns of half a second catch it at the same.

// turnPeriod is one turn of -turns.
const turnPeriod = 500 * time.Millisecond

// turnsRun is one comparison in turns, as results.jsonl holds it.
type turnsRun struct {
	Kind     string                `json:"kind"` // "turns"
	Peer     string                `json:"peer"`
	Conns    int                   `json:"conns"`
	Size     int                   `json:"size"`
	Scenario string                `json:"scenario,omitempty"` // "echo" or "rpc"; empty: echo (results of before rpc turns)
	Depth    int                   `json:"depth,omitempty"`    // in flight per connection; 0: 1
	Rate     float64               `json:"rate,omitempty"`     // offered req/s; 0: as fast as replies come
	Err      string                `json:"err,omitempty"`
	Result   *benchfmt.TurnsResult `json:"result,omitempty"`
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

// turnsLoads are the run's loads that turns measure: the saturated ones
// (as fast as replies come), and with paced the paced ones too (each turn
// then offered the load's rate).
func turnsLoads(loads []load, paced bool) []load {
	var out []load
	for _, l := range loads {
		if (l.rate == 0 || paced) && !slices.ContainsFunc(out, func(o load) bool { return o.turnsKey() == l.turnsKey() }) {
			out = append(out, l)
		}
	}
	return out
}

// turnsKey is what tells two loads apart in turns.
func (l load) turnsKey() turnsLoad { return turnsLoad{l.scenario, l.size, l.depth, l.rate} }

// turnsLoad is a comparison's load: a row of the turns table.
type turnsLoad struct {
	scenario string
	size     int
	depth    int
	rate     float64
}

// loadOf is the load a comparison ran: echo ping-pong in results of
// before rpc and pipelined turns, which did not record it.
func (run turnsRun) loadOf() turnsLoad {
	l := turnsLoad{run.Scenario, run.Size, run.Depth, run.Rate}
	if l.scenario == "" {
		l.scenario = "echo"
	}
	l.depth = max(l.depth, 1)
	return l
}

// String is the load as the turns table names it: "echo 1024 B", "rpc
// 1024 B, 8 in flight", "echo 1024 B at 8500 req/s".
func (l turnsLoad) String() string {
	s := fmt.Sprintf("%s %d B", l.scenario, l.size)
	if l.depth > 1 {
		s += fmt.Sprintf(", %d in flight", l.depth)
	}
	if l.rate > 0 {
		s += fmt.Sprintf(" at %.0f req/s", l.rate)
	}
	return s
}

// turnsCount is how many comparisons runTurns makes for cfg.
func turnsCount(cfg *config) int {
	if !slices.ContainsFunc(cfg.servers, func(s server) bool { return s.name == defaultServer }) {
		return 0
	}
	return len(turnsLoads(cfg.loads, cfg.turnsPaced)) * len(cfg.conns) * len(turnsPeers(cfg.servers))
}

// runTurns runs every comparison in turns, each for d, records it, says
// how it went on log and returns them.
func (r *runner) runTurns(ctx context.Context, d time.Duration, log io.Writer) []turnsRun {
	if turnsCount(r.cfg) == 0 {
		return nil
	}
	def, _ := lookupServer(defaultServer)
	var runs []turnsRun
	for _, l := range turnsLoads(r.cfg.loads, r.cfg.turnsPaced) {
		for _, c := range r.cfg.conns {
			for _, peer := range turnsPeers(r.cfg.servers) {
				if ctx.Err() != nil {
					return runs
				}
				run := turnsRun{Kind: "turns", Peer: peer.name, Conns: c, Size: l.size, Scenario: l.scenario, Depth: l.depth, Rate: l.rate}
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
		if procs[i], err = r.start(ctx, srv, run.Scenario, base); err != nil {
			return fmt.Errorf("%s did not start: %v", srv.name, err)
		}
	}
	args := []string{
		"-addr", procs[0].addr, "-server-pid", strconv.Itoa(procs[0].cmd.Process.Pid),
		"-alt-addr", procs[1].addr, "-alt-pid", strconv.Itoa(procs[1].cmd.Process.Pid),
		"-conns", strconv.Itoa(run.Conns), "-size", strconv.Itoa(run.Size),
		"-proto", run.Scenario, "-depth", strconv.Itoa(run.Depth), "-rate", strconv.FormatFloat(run.Rate, 'f', -1, 64),
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
		return fmt.Sprintf("turns, %s, %d conns, %s: %s", run.loadOf(), run.Conns, run.Peer, run.Err)
	}
	f := run.Result
	return fmt.Sprintf("turns, %s, %d conns, the default over %s: %.3f (%.3f–%.3f, %d pairs); %.2f against %.2f µs CPU/req",
		run.loadOf(), run.Conns, run.Peer, f.RatioMedian, f.RatioLo, f.RatioHi, f.Pairs, f.CPUusPerReq[0], f.CPUusPerReq[1])
}

// writeTurns writes the comparisons in turns as a table, one row per
// load and connection count, with a verdict against the Go peers:
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
	type row struct {
		load  turnsLoad
		conns int
	}
	var rows []row
	for _, run := range runs {
		if rw := (row{run.loadOf(), run.Conns}); !slices.Contains(rows, rw) {
			rows = append(rows, rw)
		}
	}
	head := fmt.Sprintf("The default server (%s) against each other server in alternating turns of %v, both up at once (ringload -alt-addr): the default's requests per server CPU-second over the other's, median of the pairs of turns and its 95%% bootstrap interval (above 1: the default does more work per CPU-second); %s is the default again, so its interval is the run's noise:", defaultServer, turnPeriod, twinServer)
	if markdown {
		fmt.Fprintf(w, "\n## Turns: the default against each server, side by side\n\n%s\n\n| load | conns | %s | verdict |\n|%s\n", head, strings.Join(peers, " | "), strings.Repeat("---|", len(peers)+3))
	} else {
		fmt.Fprintf(w, "\n== turns\n%s\n", head)
	}
	for _, rw := range rows {
		cells := []string{rw.load.String(), fmt.Sprint(rw.conns)}
		var ahead, behind, measured int
		for _, p := range peers {
			i := slices.IndexFunc(runs, func(run turnsRun) bool { return run.Peer == p && run.loadOf() == rw.load && run.Conns == rw.conns })
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
			fmt.Fprintf(w, "   %s, %4d conns: %s\n", rw.load, rw.conns, strings.Join(cells[2:], ", "))
		}
	}
	if !markdown {
		fmt.Fprintf(w, "   (columns: %s, verdict)\n", strings.Join(peers, ", "))
	}
}
