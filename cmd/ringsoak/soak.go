//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ringpoll/ringpoll"
)

// runSpec is one planned engine/API run.
type runSpec struct {
	engine ringpoll.Engine
	api    string
	index  int    // position in the plan, for the run's seed
	skip   string // why the run cannot happen, if it cannot
}

// planRuns lists the runs cfg asks for, marking the io_uring ones as
// skipped where io_uring cannot run.
func planRuns(cfg *config) []runSpec {
	uerr := ringpoll.UringStatus()
	var specs []runSpec
	for _, e := range cfg.engines {
		for _, api := range cfg.apis {
			s := runSpec{engine: e, api: api, index: len(specs)}
			if e != ringpoll.EngineEpoll && e != ringpoll.EngineAuto && uerr != nil {
				s.skip = "io_uring unavailable: " + uerr.Error()
			}
			specs = append(specs, s)
		}
	}
	return specs
}

// soak runs every planned run in turn, printing each run's verdict to
// progress as it ends, and returns the report.
func soak(ctx context.Context, cfg *config, progress io.Writer) *Report {
	start := time.Now()
	warmUp()
	rep := &Report{Seed: cfg.seed, Duration: cfg.duration.String(), Uring: "ok"}
	if err := ringpoll.UringStatus(); err != nil {
		rep.Uring = err.Error()
	}
	specs := planRuns(cfg)
	active := 0
	for _, s := range specs {
		if s.skip == "" {
			active++
		}
	}
	slice := cfg.duration
	if active > 0 {
		slice = cfg.duration / time.Duration(active)
	}
	rep.Passed = true
	for _, s := range specs {
		var r *RunReport
		switch {
		case s.skip != "":
			r = &RunReport{Engine: s.engine.String(), API: s.api, Skipped: s.skip, Passed: true}
		case ctx.Err() != nil:
			rep.Interrupted = true
			r = &RunReport{Engine: s.engine.String(), API: s.api, Skipped: "interrupted"}
		default:
			r = runOne(ctx, cfg, s, slice, progress)
		}
		rep.Runs = append(rep.Runs, r)
		rep.Passed = rep.Passed && r.Passed
		writeRun(progress, r)
	}
	if ctx.Err() != nil {
		rep.Interrupted = true
		rep.Passed = false
	}
	rep.Wall = roundDur(time.Since(start))
	return rep
}

// runOne runs the echo server for one engine and API, drives it with the
// client mix for slice, shuts it down and checks for leaks.
func runOne(ctx context.Context, cfg *config, s runSpec, slice time.Duration, progress io.Writer) *RunReport {
	seed := splitmix(cfg.seed ^ splitmix(uint64(s.index)))
	r := &RunReport{Engine: s.engine.String(), API: s.api, Seed: seed}
	fmt.Fprintf(progress, "== %s/%s: %s of traffic\n", s.engine, s.api, slice)

	base := takeBaseline()
	srv, err := startServer(s.engine, s.api, cfg)
	if err != nil {
		r.Failures = append(r.Failures, "starting the server: "+err.Error())
		return r
	}
	r.Ran = srv.ln.Stats().Engine.String()
	idle := openFDs() // the listening server's descriptors, before any client

	tctx, cancel := context.WithTimeout(ctx, slice)
	defer cancel()
	t := newTally()
	env := &clientEnv{
		addr:   srv.addr(),
		cfg:    cfg,
		ctx:    tctx,
		tally:  t,
		dialer: net.Dialer{Timeout: cfg.ioTimeout},
		nrCap:  neverReadCap(cfg),
		ports:  newPortBook(),
	}
	trafficStart := time.Now()
	var wg sync.WaitGroup
	// Every lane, slowloris client and the burst lane draws from its own
	// generator, seeded from the run's seed: the same -seed replays the
	// same clients with the same streams (timing aside).
	for i := range cfg.clients {
		rng := rand.New(rand.NewPCG(seed, 1+uint64(i)))
		wg.Go(func() { env.lane(i, rng) })
	}
	for i := range cfg.slowloris {
		rng := rand.New(rand.NewPCG(seed, 1<<32+uint64(i)))
		wg.Go(func() {
			if res, ok := env.slowloris(rng, rng.Uint64()); ok {
				t.add(res)
			}
		})
	}
	if cfg.burst > 0 {
		rng := rand.New(rand.NewPCG(seed, 2<<32))
		wg.Go(func() { env.burstLane(rng) })
	}

	<-tctx.Done()
	// Clients finish what they started; every operation has a deadline,
	// so they end within a few I/O timeouts unless something hangs.
	finished := waitGroupTimeout(&wg, 3*cfg.ioTimeout)
	r.Traffic = roundDur(time.Since(trafficStart))
	if !finished {
		r.Failures = append(r.Failures, fmt.Sprintf("clients still running %s after the traffic time (a hang?)", 3*cfg.ioTimeout))
		r.HangDump = goroutineDump()
	}

	teardown := time.Now()
	if finished {
		// Every client closed its end: the server must close its ends
		// soon, before the shutdown would close them anyway.
		linger := checkLinger(idle, cfg.linger, func(fd int) string { return srv.describeFD(fd, env.ports) })
		r.Linger = &linger
	}
	sr := srv.shutdown(cfg.shutdownTimeout)
	r.Shutdown = roundDur(sr.Took)
	if sr.Err != nil {
		r.ShutdownError = sr.Err.Error()
	}
	if !finished {
		// The shutdown closed the server's side: stuck clients end now.
		waitGroupTimeout(&wg, cfg.ioTimeout)
	}
	r.ServerEchoed = srv.echoed.Load()
	r.ServerAccepted = srv.accepted.Load()
	r.ServerErrors = srv.errorCounts()

	stats := checkStats(srv.ln, cfg.settle)
	fds := checkFDs(base.fds, cfg.settle)
	gs := checkGoroutines(base.goroutines, cfg.settle)
	r.Stats, r.FDs, r.Goroutines = &stats, &fds, &gs
	r.Teardown = roundDur(time.Since(teardown))

	r.fill(t)
	r.judge()
	return r
}

// neverReadCap is how much a never-reading client may write before its
// writes must have blocked: both sockets' send and receive buffers at
// their largest (net.ipv4.tcp_wmem and tcp_rmem), the server's input and
// output limits, and 16 MiB of slack.
func neverReadCap(cfg *config) int64 {
	rmem := sysctlMax("/proc/sys/net/ipv4/tcp_rmem", 32<<20)
	wmem := sysctlMax("/proc/sys/net/ipv4/tcp_wmem", 4<<20)
	return 2*(rmem+wmem) + int64(cfg.inputHW+cfg.outputHW) + 16<<20
}

// sysctlMax reads the last field of a "min default max" sysctl file, or
// returns def.
func sysctlMax(path string, def int64) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return def
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return def
	}
	n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil || n <= 0 {
		return def
	}
	return n
}
