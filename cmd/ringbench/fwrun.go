//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	place string
	out   *os.File // results.jsonl
	prog  *progress
	runs  []benchfmt.Run
	seq   int // numbers the gRPC client's profile names
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
		logs: logs, place: placement}
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
	for _, s := range sums {
		if err := writeJSONLine(jl, s); err != nil {
			return 1, err
		}
	}
	if err := jl.Sync(); err != nil {
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

// fwPrepare finds the clients the scenarios need, installing wrk and
// h2load when missing, and builds frameserve, ringplot, quicload and
// grpc-go's benchmark client in bin. It drops the scenarios whose client
// is missing, noting why, and returns the clients' paths and versions.
func fwPrepare(ctx context.Context, fc *fwConfig, bin string, note func(string)) (map[string]string, []string, error) {
	// The clients: wrk and h2load from Debian, the gRPC one and quicload
	// built.
	var want []string
	for _, sc := range fc.scenarios {
		if _, deb := debPackages[sc.client]; deb && !slices.Contains(want, sc.client) {
			want = append(want, sc.client)
		}
	}
	tools, missing := systemInstaller(fc.stderr).ensure(ctx, want)
	benchDir := filepath.Join(fc.src, "bench")
	fmt.Fprintf(fc.stderr, "ringbench: building frameserve, ringplot, quicload and grpc-go's benchmark client in %s\n", benchDir)
	pkgs := []string{"./cmd/frameserve", "./cmd/ringplot"}
	quic := slices.ContainsFunc(fc.scenarios, func(s fwScenario) bool { return s.client == "quicload" })
	if quic {
		pkgs = append(pkgs, "./cmd/quicload")
		tools["quicload"] = filepath.Join(bin, "quicload")
	}
	if err := goBuild(ctx, benchDir, bin, pkgs...); err != nil {
		return nil, nil, fmt.Errorf("the framework servers are in the bench module, which did not build: %w", err)
	}
	if slices.ContainsFunc(fc.scenarios, func(s fwScenario) bool { return s.client == "grpc" }) {
		tools["grpc"] = filepath.Join(bin, "grpcbench")
		if err := goBuildOne(ctx, benchDir, tools["grpc"], "google.golang.org/grpc/benchmark/client"); err != nil {
			missing["grpc"] = err
		}
	}
	fc.scenarios = slices.DeleteFunc(fc.scenarios, func(sc fwScenario) bool {
		if err := missing[sc.client]; err != nil {
			note(fmt.Sprintf("%s is left out: %v", sc.name, err))
			return true
		}
		return false
	})
	if len(fc.scenarios) == 0 {
		return nil, nil, errors.New("no scenario left to run")
	}
	var versions []string
	if slices.ContainsFunc(fc.scenarios, func(s fwScenario) bool { return slices.Equal(s.servers, hertzServers) }) {
		versions = append(versions, "Hertz "+moduleVersion(filepath.Join(benchDir, "go.mod"), "github.com/cloudwego/hertz"))
	}
	for _, t := range want {
		if tools[t] != "" {
			versions = append(versions, toolVersion(ctx, tools[t], map[string]string{"wrk": "-v", "h2load": "--version"}[t]))
		}
	}
	if tools["grpc"] != "" {
		versions = append(versions, "grpc-go "+moduleVersion(filepath.Join(benchDir, "go.mod"), "google.golang.org/grpc")+" (benchmark/client)")
	}
	if quic {
		versions = append(versions, "quicload (bench/cmd/quicload, quic-go "+
			moduleVersion(filepath.Join(benchDir, "go.mod"), "github.com/quic-go/quic-go")+" on std UDP sockets, as the servers' quic-go)")
	}

	return tools, versions, nil
}

// warmupText describes the warm-up the clients run.
func warmupText(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	return fmt.Sprintf("%ds, as the clients take whole seconds", wholeSeconds(d))
}

// goVersion is the go command's version, which built the servers.
func goVersion() string {
	out, err := exec.Command(goTool(), "env", "GOVERSION").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// goBuildOne builds one package, of dir's module or one it requires, to
// the file out.
func goBuildOne(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", out, pkg)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s (in %s): %v: %s", pkg, dir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// makeFile writes a temporary file of size pseudo-random bytes (so no
// layer can compress it) and returns its path.
func makeFile(size int64) (string, error) {
	f, err := os.CreateTemp("", "ringbench-file-*.bin")
	if err != nil {
		return "", err
	}
	rng := rand.NewChaCha8([32]byte{'r', 'i', 'n', 'g'})
	buf := make([]byte, 1<<20)
	for n := int64(0); n < size && err == nil; n += int64(len(buf)) {
		rng.Read(buf)
		_, err = f.Write(buf[:min(int64(len(buf)), size-n)])
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// run runs every repeat: within a repeat every scenario, and within a
// scenario every server, in an order that rotates from repeat to repeat,
// each started afresh and measured at each connection count.
func (r *fwRunner) run(ctx context.Context) error {
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
		cells = append(cells, benchfmt.Cell{Scenario: sc.name, Mode: sc.mode, Depth: r.fc.depthOf(sc),
			Server: kind, Conns: c, Size: sc.size})
	}
	network, addr, err := fwAddr(sc)
	if err == nil {
		logPath := filepath.Join(r.logs, fmt.Sprintf("%s-%s-r%d.log", kind, sc.name, rep))
		var p *process
		argv := fwServerArgv(r.serve, kind, sc, addr, r.file)
		if p, err = startServerOn(ctx, network, argv, addr, r.fc.serverCPUs, logPath); err == nil {
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
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	for _, cell := range cells {
		r.prog.start(rep, cell)
		r.record(benchfmt.Run{Kind: "run", Cell: cell, Repeat: rep, Placement: r.place,
			Err: fmt.Sprintf("server did not start: %v", err)})
	}
	return nil
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

// record keeps a run, writes it out at once and shows it.
func (r *fwRunner) record(run benchfmt.Run) {
	r.runs = append(r.runs, run)
	writeJSONLine(r.out, run)
	r.prog.done(run)
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

// busySample is /proc/stat's times of the server's CPUs and of the
// server's and client's CPUs together. On loopback the kernel's TCP work
// for a connection runs in softirqs on whichever CPU raised them, charged
// to whatever thread ran there: the server's threads' CPU (schedstat)
// moves with that split, the CPUs' busy time does not.
type busySample struct {
	server, all cpuTicks
	ok          bool
}

// sampleBusy reads the CPUs' times, if both CPU sets are known.
func (r *fwRunner) sampleBusy() busySample {
	if len(r.fc.serverCPUs) == 0 || len(r.fc.loadCPUs) == 0 {
		return busySample{}
	}
	all := slices.Concat(r.fc.serverCPUs, r.fc.loadCPUs)
	slices.Sort(all)
	all = slices.Compact(all)
	s, err1 := readCPUTicks(r.fc.serverCPUs)
	a, err2 := readCPUTicks(all)
	return busySample{server: s, all: a, ok: err1 == nil && err2 == nil}
}

// since returns the busy CPU-seconds of the server's CPUs and of all,
// from b to a later sample (cpuTicks.busySince: the wall time between
// them less the idle time), or -1 where unknown.
func (b busySample) since(later busySample) (server, all float64) {
	busy := func(x, y cpuTicks) float64 {
		wall := y.at.Sub(x.at).Seconds()
		if wall <= 0 {
			return -1
		}
		return y.busySince(x) * wall
	}
	if !b.ok || !later.ok {
		return -1, -1
	}
	return busy(b.server, later.server), busy(b.all, later.all)
}

// perBusy returns bytes per busy second, or -1 where either is unknown.
func perBusy(bytes, busy float64) float64 {
	if bytes < 0 || busy <= 0 {
		return -1
	}
	return bytes / busy
}

// fwResult is a run's result, in the fields of ringload's result that
// ringbench summarizes (so the tables and charts read both), plus the
// clients' own.
func fwResult(res clientResult, cpuS, wall, ctxsw float64) map[string]any {
	per := func(x, y float64) float64 {
		if x < 0 || y <= 0 {
			return -1
		}
		return x / y
	}
	bytesPerS := -1.0
	if res.Bytes >= 0 {
		bytesPerS = per(res.Bytes, res.Seconds)
	}
	// The client's CPU spans its whole run, as the server's does; both
	// processes' together is what the load cost the machine in user
	// threads (on loopback the kernel's work for either side is charged
	// to whichever thread ran it).
	both := -1.0
	if cpuS >= 0 && res.ClientCPUs >= 0 {
		both = cpuS + res.ClientCPUs
	}
	mib := -1.0
	if res.Bytes >= 0 {
		mib = res.Bytes / (1 << 20)
	}
	return map[string]any{
		"req_per_s": res.ReqPerS, "p50_us": res.P50us, "p99_us": res.P99us, "p999_us": res.P999us, "p9999_us": -1,
		"requests": res.Requests, "window_s": res.Seconds, "bytes": res.Bytes, "bytes_per_s": bytesPerS,
		"server_cpu_s": cpuS, "server_cpu_cores": per(cpuS, wall),
		"server_cpu_us_per_req":  per(cpuS*1e6, res.Requests),
		"req_per_server_cpu_s":   per(res.Requests, cpuS),
		"bytes_per_server_cpu_s": per(res.Bytes, cpuS),
		"server_cpu_ms_per_mib":  per(cpuS*1e3, mib),
		"client_cpu_s":           res.ClientCPUs,
		"client_cpu_us_per_req":  per(res.ClientCPUs*1e6, res.Requests),
		"client_cpu_ms_per_mib":  per(res.ClientCPUs*1e3, mib),
		"both_cpu_us_per_req":    per(both*1e6, res.Requests),
		"both_cpu_ms_per_mib":    per(both*1e3, mib),
		"req_per_both_cpu_s":     per(res.Requests, both),
		"bytes_per_both_cpu_s":   per(res.Bytes, both),
		"ctx_switches_per_req":   per(ctxsw, res.Requests),
		"syscalls_per_req":       -1, "loop_syscalls_per_req": -1,
		// io_errors feeds summarize's error count.
		"errors": res.Errors, "io_errors": res.Errors, "error_text": res.ErrorText,
	}
}

// runErrors returns the client's error count in a run's result.
func runErrors(run benchfmt.Run) int64 {
	if v, ok := run.Result["errors"].(float64); ok {
		return int64(v)
	}
	if v, ok := run.Result["errors"].(int64); ok {
		return v
	}
	return 0
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
