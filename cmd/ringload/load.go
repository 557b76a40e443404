//go:build linux

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
	"github.com/ringpoll/ringpoll/internal/hdr"
	"github.com/ringpoll/ringpoll/internal/kvproto"
)

// load runs one measurement against cfg.addr.
func load(ctx context.Context, cfg config) (*result, error) {
	res := &result{
		Addr: cfg.addr, Conns: cfg.conns, Size: cfg.size, Proto: cfg.proto, Depth: cfg.depth,
		OfferedRate: cfg.rate, WarmupS: cfg.warmup.Seconds(), KVWrites: cfg.kvWrites, Outstanding: cfg.outstanding,
		ServerPID: cfg.serverPID, Syscalls: -1, SyscallsPerReq: -1,
		ServerCPUusPerReq: -1, ReqPerServerCPUs: -1, CtxSwitchesPerReq: -1,
		ServerUserUsPerReq: -1, ServerKernelUsPerReq: -1,
		LoopSyscalls: -1, LoopSyscallsPerReq: -1,
		ServerRSSBase: -1, ServerRSSIdle: -1, ServerRSSEnd: -1,
	}
	var rssErr error
	serverRSS := func() int64 {
		if cfg.serverPID == 0 {
			return -1
		}
		n, err := readRSS(cfg.serverPID)
		if err != nil {
			rssErr = cmp.Or(rssErr, err)
			return -1
		}
		return n
	}
	if cfg.serverPID != 0 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task", cfg.serverPID)); err != nil {
			return nil, fmt.Errorf("-server-pid %d: %w", cfg.serverPID, err)
		}
	}
	res.ServerRSSBase = serverRSS()

	// Connect everything first, at most 64 dials at a time (with -prime,
	// each dial followed by its first echo).
	workers := make([]*worker, cfg.conns)
	var firstErr atomic.Pointer[string]
	noteErr := func(err error) {
		s := err.Error()
		firstErr.CompareAndSwap(nil, &s)
	}
	var dialErrs atomic.Int32
	var primeVerify atomic.Uint64
	var firstPrimeVerify atomic.Pointer[string]
	var dwg sync.WaitGroup
	sem := make(chan struct{}, 64)
	dialers := make([]*net.Dialer, max(cfg.sources, 1))
	for i := range dialers {
		dialers[i] = sourceDialer(cfg, i)
	}
	for i := range workers {
		dwg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; dwg.Done() }()
			c, err := dialers[i%len(dialers)].DialContext(ctx, "tcp", cfg.addr)
			if err != nil {
				dialErrs.Add(1)
				noteErr(fmt.Errorf("dial: %w", err))
				return
			}
			w := &worker{id: uint64(i), conn: c, cfg: &cfg}
			if cfg.prime {
				if err := w.prime(time.Now().Add(cfg.dialTimeout)); err != nil {
					c.Close()
					if errors.Is(err, errPrimeMismatch) {
						primeVerify.Add(1)
						s := err.Error()
						firstPrimeVerify.CompareAndSwap(nil, &s)
						noteErr(err)
						return
					}
					dialErrs.Add(1)
					noteErr(fmt.Errorf("first echo: %w", err))
					return
				}
			}
			workers[i] = w
		}()
	}
	dwg.Wait()
	res.DialErrors = int(dialErrs.Load())
	res.VerifyErrors = primeVerify.Load()
	if p := firstPrimeVerify.Load(); p != nil {
		res.FirstVerifyError = *p
	}
	live := workers[:0]
	for _, w := range workers {
		if w != nil {
			live = append(live, w)
		}
	}
	workers = live
	if len(workers) == 0 {
		return nil, fmt.Errorf("all %d connections failed: %s", cfg.conns, *firstErr.Load())
	}
	closeAll := func() {
		for _, w := range workers {
			if tc, ok := w.conn.(*net.TCPConn); ok && cfg.closeReset {
				tc.SetLinger(0)
			}
			w.conn.Close()
		}
	}
	defer closeAll()
	// Every connection open (with -prime, each has echoed once), none
	// loaded yet.
	res.ServerRSSIdle = serverRSS()

	// The slowloris crowd, connected before the load starts.
	crowd, err := startSlowloris(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		crowd.stop()
		res.SlowlorisConns, res.SlowlorisBytes, res.SlowlorisErrors = crowd.conns, crowd.bytes.Load(), crowd.errs.Load()
		if p := crowd.firstErr.Load(); p != nil {
			res.FirstSlowlorisError = *p
		}
	}()

	// A deadline well past the end, so no worker outlives the run even if
	// the server stops answering.
	hard := time.Now().Add(cfg.warmup + cfg.duration + 10*time.Second)
	for _, w := range workers {
		w.conn.SetDeadline(hard)
	}
	sh := &shared{stop: make(chan struct{}), budget: cfg.requests, spent: make(chan struct{})}
	if cfg.outstanding > 0 {
		sh.slots = make(chan struct{}, cfg.outstanding)
	}
	if cfg.proto == "kv" {
		res.Size = kvproto.RecordSize
	}
	if cfg.serverPID != 0 {
		threads := watchThreads(cfg.serverPID, 10*time.Millisecond)
		defer func() { res.ServerThreadsMax = threads.end() }()
	}
	var pace *pacer
	if cfg.rate > 0 {
		// A pacer sends the batches, evenly spaced: each connection's at
		// its turns, once every len(workers) turns.
		slots := make([]*pacedSlot, len(workers))
		for i, w := range workers {
			w.slot = &pacedSlot{send: func() error {
				_, err := w.conn.Write(w.wbuf)
				if err != nil {
					w.conn.Close() // ends the read that waits for the reply
				}
				return err
			}}
			slots[i] = w.slot
		}
		pace = startPacer(slots, cfg.rate/float64(cfg.depth))
		defer pace.end()
		for _, w := range workers {
			w.pacer = pace
		}
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.proto == "kv" {
				w.loopKV(sh)
				return
			}
			w.loop(sh)
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	stopWorkers := func() {
		sh.phase.Store(phaseStop)
		close(sh.stop)
		if pace == nil {
			select {
			case <-finished:
				return
			case <-time.After(time.Second):
			}
		}
		// Unblock whoever waits on a reply that will not come (paced
		// connections wait in reads for batches the pacer will no
		// longer send), and a pacer blocked in a write.
		past := time.Now().Add(-time.Second)
		for _, w := range workers {
			w.conn.SetDeadline(past)
		}
		if pace != nil {
			pace.end()
		}
		select {
		case <-finished:
			return
		case <-time.After(2 * time.Second):
		}
		closeAll()
		<-finished
	}

	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-sh.spent:
			return true // -requests reached
		case <-ctx.Done():
			return false
		case <-finished:
			return false // every connection failed
		}
	}
	if cfg.warmup > 0 && !sleep(cfg.warmup) {
		stopWorkers()
		return nil, windowAborted(ctx, workers, res, &firstErr)
	}

	// The window.
	var before procSample
	var beforeErr error
	if cfg.serverPID != 0 {
		before, beforeErr = sampleProc(cfg.serverPID)
	}
	var loopBefore benchfmt.LoopTotals
	var loopErr error
	if cfg.serverStats != "" {
		loopBefore, loopErr = benchfmt.AskLoopTotals(cfg.serverPID, cfg.serverStats, 0, cfg.statsWait)
	}
	selfBefore, selfBeforeErr := sampleProc(os.Getpid())
	statBefore, statBeforeErr := readCPUStat()
	// The window's clock starts before requests count and stops after
	// they stopped counting, so a stall here can only lengthen the window
	// over the requests counted, never count requests outside it.
	t0 := time.Now()
	sh.phase.Store(phaseMeasure)
	completed := sleep(cfg.duration)
	var after procSample
	var afterErr error
	if cfg.serverPID != 0 {
		after, afterErr = sampleProc(cfg.serverPID)
		res.ServerRSSEnd = serverRSS()
	}
	selfAfter, selfAfterErr := sampleProc(os.Getpid())
	statAfter, statAfterErr := readCPUStat()
	sh.phase.Store(phaseTail)
	window := time.Since(t0)
	var loopAfter benchfmt.LoopTotals
	if cfg.serverStats != "" && loopErr == nil {
		loopAfter, loopErr = benchfmt.AskLoopTotals(cfg.serverPID, cfg.serverStats, loopBefore.Seq, cfg.statsWait)
	}
	var pr perfResult
	if cfg.serverPID != 0 {
		if completed {
			// The syscalls' own window, under the load that goes on.
			pr = runPerf(ctx, cfg.perf, cfg.serverPID, min(cfg.duration, syscallWindow))
		} else {
			pr.err = errors.New("window ended early (all connections failed)")
		}
	}
	stopWorkers()
	if !completed && ctx.Err() != nil {
		return nil, windowAborted(ctx, workers, res, &firstErr)
	}

	// Client side.
	res.WindowS = window.Seconds()
	var hist hdr.Histogram
	for _, w := range workers {
		res.Requests += w.requests
		res.VerifyErrors += w.verifyErrs
		if res.FirstVerifyError == "" {
			res.FirstVerifyError = w.firstVerify
		}
		if w.err != nil {
			res.IOErrors++
			noteErr(w.err)
		}
		hist.Merge(&w.hist)
	}
	if p := firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	res.ReqPerS = float64(res.Requests) / window.Seconds()
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	res.P50us = us(hist.Quantile(0.50))
	res.P99us = us(hist.Quantile(0.99))
	res.P999us = us(hist.Quantile(0.999))
	res.P9999us = us(hist.Quantile(0.9999))
	res.MaxUs = us(hist.Max())

	// The machine.
	res.ClientCPUCores, res.MachineCPUCores, res.OtherCPUCores = -1, -1, -1
	if selfBeforeErr == nil && selfAfterErr == nil {
		cpu, _, _ := selfAfter.since(selfBefore)
		res.ClientCPUCores = float64(cpu) / float64(window.Nanoseconds())
	}
	if statBeforeErr == nil && statAfterErr == nil && statAfter.total > statBefore.total {
		res.MachineCPUCores = float64(statAfter.ncpu) * float64(statAfter.busy-statBefore.busy) /
			float64(statAfter.total-statBefore.total)
	}

	// Server side.
	if cfg.serverPID == 0 {
		if res.ClientCPUCores >= 0 && res.MachineCPUCores >= 0 {
			res.OtherCPUCores = res.MachineCPUCores - res.ClientCPUCores
		}
		return res, nil
	}
	var notes []string
	if beforeErr != nil || afterErr != nil {
		notes = append(notes, fmt.Sprintf("reading /proc/%d: %v", cfg.serverPID, errors.Join(beforeErr, afterErr)))
	} else {
		cpu, ctxsw, gone := after.since(before)
		user, sys := after.ticksSince(before)
		res.ServerThreads = len(after.threads)
		res.ServerCPUns = cpu
		res.CtxSwitches = ctxsw
		res.ServerCPUTicks = user + sys
		res.ServerCPUCores = float64(cpu) / float64(window.Nanoseconds())
		if res.Requests > 0 {
			res.ServerCPUusPerReq = float64(cpu) / 1e3 / float64(res.Requests)
			res.CtxSwitchesPerReq = float64(ctxsw) / float64(res.Requests)
			if user+sys > 0 {
				res.ServerUserUsPerReq, res.ServerKernelUsPerReq = splitCPU(res.ServerCPUusPerReq, user, sys)
			}
		}
		if cpu > 0 {
			res.ReqPerServerCPUs = float64(res.Requests) / (float64(cpu) / 1e9)
		}
		if gone > 0 {
			notes = append(notes, fmt.Sprintf("%d server threads exited during the window; their CPU time in it is missing", gone))
		}
	}
	if cfg.serverStats != "" {
		if loopErr != nil {
			notes = append(notes, "library counters: "+loopErr.Error())
		} else {
			res.LoopSyscalls = int64(loopAfter.Syscalls - loopBefore.Syscalls)
			if res.Requests > 0 {
				res.LoopSyscallsPerReq = float64(res.LoopSyscalls) / float64(res.Requests)
			}
		}
	}
	if rssErr != nil {
		notes = append(notes, "resident memory: "+rssErr.Error())
	}
	res.ServerNote = strings.Join(notes, "; ")
	if res.ClientCPUCores >= 0 && res.MachineCPUCores >= 0 && res.ServerCPUns > 0 {
		res.OtherCPUCores = res.MachineCPUCores - res.ClientCPUCores - res.ServerCPUCores
	}

	if pr.err != nil {
		res.SyscallsNote = pr.err.Error()
		return res, nil
	}
	res.Syscalls = pr.count
	res.SyscallsWindowS = pr.window.Seconds()
	if res.Requests > 0 {
		// Rates: perf counted for its own window, after ours, under the
		// same load.
		res.SyscallsPerReq = (float64(pr.count) / pr.window.Seconds()) / res.ReqPerS
	}
	return res, nil
}

