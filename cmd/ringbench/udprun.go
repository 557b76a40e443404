//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// benchUDP runs the UDP scenario and writes udp.jsonl and udp.md (for
// request/response udp-rr.jsonl and udp-rr.md) in out.
func benchUDP(ctx context.Context, cfg udpConfig) (int, error) {
	logs, binDir, err := buildInto(ctx, cfg.src, cfg.out, "./cmd/ringecho", "./cmd/ringload")
	if err != nil {
		return 1, err
	}
	cfg.bins = bins{ringecho: filepath.Join(binDir, "ringecho"), ringload: filepath.Join(binDir, "ringload"),
		peerecho: filepath.Join(binDir, "peerecho"), cUDP: filepath.Join(binDir, "udp_recv"), cUDPRR: filepath.Join(binDir, "udp_rr")}
	if cfg.cClient {
		if err := cCompile(ctx, filepath.Join(cfg.src, "bench", "c", "udp_rr.c"), cfg.bins.cUDPRR); err != nil {
			return 1, fmt.Errorf("-udp-client c: %w", err)
		}
	}
	if slices.Contains(cfg.servers, "gnet") {
		if err := goBuild(ctx, filepath.Join(cfg.src, "bench"), binDir, "./cmd/peerecho"); err != nil {
			fmt.Fprintf(cfg.stderr, "ringbench: leaving gnet out: %v\n", err)
			cfg.servers = slices.DeleteFunc(cfg.servers, func(s string) bool { return s == "gnet" })
		}
	}
	if slices.Contains(cfg.servers, cRecvmmsg) {
		if err := cCompile(ctx, filepath.Join(cfg.src, "bench", "c", "udp_recv.c"), cfg.bins.cUDP); err != nil {
			fmt.Fprintf(cfg.stderr, "ringbench: leaving c-recvmmsg out: %v\n", err)
			cfg.servers = slices.DeleteFunc(cfg.servers, func(s string) bool { return s == cRecvmmsg })
		}
	}
	if cfg.rps && !cfg.rr {
		restore, err := steerLoopback(cfg.rpsCPUs)
		if err != nil {
			return 1, fmt.Errorf("-rps: %w (run as root, or give -rps=false)", err)
		}
		defer restore()
	}
	name := "udp"
	if cfg.rr {
		name = "udp-rr"
	}
	jf, err := os.Create(filepath.Join(cfg.out, name+".jsonl"))
	if err != nil {
		return 1, err
	}
	defer jf.Close()
	var runs []udpRun
	failed := false
	offered := cfg.offered
	if cfg.rr || len(offered) == 0 {
		offered = []float64{cfg.rate}
	}
	record := func(r udpRun) error {
		if r.Err != "" {
			failed = true
			fmt.Fprintf(cfg.stderr, "ringbench: udp %s %d B repeat %d: %s\n", r.Server, r.Size, r.Repeat, r.Err)
		}
		if cfg.rr {
			fmt.Fprintf(cfg.stderr, "udp-rr %-13s %5d B rep %d: %8.0f req/s p99 %6.0fµs busy %.2f %.2f CPU-µs/req (user / kernel %s) lost %d\n",
				r.Server, r.Size, r.Repeat, r.ReqPerS, r.P99us, r.Busy, r.CPUusReq, udpSplit([]udpRun{r}, 1e6, func(r udpRun) float64 { return r.ReqPerS }), r.Lost)
		} else {
			fmt.Fprintf(cfg.stderr, "udp %-13s %5d B offered %8.0f rep %d: %9.0f recv/s %9.0f sent/s busy %.2f %9.0f per CPU-s drops %.0f/s\n",
				r.Server, r.Size, r.Offered, r.Repeat, r.RecvPPS, r.SentPPS, r.Busy, r.PerCPU, r.DropPPS)
		}
		runs = append(runs, r)
		return writeJSONLine(jf, r)
	}
	if cfg.turns {
		if err := udpTurns(ctx, cfg, logs, offered, record); err != nil {
			return 1, err
		}
	} else {
		for rep := range cfg.repeats {
			for _, size := range cfg.sizes {
				for _, rate := range offered {
					for _, srv := range rotation(cfg.servers, rep) {
						if ctx.Err() != nil {
							return 1, ctx.Err()
						}
						if err := record(udpOnce(ctx, cfg, srv, size, rate, rep, filepath.Join(logs, fmt.Sprintf("udp-%s-%d-%.0f-%d", srv, size, rate, rep)))); err != nil {
							return 1, err
						}
					}
				}
			}
		}
	}
	if err := writeUDPOutputs(cfg, runs, name, offered); err != nil {
		return 1, err
	}
	if failed {
		return 1, nil
	}
	return 0, nil
}

