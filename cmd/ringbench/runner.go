//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// loadResult is the part of ringload's JSON result ringbench summarizes.
// Per-request figures are -1 when not measured.
type loadResult struct {
	ReqPerS            float64 `json:"req_per_s"`
	P50us              float64 `json:"p50_us"`
	P99us              float64 `json:"p99_us"`
	P999us             float64 `json:"p999_us"`
	P9999us            float64 `json:"p9999_us"`
	ServerCPUCores     float64 `json:"server_cpu_cores"`
	ServerCPUusPerReq  float64 `json:"server_cpu_us_per_req"`
	ReqPerServerCPUs   float64 `json:"req_per_server_cpu_s"`
	UserUsPerReq       float64 `json:"server_user_us_per_req"`
	KernelUsPerReq     float64 `json:"server_kernel_us_per_req"`
	Syscalls           int64   `json:"syscalls"`
	SyscallsPerReq     float64 `json:"syscalls_per_req"`
	SyscallsNote       string  `json:"syscalls_note"`
	LoopSyscallsPerReq float64 `json:"loop_syscalls_per_req"`
	CtxSwitchesPerReq  float64 `json:"ctx_switches_per_req"`
	VerifyErrors       uint64  `json:"verify_errors"`
	FirstVerifyError   string  `json:"first_verify_error"`
	DialErrors         int     `json:"dial_errors"`
	IOErrors           int     `json:"io_errors"`
	FirstError         string  `json:"first_error"`

	// The server's resident memory in bytes: before the first dial, with
	// every connection open and idle, at the end of the window; -1: not
	// measured.
	RSSBase int64 `json:"server_rss_base_bytes"`
	RSSIdle int64 `json:"server_rss_idle_bytes"`
	RSSEnd  int64 `json:"server_rss_bytes"`
}

// runner runs the matrix.
type runner struct {
	cfg  *config
	bins bins
	recorder
}

// recorder keeps the runs of a family (runner, fwRunner) as they end.
type recorder struct {
	out   io.Writer // the results file
	prog  *progress
	runs  []benchfmt.Run
	place string // where the servers and the load run
}

// serverArgv is the command line of srv serving scenario on addr. A
// ringpoll server dumps its loop counters to statsFile on SIGUSR1.
func (r *runner) serverArgv(srv server, scenario, addr, statsFile string) []string {
	switch srv.kind {
	case "ringpoll":
		engine, api := srv.name, "handler"
		for _, variant := range []string{"-pinned", "-busypoll", "-1loop", "-twin"} {
			engine = strings.TrimSuffix(engine, variant)
		}
		if srv.inline {
			engine, api = strings.TrimSuffix(srv.name, "-inline"), "inline"
		}
		argv := []string{r.bins.ringecho, "-addr", addr, "-engine", engine, "-api", api, "-proto", scenario, "-stats-file", statsFile}
		if srv.pinned {
			argv = append(argv, "-loop-cpus", cpuListArg(r.cfg.serverCPUs))
		}
		if srv.busyPoll {
			argv = append(argv, "-busy-poll", "50us")
		}
		if srv.oneLoop {
			argv = append(argv, "-loops", "1")
		}
		return argv
	case "std":
		return []string{r.bins.ringload, "-serve-std", "-addr", addr, "-proto", scenario}
	case "c":
		// It listens on every address, at the port (an echo of bytes
		// serves the rpc scenario too: replies are the requests).
		_, port, _ := strings.Cut(addr, ":")
		return []string{r.bins.cEcho, port}
	default:
		return []string{r.bins.peerecho, "-impl", srv.name, "-proto", scenario, "-addr", addr}
	}
}

