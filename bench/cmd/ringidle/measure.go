package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"time"
)

// runResult is one run of one server: what was measured and the cost per
// connection it gives. It is also a JSON line of -out (kind "run").
type runResult struct {
	Kind    string  `json:"kind"`
	Server  string  `json:"server"`
	Repeat  int     `json:"repeat"`
	N       int     `json:"n"`
	Error   string  `json:"error,omitempty"`
	Addr    string  `json:"addr,omitempty"`
	Warmup  int     `json:"warmup"`
	Talk    bool    `json:"talk"` // each connection echoed once before the measurement
	Settle  string  `json:"settle"`
	OpenSec float64 `json:"open_seconds"` // opening and echoing on the n connections
	RunSec  float64 `json:"run_seconds"`
	// Failed counts connections that no longer echoed after the
	// measurement.
	Failed int `json:"failed"`

	Base      snapshot `json:"base"`       // after warm-up, FreeOSMemory
	AfterGC   snapshot `json:"after_gc"`   // n idle connections, runtime.GC
	AfterFree snapshot `json:"after_free"` // then FreeOSMemory
	PerConn   perConn  `json:"per_conn"`
}

// perConn is the cost of one idle connection: a run's growth over its
// baseline divided by the connections.
type perConn struct {
	RSS        float64 `json:"rss"`         // VmRSS after GC
	RSSFree    float64 `json:"rss_free"`    // VmRSS after FreeOSMemory
	RssAnon    float64 `json:"rss_anon"`    // RssAnon after FreeOSMemory
	HeapInuse  float64 `json:"heap_inuse"`  // after GC
	HeapAlloc  float64 `json:"heap_alloc"`  // after GC
	StackInuse float64 `json:"stack_inuse"` // after GC
	Sys        float64 `json:"sys"`         // after GC
	Goroutines float64 `json:"goroutines"`
	Slab       float64 `json:"slab"`     // system-wide, after GC
	BaseRSS    float64 `json:"base_rss"` // the baseline's VmRSS, not divided
}

// costs computes a run's per-connection costs from its snapshots.
func (r *runResult) costs() {
	n := float64(r.N)
	d := func(after, base int64) float64 { return float64(after-base) / n }
	u := func(after, base uint64) float64 { return (float64(after) - float64(base)) / n }
	b, g, f := r.Base, r.AfterGC, r.AfterFree
	r.PerConn = perConn{
		RSS:        d(g.RSS, b.RSS),
		RSSFree:    d(f.RSS, b.RSS),
		RssAnon:    d(f.RssAnon, b.RssAnon),
		HeapInuse:  u(g.HeapInuse, b.HeapInuse),
		HeapAlloc:  u(g.HeapAlloc, b.HeapAlloc),
		StackInuse: u(g.StackInuse, b.StackInuse),
		Sys:        u(g.Sys, b.Sys),
		Goroutines: float64(g.NumGoroutine-b.NumGoroutine) / n,
		Slab:       d(g.Slab, b.Slab),
		BaseRSS:    float64(b.RSS),
	}
}