// cCompile builds a C program without libraries.
// cUDPRRArgs are bench/c/udp_rr.c's arguments for clients clients at
// rate requests/s of size bytes to 127.0.0.1:port.
func cUDPRRArgs(port, clients int, rate float64, size int, warmup, duration time.Duration) []string {
	return []string{"127.0.0.1", fmt.Sprint(port), fmt.Sprint(clients), fmt.Sprint(rate), fmt.Sprint(size),
		fmt.Sprint(warmup.Milliseconds()), fmt.Sprint(duration.Milliseconds())}
}

func cCompile(ctx context.Context, src, out string) error {
	cmd := exec.CommandContext(ctx, "cc", "-O2", "-o", out, src)
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cc %s: %v: %s", filepath.Base(src), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// udpTurns measures each size and rate's servers in turns: they start
// once, and a repeat is one run of each, in an order that rotates from
// repeat to repeat. A server that fails to start fails its runs.
func udpTurns(ctx context.Context, cfg udpConfig, logs string, offered []float64, record func(udpRun) error) error {
	for _, size := range cfg.sizes {
		for _, rate := range offered {
			procs := map[string]*udpProc{}
			failed := map[string]error{}
			for _, srv := range cfg.servers {
				p, err := startUDPServer(ctx, cfg, srv, filepath.Join(logs, fmt.Sprintf("udp-%s-%d-%.0f", srv, size, rate)))
				if err != nil {
					failed[srv] = err
					continue
				}
				procs[srv] = p
			}
			err := func() error {
				defer func() {
					for _, p := range procs {
						p.stop()
					}
				}()
				for rep := range cfg.repeats {
					for _, srv := range rotation(cfg.servers, rep) {
						if ctx.Err() != nil {
							return ctx.Err()
						}
						r := newUDPRun(cfg, srv, size, rate, rep)
						if err := failed[srv]; err != nil {
							r.Err = err.Error()
						} else {
							r = procs[srv].measure(cfg, size, rate, rep)
						}
						if err := record(r); err != nil {
							return err
						}
					}
				}
				return nil
			}()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// newUDPRun is a run of srv before it is measured.
func newUDPRun(cfg udpConfig, srv string, size int, rate float64, rep int) udpRun {
	r := udpRun{Server: srv, Size: size, Offered: rate, Repeat: rep, Mode: "oneway"}
	if cfg.rr {
		r.Mode = "rr"
	}
	return r
}

// udpOnce runs one server under the load and measures it.
func udpOnce(ctx context.Context, cfg udpConfig, srv string, size int, rate float64, rep int, logBase string) udpRun {
	p, err := startUDPServer(ctx, cfg, srv, logBase)
	if err != nil {
		r := newUDPRun(cfg, srv, size, rate, rep)
		r.Err = err.Error()
		return r
	}
	defer p.stop()
	return p.measure(cfg, size, rate, rep)
}

// udpProc is a UDP server started for measuring.
type udpProc struct {
	name, stats string
	port        int
	server      *exec.Cmd
	lf          *os.File
	exited      chan error
}

// startUDPServer starts server srv, pinned to the server CPUs, and waits
// until it is ready. Its log and stats files start with logBase.
func startUDPServer(ctx context.Context, cfg udpConfig, srv, logBase string) (*udpProc, error) {
	port, err := freeUDPPort()
	if err != nil {
		return nil, err
	}
	p := &udpProc{name: srv, port: port, stats: logBase + ".stats"}
	os.Remove(p.stats)
	argv := udpServers[srv](cfg.bins, port, p.stats, cfg.rr, cfg.rcvbuf)
	if p.lf, err = os.Create(logBase + ".log"); err != nil {
		return nil, err
	}
	p.server = exec.Command(argv[0], argv[1:]...)
	p.server.Stdout, p.server.Stderr = p.lf, p.lf
	p.server.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startPinned(p.server, cfg.serverCPUs); err != nil {
		p.lf.Close()
		return nil, err
	}
	p.exited = make(chan error, 1)
	go func() { p.exited <- p.server.Wait() }()
	if err := waitFile(ctx, p.stats, p.exited, 15*time.Second); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s did not start: %v; its log: %s", srv, err, tail(logBase+".log"))
	}
	return p, nil
}

// stop ends the server: SIGTERM, then SIGKILL after 5 s.
func (p *udpProc) stop() {
	p.server.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		p.server.Process.Kill()
		<-p.exited
	}
	p.lf.Close()
}

// measure runs the load against the server once and measures it.
func (p *udpProc) measure(cfg udpConfig, size int, rate float64, rep int) udpRun {
	r := newUDPRun(cfg, p.name, size, rate, rep)
	fail := func(err error) udpRun {
		r.Err = err.Error()
		return r
	}
	port, server, stats, lf := p.port, p.server, p.stats, p.lf
	var out bytes.Buffer
	largv := []string{"-proto", "udp", "-addr", fmt.Sprint("127.0.0.1:", port),
		"-conns", fmt.Sprint(cfg.flows), "-size", fmt.Sprint(size),
		"-warmup", cfg.warmup.String(), "-duration", cfg.duration.String(), "-json"}
	largv = append(largv, "-rate", fmt.Sprint(rate))
	if cfg.rr {
		largv[1] = "udp-rr"
	}
	load := exec.Command(cfg.bins.ringload, largv...)
	if cfg.rr && cfg.cClient {
		load = exec.Command(cfg.bins.cUDPRR, cUDPRRArgs(port, cfg.flows, rate, size, cfg.warmup, cfg.duration)...)
	}
	load.Stdout, load.Stderr = &out, lf
	load.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startPinned(load, cfg.loadCPUs); err != nil {
		return fail(err)
	}
	loadDone := make(chan error, 1)
	go func() { loadDone <- load.Wait() }()
	sample := func() (benchfmt.LoopTotals, cpuTicks, uint64, time.Time, error) {
		t, err := benchfmt.AskLoopTotals(server.Process.Pid, stats, 0, 0)
		if err != nil {
			return t, cpuTicks{}, 0, time.Time{}, err
		}
		now := time.Now()
		c, err := readCPUTicks(cfg.serverCPUs)
		if err != nil {
			return t, c, 0, now, err
		}
		d, err := udpDrops()
		return t, c, d, now, err
	}
	time.Sleep(cfg.warmup + 50*time.Millisecond)
	t1, c1, d1, at1, err1 := sample()
	time.Sleep(cfg.duration - 100*time.Millisecond)
	t2, c2, d2, at2, err2 := sample()
	lerr := <-loadDone
	if err := errors.Join(err1, err2); err != nil {
		return fail(err)
	}
	client := "ringload"
	if cfg.rr && cfg.cClient {
		client = "udp_rr"
	}
	if lerr != nil {
		return fail(fmt.Errorf("%s: %v", client, lerr))
	}
	var lr struct {
		SentPPS float64 `json:"sent_pps"`
		Errors  uint64  `json:"errors"`
		First   string  `json:"first_error"`
		ReqPerS float64 `json:"req_per_s"`
		P99us   float64 `json:"p99_us"`
		P999us  float64 `json:"p999_us"`
		Lost    uint64  `json:"lost"`
	}
	if err := json.Unmarshal(out.Bytes(), &lr); err != nil {
		return fail(fmt.Errorf("%s's output %q: %v", client, out.String(), err))
	}
	if lr.Errors > 0 {
		return fail(fmt.Errorf("%s: %d errors, first: %s", client, lr.Errors, lr.First))
	}
	r.Window = at2.Sub(at1).Seconds()
	r.RecvPPS = float64(t2.Packets-t1.Packets) / r.Window
	r.SentPPS = lr.SentPPS
	r.DropPPS = float64(d2-d1) / r.Window
	r.Busy = c2.busySince(c1)
	r.UserBusy, r.KernelBusy = -1, -1
	if u := c2.userShareSince(c1); u >= 0 {
		r.UserBusy, r.KernelBusy = r.Busy*u, r.Busy*(1-u)
	}
	if r.Busy > 0 {
		r.PerCPU = r.RecvPPS / r.Busy
	}
	if cfg.rr {
		r.ReqPerS, r.P99us, r.P999us, r.Lost = lr.ReqPerS, lr.P99us, lr.P999us, lr.Lost
		if r.ReqPerS > 0 {
			r.CPUusReq = r.Busy * 1e6 / r.ReqPerS
		}
	}
	return r
}

// waitFile waits until path exists, the process exits, or limit passes.
func waitFile(ctx context.Context, path string, exited chan error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("exited (%v)", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %v", path, limit)
		}
	}
}

func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// udpDrops reads the kernel's count of datagrams dropped for full receive
// buffers (Udp RcvbufErrors in /proc/net/snmp).
func udpDrops() (uint64, error) {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0, err
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "RcvbufErrors" && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
	}
	return 0, errors.New("/proc/net/snmp: no Udp RcvbufErrors")
}

// steerLoopback sets lo's receive packet steering to cpus and returns a
// function that restores what was there.
func steerLoopback(cpus cpuSet) (func(), error) {
	const path = "/sys/class/net/lo/queues/rx-0/rps_cpus"
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var mask uint64
	for _, c := range cpus {
		if c >= 64 {
			return nil, fmt.Errorf("CPU %d: only CPUs 0-63 are steered", c)
		}
		mask |= 1 << c
	}
	if err := os.WriteFile(path, []byte(strconv.FormatUint(mask, 16)), 0); err != nil {
		return nil, err
	}
	return func() { os.WriteFile(path, bytes.TrimSpace(old), 0) }, nil
}