// run runs every repeat of the matrix. Within a repeat each server runs
// all its cells, one server process per scenario; the servers' order
// rotates from repeat to repeat, so slow drifts of the machine spread over
// all of them.
func (r *runner) run(ctx context.Context) error {
	cfg := r.cfg
	for rep := 1; rep <= cfg.repeats; rep++ {
		for i := range cfg.servers {
			srv := cfg.servers[(i+rep-1)%len(cfg.servers)]
			for _, scenario := range scenarios(cfg.loads) {
				if srv.kind == "c" && scenario != "echo" {
					continue // a byte echo, not an RPC server
				}
				if err := r.runServer(ctx, rep, srv, scenario); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// scenarios lists the scenarios of loads, in order, once each.
func scenarios(loads []load) []string {
	var out []string
	for _, l := range loads {
		if !slices.Contains(out, l.scenario) {
			out = append(out, l.scenario)
		}
	}
	return out
}

// runServer starts srv for scenario and runs its cells. A server that
// fails to start fails its cells, not the benchmark; only a cancelled
// context ends the run.
func (r *runner) runServer(ctx context.Context, rep int, srv server, scenario string) error {
	cfg := r.cfg
	var cells []benchfmt.Cell
	for _, l := range cfg.loads {
		if l.scenario != scenario {
			continue
		}
		for _, c := range cfg.conns {
			cells = append(cells, l.cell(srv.name, c))
		}
	}
	base := filepath.Join(cfg.out, "logs", fmt.Sprintf("%s-%s-r%d", srv.name, scenario, rep))
	logPath := base + ".log"
	p, err := r.start(ctx, srv, scenario, base)
	if err == nil {
		if srv.kind == "ringpoll" {
			p.statsFile = base + ".stats.json"
		}
		for _, cell := range cells {
			if ctx.Err() != nil {
				break
			}
			r.prog.start(rep, cell)
			run := r.measure(ctx, rep, cell, p)
			r.record(run)
		}
		if serr := p.stop(); serr != nil && ctx.Err() == nil {
			r.prog.note(fmt.Sprintf("%s (%s): exit: %v; log %s", srv.name, scenario, serr, logPath))
		}
		return ctx.Err()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.notStarted(rep, cells, err)
	return nil
}

// measure runs the load generator for one cell against p.
func (r *runner) measure(ctx context.Context, rep int, cell benchfmt.Cell, p *process) benchfmt.Run {
	cfg := r.cfg
	run := benchfmt.Run{Kind: "run", Cell: cell, Repeat: rep, Placement: r.place}
	args := []string{
		"-addr", p.addr, "-conns", strconv.Itoa(cell.Conns), "-size", strconv.Itoa(cell.Size),
		"-proto", cell.Scenario, "-depth", strconv.Itoa(cell.Depth),
		"-rate", strconv.FormatFloat(cell.Rate, 'f', -1, 64),
		"-warmup", cfg.warmup.String(), "-duration", cfg.duration.String(),
		"-server-pid", strconv.Itoa(p.cmd.Process.Pid), "-json",
	}
	if p.statsFile != "" {
		args = append(args, "-server-stats", p.statsFile)
	}
	stdout, stderr, err := r.ringload(ctx, cfg.warmup+cfg.duration, args)
	if stdout.Len() > 0 {
		// ringload prints its result even when it exits 1 for verify
		// errors; keep it.
		if jerr := json.Unmarshal(stdout.Bytes(), &run.Result); jerr != nil {
			run.Result = nil
			err = fmt.Errorf("reading ringload's result: %v (exit: %v)", jerr, err)
		}
	}
	if run.Result == nil {
		run.Err = fmt.Sprintf("ringload: %v: %s", err, tail0(stderr.String()))
	}
	return run
}

// ringload runs the load generator with args, pinned to the load CPUs,
// and returns what it printed. It bounds itself; limit plus a minute is
// a backstop.
func (r *runner) ringload(ctx context.Context, limit time.Duration, args []string) (stdout, stderr bytes.Buffer, err error) {
	rctx, cancel := context.WithTimeout(ctx, limit+60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(rctx, r.bins.ringload, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err = startPinned(cmd, r.cfg.loadCPUs); err == nil {
		err = cmd.Wait()
	}
	return stdout, stderr, err
}

// start starts srv serving scenario, logging to base+".log". A port found
// free may be taken before the server binds it: then the server exits,
// and another port is tried.
func (r *runner) start(ctx context.Context, srv server, scenario, base string) (*process, error) {
	var p *process
	var err error
	for range 3 {
		var addr string
		if addr, err = freePort(); err != nil {
			break
		}
		p, err = startServer(ctx, r.serverArgv(srv, scenario, addr, base+".stats.json"), addr, r.cfg.serverCPUs, base+".log")
		if !errors.Is(err, errExitedEarly) {
			break
		}
	}
	return p, err
}

func tail0(s string) string {
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return s
}

// record keeps a run, writes it out as a JSON line at once (a cut-short
// benchmark keeps what it measured) and shows it.
func (r *recorder) record(run benchfmt.Run) {
	r.runs = append(r.runs, run)
	writeJSONLine(r.out, run)
	r.prog.done(run)
}

// notStarted records cells, of repeat rep, failed: their server did not
// start, with err.
func (r *recorder) notStarted(rep int, cells []benchfmt.Cell, err error) {
	for _, cell := range cells {
		r.prog.start(rep, cell)
		r.record(benchfmt.Run{Kind: "run", Cell: cell, Repeat: rep, Placement: r.place,
			Err: fmt.Sprintf("server did not start: %v", err)})
	}
}

// decode reads a run's result into loadResult.
func decode(run benchfmt.Run) (loadResult, bool) {
	// Figures the result lacks are not measured, not zero.
	lr := loadResult{
		ServerCPUCores: -1, ServerCPUusPerReq: -1, ReqPerServerCPUs: -1, Syscalls: -1,
		UserUsPerReq: -1, KernelUsPerReq: -1,
		SyscallsPerReq: -1, LoopSyscallsPerReq: -1, CtxSwitchesPerReq: -1,
		RSSBase: -1, RSSIdle: -1, RSSEnd: -1,
	}
	if run.Result == nil {
		return lr, false
	}
	b, err := json.Marshal(run.Result)
	if err != nil || json.Unmarshal(b, &lr) != nil {
		return lr, false
	}
	return lr, true
}

// cpuListArg writes CPUs as ringecho's -loop-cpus takes them: 0,1,2.
func cpuListArg(cpus cpuSet) string {
	parts := make([]string, len(cpus))
	for i, c := range cpus {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}
