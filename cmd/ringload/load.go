//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/internal/kvproto"
)

// load runs one measurement against cfg.addr.
func load(ctx context.Context, cfg config) (*result, error) {
	rs, err := loadRates(ctx, cfg, []float64{cfg.rate})
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// loadRates connects to cfg.addr once and runs a load at each of rates
// in turn (cfg.rate aside) on the same connections, each with its own
// warm-up and window; it returns a result per load. Every load but the
// last ends at rest: each connection finishes the request it has in
// flight and sends no more (quiesce), so the next load starts on clean
// streams; connections that failed are left out of the next loads.
func loadRates(ctx context.Context, cfg config, rates []float64) ([]*result, error) {
	tmpl := &result{
		Addr: cfg.addr, Conns: cfg.conns, Size: cfg.size, Proto: cfg.proto, Depth: cfg.depth,
		OfferedRate: cfg.rate, WarmupS: cfg.warmup.Seconds(), KVWrites: cfg.kvWrites, Outstanding: cfg.outstanding,
		ServerPID: cfg.serverPID, Syscalls: -1, SyscallsPerReq: -1,
		ServerCPUusPerReq: -1, ReqPerServerCPUs: -1, CtxSwitchesPerReq: -1,
		ServerUserUsPerReq: -1, ServerKernelUsPerReq: -1,
		LoopSyscalls: -1, LoopSyscallsPerReq: -1,
		ServerRSSBase: -1, ServerRSSIdle: -1, ServerRSSEnd: -1,
	}
	if cfg.proto == "kv" {
		tmpl.Size = kvproto.RecordSize
	}
	rss := &rssReader{pid: cfg.serverPID}
	if cfg.serverPID != 0 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task", cfg.serverPID)); err != nil {
			return nil, fmt.Errorf("-server-pid %d: %w", cfg.serverPID, err)
		}
	}
	tmpl.ServerRSSBase = rss.read()
	conns, err := connect(ctx, cfg, tmpl)
	if err != nil {
		return nil, err
	}
	closeAll := func() {
		for _, c := range conns {
			if tc, ok := c.conn.(*net.TCPConn); ok && cfg.closeReset {
				tc.SetLinger(0)
			}
			c.conn.Close()
		}
	}
	defer closeAll()
	// Every connection open (with -prime, each has echoed once), none
	// loaded yet.
	tmpl.ServerRSSIdle = rss.read()

	// The slowloris crowd, connected before the load starts, there through
	// every load.
	crowd, err := startSlowloris(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var out []*result
	defer func() {
		crowd.stop()
		for _, res := range out {
			res.SlowlorisConns, res.SlowlorisBytes, res.SlowlorisErrors = crowd.conns, crowd.bytes.Load(), crowd.errs.Load()
			if p := crowd.firstErr.Load(); p != nil {
				res.FirstSlowlorisError = *p
			}
		}
	}()
	live := conns
	for i, rate := range rates {
		pc := cfg
		pc.rate = rate
		res := new(result)
		*res = *tmpl
		res.OfferedRate = rate
		// Fresh counters, on the same connections.
		workers := make([]*worker, len(live))
		for j, c := range live {
			workers[j] = &worker{id: c.id, conn: c.conn, cfg: &pc}
		}
		last := i == len(rates)-1
		rested, err := runPhase(ctx, pc, workers, res, !last, rss)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
		if last {
			break
		}
		if !rested {
			return nil, fmt.Errorf("the connections did not come to rest after the load at %v requests/s, so the next loads cannot run on them", rate)
		}
		live = live[:0:0]
		for _, w := range workers {
			if w.err == nil {
				live = append(live, w)
			}
		}
		if len(live) == 0 {
			return nil, fmt.Errorf("every connection failed in the load at %v requests/s", rate)
		}
	}
	return out, nil
}

// connect opens cfg.conns connections, at most 64 dials at a time (with
// -prime, each dial followed by its first echo), and notes in res what
// failed. It returns the connections open, as workers without a load.
func connect(ctx context.Context, cfg config, res *result) ([]*worker, error) {
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
	if p := firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	live := workers[:0]
	for _, w := range workers {
		if w != nil {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return nil, fmt.Errorf("all %d connections failed: %s", cfg.conns, res.FirstError)
	}
	return live, nil
}

// windowAborted explains a run that ended before its window did.
func windowAborted(ctx context.Context, workers []*worker, res *result) error {
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	for _, w := range workers {
		if w.err != nil {
			return fmt.Errorf("all %d connections failed before the window ended (%d dial errors); first: %v", res.Conns, res.DialErrors, w.err)
		}
	}
	if res.FirstError != "" {
		return fmt.Errorf("all connections ended before the window did; first error: %s", res.FirstError)
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