// windowAborted explains a run that ended before its window did.
func windowAborted(ctx context.Context, workers []*worker, res *result, firstErr *atomic.Pointer[string]) error {
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	for _, w := range workers {
		if w.err != nil {
			return fmt.Errorf("all %d connections failed before the window ended (%d dial errors); first: %v", res.Conns, res.DialErrors, w.err)
		}
	}
	if p := firstErr.Load(); p != nil {
		return fmt.Errorf("all connections ended before the window did; first error: %s", *p)
	}
	return errors.New("all connections ended before the window did")
}

// maxSources is the most source addresses -sources spreads over.
const maxSources = 250

// ipBindAddressNoPort is IP_BIND_ADDRESS_NO_PORT (linux/in.h), which the
// syscall package lacks.
const ipBindAddressNoPort = 24

// sourceDialer returns the dialer of source address number src of
// cfg.sources, 127.0.0.1 plus src. With one source the kernel picks the
// address and port as usual. With several, each dial binds its address
// with IP_BIND_ADDRESS_NO_PORT, so that the port is still chosen at
// connect, from the whole 4-tuple: connect(2) walks the ports already in
// use towards the same destination from the same address to find a free
// one (__inet_hash_connect), which at 19,000 connections from one
// address costs a millisecond or more of kernel time a connection.
func sourceDialer(cfg config, src int) *net.Dialer {
	d := &net.Dialer{Timeout: cfg.dialTimeout}
	if cfg.sources <= 1 {
		return d
	}
	d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+src))}
	d.Control = func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
		}); err != nil {
			return err
		}
		return os.NewSyscallError("setsockopt", serr)
	}
	return d
}