// measureOne runs spec once: child, warm-up, baseline, n idle connections,
// measurement, check, stop.
func measureOne(ctx context.Context, cfg config, spec serverSpec, repeat int, stderr io.Writer) (res runResult) {
	start := time.Now()
	res = runResult{Kind: "run", Server: spec.name, Repeat: repeat, N: cfg.n, Warmup: cfg.warmup, Talk: cfg.talk, Settle: cfg.settle.String()}
	defer func() { res.RunSec = time.Since(start).Seconds() }()
	fail := func(format string, args ...any) runResult {
		res.Error = fmt.Sprintf(format, args...)
		return res
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.runLimit)
	defer cancel()

	c, err := startChild(spec, cfg.profileDir != "", stderr)
	if err != nil {
		return fail("%v", err)
	}
	// The child goes first, then the clients: the server's side closes
	// first and keeps the TIME_WAIT states, on a port no later run uses,
	// and the client ports are free at once.
	var conns []net.Conn
	defer func() {
		c.stop()
		closeConns(conns)
	}()
	res.Addr = c.addr

	if err := warmUp(ctx, c.addr, cfg.warmup); err != nil {
		return fail("warm-up: %v", err)
	}
	if err := sleep(ctx, cfg.settle); err != nil {
		return fail("settling: %v", err)
	}
	if res.Base, err = c.measure("free"); err != nil {
		return fail("baseline: %v", err)
	}
	if err := c.profile(cfg.profileDir, spec, repeat, "base"); err != nil {
		return fail("baseline heap profile: %v", err)
	}

	t0 := time.Now()
	cs, err := openConns(ctx, c.addr, cfg.n, cfg.sources, cfg.dialers, cfg.talk)
	if err != nil {
		return fail("opening connections: %v", err)
	}
	conns = cs
	res.OpenSec = time.Since(t0).Seconds()
	if err := sleep(ctx, cfg.settle); err != nil {
		return fail("settling: %v", err)
	}
	// Every connection must have been accepted, not be waiting in the
	// listener's queue (which only the check after the measurement would
	// catch, too late, for connections that did not talk).
	if q, err := acceptBacklog(c.addr); err != nil {
		return fail("reading the accept queue: %v", err)
	} else if q != 0 {
		return fail("%d connections still in the accept queue after %v", q, cfg.settle)
	}
	if res.AfterGC, err = c.measure("gc"); err != nil {
		return fail("measuring: %v", err)
	}
	if res.AfterFree, err = c.measure("free"); err != nil {
		return fail("measuring: %v", err)
	}
	if err := c.profile(cfg.profileDir, spec, repeat, "idle"); err != nil {
		return fail("heap profile: %v", err)
	}
	res.costs()

	failed, err := checkConns(ctx, cs, cfg.dialers)
	res.Failed = failed
	if err != nil {
		return fail("%d of %d connections no longer echo after the measurement; first: %v", failed, cfg.n, err)
	}
	return res
}

// profile has the child write a heap profile to
// dir/SERVER-REPEAT-WHAT.pprof, if dir is set.
func (c *child) profile(dir string, spec serverSpec, repeat int, what string) error {
	if dir == "" {
		return nil
	}
	path, err := filepath.Abs(filepath.Join(dir, fmt.Sprintf("%s-%d-%s.pprof", spec.name, repeat, what)))
	if err != nil {
		return err
	}
	_, err = c.measure("profile " + path)
	return err
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// measureAll runs every server cfg.repeats times, the repeats interleaved,
// and reports the medians.
func measureAll(cfg config, stdout, stderr io.Writer) error {
	start := time.Now()
	// The client connections, plus a margin for the warm-up and the
	// runtime's own descriptors.
	if err := raiseNofile(uint64(cfg.n) + 1024); err != nil {
		return err
	}
	ctx := context.Background()
	var runs []runResult
	for rep := 1; rep <= cfg.repeats; rep++ {
		for _, spec := range cfg.servers {
			r := measureOne(ctx, cfg, spec, rep, stderr)
			runs = append(runs, r)
			logRun(stderr, r)
		}
	}
	sums := summarize(cfg, runs)
	wall := time.Since(start)
	writeTable(stdout, cfg, sums, wall)
	if cfg.out != "" {
		if err := writeJSONLines(cfg.out, runs, sums); err != nil {
			return err
		}
	}
	for _, s := range sums {
		if s.Error != "" && !s.Unavailable {
			return fmt.Errorf("%s failed: %s", s.Server, s.Error)
		}
	}
	return nil
}

// logRun prints a run's outcome on one line of stderr.
func logRun(w io.Writer, r runResult) {
	if r.Error != "" {
		fmt.Fprintf(w, "ringidle: %s #%d: %s (%.1f s)\n", r.Server, r.Repeat, r.Error, r.RunSec)
		return
	}
	p := r.PerConn
	fmt.Fprintf(w, "ringidle: %s #%d: RSS %.0f B/conn (scavenged %.0f), heap %.0f, stack %.0f, goroutines %.2f/conn; baseline RSS %.1f MiB; opened in %.2f s (%.1f s)\n",
		r.Server, r.Repeat, p.RSS, p.RSSFree, p.HeapInuse, p.StackInuse, p.Goroutines, p.BaseRSS/(1<<20), r.OpenSec, r.RunSec)
}
