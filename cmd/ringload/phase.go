//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
	"github.com/ringpoll/ringpoll/internal/hdr"
)

// quiesceLimit bounds how long a load that must end at rest waits for its
// requests in flight.
const quiesceLimit = 10 * time.Second

// firstLimit bounds -first-wait: the connections' deadline is 10 s past
// the window.
const firstLimit = 5 * time.Second

// waitFirst waits for the window's first completed request, for at most
// d; it reports false if the run ended (ctx, or every connection failed)
// meanwhile.
func waitFirst(ctx context.Context, sh *shared, finished <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-sh.some:
	case <-t.C:
	case <-ctx.Done():
		return false
	case <-finished:
		return false
	}
	return true
}

// testWindowEmpty, if set, is called when a window ended with no request
// completed, before it waits for the first.
var testWindowEmpty func()

// chanClosed reports whether c is closed.
func chanClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// runPhase runs one load on workers, fresh workers over open connections:
// warm-up, window, perf's window, and its figures into res. With rest it
// ends at rest (quiesce), so that another load can follow on the same
// connections; rested says whether it did. rss reads the server's
// resident memory.
func runPhase(ctx context.Context, cfg config, workers []*worker, res *result, rest bool, rss *rssReader) (rested bool, err error) {
	// A deadline well past the end, so no worker outlives the run even if
	// the server stops answering.
	hard := time.Now().Add(cfg.warmup + cfg.duration + 10*time.Second)
	for _, w := range workers {
		w.conn.SetDeadline(hard)
	}
	sh := &shared{stop: make(chan struct{}), budget: cfg.requests, spent: make(chan struct{}), some: make(chan struct{})}
	if cfg.outstanding > 0 {
		sh.slots = make(chan struct{}, cfg.outstanding)
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

	// stopWorkers ends the load, at rest if rest (quiesce); it reports
	// whether it did.
	stopWorkers := func() bool {
		sh.phase.Store(phaseStop)
		close(sh.stop)
		switch {
		case rest:
			if quiesce(workers, pace, finished, quiesceLimit) {
				return true
			}
		case pace == nil:
			select {
			case <-finished:
				return true
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
			return false
		case <-time.After(2 * time.Second):
		}
		for _, w := range workers {
			w.conn.Close()
		}
		<-finished
		return false
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
		return false, windowAborted(ctx, workers, res)
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
	if completed && cfg.firstWait > 0 && !chanClosed(sh.some) {
		// Not one request completed in the window, on a slow or busy
		// machine (a put behind a slow disk's sync, say): with
		// -first-wait, the window goes on until one does, so that its
		// figures describe some work rather than none.
		if testWindowEmpty != nil {
			testWindowEmpty()
		}
		completed = waitFirst(ctx, sh, finished, cfg.firstWait)
	}
	var after procSample
	var afterErr error
	if cfg.serverPID != 0 {
		after, afterErr = sampleProc(cfg.serverPID)
		res.ServerRSSEnd = rss.read()
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
	rested = stopWorkers()
	if !completed && ctx.Err() != nil {
		return false, windowAborted(ctx, workers, res)
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
			if res.FirstError == "" {
				res.FirstError = w.err.Error()
			}
		}
		hist.Merge(&w.hist)
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
		return rested, nil
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
	if rss.err != nil {
		notes = append(notes, "resident memory: "+rss.err.Error())
	}
	res.ServerNote = strings.Join(notes, "; ")
	if res.ClientCPUCores >= 0 && res.MachineCPUCores >= 0 && res.ServerCPUns > 0 {
		res.OtherCPUCores = res.MachineCPUCores - res.ClientCPUCores - res.ServerCPUCores
	}

	if pr.err != nil {
		res.SyscallsNote = pr.err.Error()
		return rested, nil
	}
	res.Syscalls = pr.count
	res.SyscallsWindowS = pr.window.Seconds()
	if res.Requests > 0 {
		// Rates: perf counted for its own window, after ours, under the
		// same load.
		res.SyscallsPerReq = (float64(pr.count) / pr.window.Seconds()) / res.ReqPerS
	}
	return rested, nil
}

// quiesce waits, once the workers were told to stop, until every one has
// ended at rest: each finishes the request it has in flight and sends no
// more. A paced worker whose next request the pacer, ended here, will no
// longer send waits for a reply no byte of which can come: a read
// deadline in the past ends that read cleanly. It reports whether they
// all ended so within limit.
func quiesce(workers []*worker, pace *pacer, finished <-chan struct{}, limit time.Duration) bool {
	if pace != nil {
		pace.end()
	}
	interrupted := make([]bool, len(workers))
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if pace != nil {
			for i, w := range workers {
				if !interrupted[i] && w.slot.unsent() {
					w.conn.SetReadDeadline(time.Now().Add(-time.Second))
					interrupted[i] = true
				}
			}
		}
		select {
		case <-finished:
			return true
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// rssReader reads the server's resident memory, keeping the first error.
type rssReader struct {
	pid int // 0: no server
	err error
}

// read returns the server's VmRSS in bytes, -1 if there is no server or
// it cannot be read.
func (r *rssReader) read() int64 {
	if r.pid == 0 {
		return -1
	}
	n, err := readRSS(r.pid)
	if err != nil {
		if r.err == nil {
			r.err = err
		}
		return -1
	}
	return n
}
