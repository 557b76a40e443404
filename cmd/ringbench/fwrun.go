//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// fwRunner runs the family's matrix.
type fwRunner struct {
	fc    *fwConfig
	tools map[string]string // client binaries: wrk, h2load, grpc, quicload
	serve string            // frameserve
	file  string            // the file the file scenario serves
	lua   string            // wrk's script
	logs  string
	seq   int // numbers the gRPC client's profile names
	recorder
}

// benchFrameworks runs the family and writes results.jsonl, report.md and
// the charts in fc.out; the int is the exit status.
func benchFrameworks(ctx context.Context, fc fwConfig) (int, error) {
	logs, bin := filepath.Join(fc.out, "logs"), filepath.Join(fc.out, "bin")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return 1, err
	}
	placement := fmt.Sprintf("servers on CPUs %s, clients on CPUs %s", fc.serverCPUs, fc.loadCPUs)
	if len(fc.serverCPUs) == 0 || len(fc.loadCPUs) == 0 {
		placement += " (not pinned: fewer than 2 CPUs, or not asked; expect noisier numbers)"
	}
	fmt.Fprintf(fc.stderr, "ringbench: %s\n", placement)
	var notes []string
	note := func(msg string) {
		notes = append(notes, msg)
		fmt.Fprintln(fc.stderr, "ringbench:", msg)
	}

	tools, versions, err := fwPrepare(ctx, &fc, bin, note)
	if err != nil {
		return 1, err
	}
	r := &fwRunner{fc: &fc, tools: tools, serve: filepath.Join(bin, "frameserve"), lua: filepath.Join(bin, "wrk-p999.lua"),
		logs: logs, recorder: recorder{place: placement}}
	if err := os.WriteFile(r.lua, []byte(wrkLua), 0o644); err != nil {
		return 1, err
	}
	if slices.ContainsFunc(fc.scenarios, func(s fwScenario) bool { return s.file }) {
		f, err := makeFile(fc.fileSize)
		if err != nil {
			return 1, err
		}
		defer os.Remove(f)
		r.file = f
	}
	jl, err := os.Create(filepath.Join(fc.out, "results.jsonl"))
	if err != nil {
		return 1, err
	}
	defer jl.Close()
	r.out = jl
	total := fc.fwTotalRuns()
	perRun := time.Duration(wholeSeconds(fc.duration))*time.Second + time.Second
	if fc.warmup > 0 {
		perRun += time.Duration(wholeSeconds(fc.warmup)) * time.Second
	}
	fmt.Fprintf(fc.stderr, "ringbench: %d framework runs, about %s\n", total, clock(time.Duration(total)*perRun))
	r.prog = newProgress(fc.stderr, isTerminal(fc.stderr), total, fc.repeats, perRun)
	runErr := r.run(ctx)
	r.prog.finish()
	if runErr != nil {
		note(fmt.Sprintf("the run was cut short (%v): the tables hold what was measured", runErr))
	}

	var order []string
	for _, sc := range fc.scenarios {
		for _, s := range sc.servers {
			if !slices.Contains(order, s) {
				order = append(order, s)
			}
		}
	}
	sums := summarize(r.runs, order)
	if err := writeSummaries(jl, sums); err != nil {
		return 1, err
	}
	var charts []string
	if fc.charts && len(sums) > 0 {
		if charts, err = renderCharts(ctx, filepath.Join(bin, "ringplot"), jl.Name(), fc.out); err != nil {
			note("charts failed: " + err.Error())
		}
	}
	m := meta{
		Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), Command: fc.commandLine, Machine: machine(),
		Go: goVersion(), Placement: placement, Repeats: fc.repeats,
		Warmup:   warmupText(fc.warmup),
		Duration: fmt.Sprintf("%ds", wholeSeconds(fc.duration)),
		Syscalls: "not counted in this family", Notes: append([]string{"clients: " + strings.Join(versions, ", ")}, notes...),
	}
	m.Turns = fc.turns
	var md bytes.Buffer
	writeFwReport(&md, m, r.runs, sums, charts)
	if err := os.WriteFile(filepath.Join(fc.out, "report.md"), md.Bytes(), 0o644); err != nil {
		return 1, err
	}
	fmt.Fprintf(fc.stdout, "%s\nwrote %s and %s", md.String(), jl.Name(), filepath.Join(fc.out, "report.md"))
	if len(charts) > 0 {
		fmt.Fprintf(fc.stdout, " and %d charts in %s", len(charts), fc.out)
	}
	fmt.Fprintln(fc.stdout)
	code := 0
	for _, run := range r.runs {
		if run.Err != "" || runErrors(run) > 0 {
			code = 1
		}
	}
	if runErr != nil {
		code = 1
	}
	return code, nil
}

// warmupText describes the warm-up the clients run.
func warmupText(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return fmt.Sprintf("%ds, as the clients take whole seconds", wholeSeconds(d))
}

// run runs every repeat: within a repeat every scenario, and within a
// scenario every server, in an order that rotates from repeat to repeat,
// each started afresh and measured at each connection count.
func (r *fwRunner) run(ctx context.Context) error {
	if r.fc.turns {
		return r.runTurns(ctx)
	}
	for rep := 1; rep <= r.fc.repeats; rep++ {
		for _, sc := range r.fc.scenarios {
			n := len(sc.servers)
			for i := range n {
				if err := r.runServer(ctx, rep, sc, sc.servers[(i+rep-1)%n]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runServer starts one server for sc and measures it at each connection
// count. A server that fails to start fails its runs, not the benchmark.
func (r *fwRunner) runServer(ctx context.Context, rep int, sc fwScenario, kind string) error {
	var cells []benchfmt.Cell
	for _, c := range r.fc.connsOf(sc) {
		cells = append(cells, r.cell(sc, kind, c))
	}
	logPath := filepath.Join(r.logs, fmt.Sprintf("%s-%s-r%d.log", kind, sc.name, rep))
	p, err := r.startServer(ctx, sc, kind, logPath)
	if err == nil {
		for _, cell := range cells {
			if ctx.Err() != nil {
				break
			}
			r.prog.start(rep, cell)
			r.record(r.measure(ctx, rep, sc, cell, p))
		}
		if serr := p.stop(); serr != nil && ctx.Err() == nil {
			r.prog.note(fmt.Sprintf("%s (%s): exit: %v; log %s", kind, sc.name, serr, logPath))
		}
		return ctx.Err()
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.notStarted(rep, cells, err)
	return nil
}

// runTurns starts each scenario's servers once and measures them in
// turns (fwTurns), so that the runs a repeat pairs are seconds apart and
// a slow spell of the machine falls on both. A server that fails to
// start fails its runs, not the benchmark.
func (r *fwRunner) runTurns(ctx context.Context) error {
	for _, sc := range r.fc.scenarios {
		procs := map[string]*process{}
		failed := map[string]error{}
		for _, kind := range sc.servers {
			p, err := r.startServer(ctx, sc, kind, filepath.Join(r.logs, fmt.Sprintf("%s-%s.log", kind, sc.name)))
			if err != nil {
				failed[kind] = err
				continue
			}
			procs[kind] = p
		}
		for _, t := range fwTurns(sc.servers, r.fc.connsOf(sc), r.fc.repeats) {
			if ctx.Err() != nil {
				break
			}
			cell := r.cell(sc, t.server, t.conns)
			if err := failed[t.server]; err != nil {
				r.notStarted(t.rep, []benchfmt.Cell{cell}, err)
				continue
			}
			r.prog.start(t.rep, cell)
			r.record(r.measure(ctx, t.rep, sc, cell, procs[t.server]))
		}
		for _, kind := range sc.servers {
			if p := procs[kind]; p != nil {
				if serr := p.stop(); serr != nil && ctx.Err() == nil {
					r.prog.note(fmt.Sprintf("%s (%s): exit: %v", kind, sc.name, serr))
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// fwTurn is one measured run of a run in turns.
type fwTurn struct {
	rep, conns int
	server     string
}

// fwTurns is the order of a run in turns: repeat by repeat (from 1),
// connection count by connection count, every server once, in an order
// that rotates from repeat to repeat.
func fwTurns(servers []string, conns []int, repeats int) []fwTurn {
	var ts []fwTurn
	n := len(servers)
	for rep := 1; rep <= repeats; rep++ {
		for _, c := range conns {
			for i := range n {
				ts = append(ts, fwTurn{rep: rep, conns: c, server: servers[(i+rep-1)%n]})
			}
		}
	}
	return ts
}

// startServer starts sc's server kind on a free loopback port, pinned to
// the server CPUs, logging to logPath.
func (r *fwRunner) startServer(ctx context.Context, sc fwScenario, kind, logPath string) (*process, error) {
	network, addr, err := fwAddr(sc)
	if err != nil {
		return nil, err
	}
	return startServerOn(ctx, network, fwServerArgv(r.serve, kind, sc, addr, r.file), addr, r.fc.serverCPUs, logPath)
}

// cell is the cell of sc's server kind at conns connections.
func (r *fwRunner) cell(sc fwScenario, kind string, conns int) benchfmt.Cell {
	return benchfmt.Cell{Scenario: sc.name, Mode: sc.mode, Depth: r.fc.depthOf(sc), Server: kind, Conns: conns, Size: sc.size}
}

// fwAddr returns a loopback address for sc's servers, with a port that
// was free a moment ago, and its network.
func fwAddr(sc fwScenario) (network, addr string, err error) {
	if !sc.udp {
		addr, err = freePort()
		return "tcp", addr, err
	}
	port, err := freeUDPPort()
	return "udp", fmt.Sprint("127.0.0.1:", port), err
}

// measure checks one answer of p, warms it up with the client and then
// measures it: the client's figures, and the server's CPU over the
// client's whole measured run.
func (r *fwRunner) measure(ctx context.Context, rep int, sc fwScenario, cell benchfmt.Cell, p *process) benchfmt.Run {
	run := benchfmt.Run{Kind: "run", Cell: cell, Repeat: rep, Placement: r.place}
	if out, err := r.command(ctx, time.Minute, r.fc.loadCPUs, fwCheckArgv(r.serve, sc, p.addr, r.file)...); err != nil {
		run.Err = fmt.Sprintf("the answer's check failed: %v: %s", err, tail0(out))
		return run
	}
	if r.fc.warmup > 0 {
		// The warm-up's figures are dropped; a failing warm-up shows again
		// in the measured run.
		r.client(ctx, sc, p.addr, cell.Conns, wholeSeconds(r.fc.warmup))
	}
	pid := p.cmd.Process.Pid
	before, err := sampleProcCPU(pid)
	if err != nil {
		run.Err = fmt.Sprintf("reading the server's CPU: %v", err)
		return run
	}
	busyBefore := r.sampleBusy()
	t0 := time.Now()
	res, err := r.client(ctx, sc, p.addr, cell.Conns, wholeSeconds(r.fc.duration))
	wall := time.Since(t0).Seconds()
	busyAfter := r.sampleBusy()
	after, perr := sampleProcCPU(pid)
	if err != nil {
		run.Err = err.Error()
		return run
	}
	if perr != nil {
		run.Err = fmt.Sprintf("reading the server's CPU: %v", perr)
		return run
	}
	cpuNS, ctxsw, _ := after.since(before)
	cpuS := float64(cpuNS) / 1e9
	run.Result = fwResult(res, cpuS, wall, float64(ctxsw))
	serverBusy, allBusy := busyBefore.since(busyAfter)
	run.Result["server_cpus_busy_s"] = serverBusy
	run.Result["all_cpus_busy_s"] = allBusy
	run.Result["bytes_per_server_cpus_busy_s"] = perBusy(res.Bytes, serverBusy)
	run.Result["bytes_per_all_cpus_busy_s"] = perBusy(res.Bytes, allBusy)
	return run
}

// client runs sc's client for seconds, pinned to the load CPUs, and
// parses its report.
func (r *fwRunner) client(ctx context.Context, sc fwScenario, addr string, conns, seconds int) (clientResult, error) {
	var aux string
	switch sc.client {
	case "wrk":
		aux = r.lua
	case "h2load":
		aux = filepath.Join(r.logs, "h2load-requests.tsv")
		defer os.Remove(aux)
	case "dnsperf":
		aux = filepath.Join(r.logs, "dnsperf-queries.txt")
		if err := os.WriteFile(aux, []byte(dnsQueries()), 0o644); err != nil {
			return clientResult{}, err
		}
		defer os.Remove(aux)
	case "grpc":
		r.seq++
		aux = fmt.Sprintf("ringbench-%d-%d", os.Getpid(), r.seq)
		// The client writes its CPU and heap profiles there.
		defer os.Remove("/tmp/" + aux + ".cpu")
		defer os.Remove("/tmp/" + aux + ".mem")
	}
	argv := r.fc.clientArgv(r.tools, sc, addr, conns, seconds, aux)
	out, cpuS, err := r.commandCPU(ctx, time.Duration(seconds)*time.Second+time.Minute, r.fc.loadCPUs, argv...)
	if err != nil {
		return clientResult{}, fmt.Errorf("%s: %v: %s", filepath.Base(argv[0]), err, tail0(out))
	}
	res, err := parseClient(sc.client, out, seconds, aux)
	res.ClientCPUs = cpuS
	return res, err
}

// parseClient reads the report of a client run for seconds; aux is the
// client's extra file (h2load's log).
func parseClient(client, out string, seconds int, aux string) (clientResult, error) {
	switch client {
	case "h2load":
		res, err := parseH2load(out)
		if err != nil {
			return res, err
		}
		f, err := os.Open(aux)
		if err != nil {
			return res, err
		}
		defer f.Close()
		res.P50us, res.P99us, res.P999us, err = parseH2loadLog(f)
		return res, err
	case "grpc":
		return parseGRPC(out, seconds)
	case "quicload":
		return parseQuicload(out)
	case "dnsperf":
		return parseDnsperf(out)
	}
	return parseWrk(out)
}

// command runs argv pinned to cpus (none: unpinned), bounded by limit,
// and returns its output, stdout then stderr.
func (r *fwRunner) command(ctx context.Context, limit time.Duration, cpus cpuSet, argv ...string) (string, error) {
	out, _, err := r.commandCPU(ctx, limit, cpus, argv...)
	return out, err
}

// commandCPU is command, and also returns the CPU-seconds the command
// used, user and system, over all its threads (its rusage, which wait4(2)
// reports; the kernel sums it from each thread's exact run time), or -1 if
// it did not run.
func (r *fwRunner) commandCPU(ctx context.Context, limit time.Duration, cpus cpuSet, argv ...string) (string, float64, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := startPinned(cmd, cpus)
	if err == nil {
		err = cmd.Wait()
	}
	cpuS := -1.0
	if st := cmd.ProcessState; st != nil {
		cpuS = (st.UserTime() + st.SystemTime()).Seconds()
	}
	return stdout.String() + stderr.String(), cpuS, err
}
