//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
	"github.com/ringpoll/ringpoll/internal/kvproto"
)

// The key-value scenario (-kv): cmd/ringkv serving 4 KiB records of a
// data file opened with O_DIRECT, each request a disk read (or a write
// acknowledged after a group-commit fsync), loaded by cmd/ringload
// -proto kv at each connection count with -kv-outstanding requests in
// flight over all connections. The question it answers (issue 18): does
// putting the file on the network's ring (ringpoll.File) beat an os.File
// under ringpoll, and std net with an os.File, in requests per server
// CPU-second, tail latency and OS threads?
//
// The data file (-kv-file-size, at least 2 GiB by default so it is not
// one the disk's cache holds) is made once in -kv-dir and reused by later
// runs: reserved with fallocate, then written, after a look at the free
// space there.

// kvServers are the key-value servers: ringkv's -impl values.
var kvServers = []string{"ring", "osfile", "std", "sendfile"}

const (
	defaultKVServers = "ring,osfile,std"
	defaultKVConns   = "100,1000"
	defaultKVWrites  = "0,90"
)

type kvConfig struct {
	servers               []string
	conns                 []int
	writes                []int // percent of puts, per variant
	outstanding           int
	fileSize              int64
	dir                   string
	repeats               int
	warmup, duration      time.Duration
	serverCPUs, loadCPUs  cpuSet
	src, out, commandLine string
	stdout, stderr        io.Writer
}

// kvRun is one measured run.
type kvRun struct {
	Server      string  `json:"server"`
	Conns       int     `json:"conns"`
	Writes      int     `json:"writes_pct"`
	Outstanding int     `json:"outstanding"`
	Repeat      int     `json:"repeat"`
	ReqPerS     float64 `json:"req_per_s"`
	PerCPU      float64 `json:"req_per_server_cpu_s"`
	CPUCores    float64 `json:"server_cpu_cores"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	P999us      float64 `json:"p999_us"`
	ThreadsMax  int     `json:"server_threads_max"`
	SyscallsReq float64 `json:"syscalls_per_req"`
	Errors      uint64  `json:"errors"`
	Err         string  `json:"error,omitempty"`
}

// parseKV reads the -kv flags.
func parseKV(servers, conns, writes, size string) (kvConfig, error) {
	var c kvConfig
	for _, s := range splitList(servers) {
		if !slices.Contains(kvServers, s) {
			return c, fmt.Errorf("-kv-servers: unknown server %q (want some of %s)", s, strings.Join(kvServers, ","))
		}
		c.servers = append(c.servers, s)
	}
	var err error
	if c.conns, err = parseConns(conns); err != nil {
		return c, fmt.Errorf("-kv-conns: %w", err)
	}
	for _, s := range splitList(writes) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 100 {
			return c, fmt.Errorf("-kv-writes: %q: want percentages of puts, 0 to 100", s)
		}
		c.writes = append(c.writes, n)
	}
	if c.fileSize, err = parseSize(size); err != nil {
		return c, fmt.Errorf("-kv-file-size: %w", err)
	}
	if c.fileSize < 1<<20 {
		return c, fmt.Errorf("-kv-file-size %s: want at least 1MiB", size)
	}
	if len(c.servers) == 0 || len(c.writes) == 0 {
		return c, errors.New("-kv-servers and -kv-writes must name at least one each")
	}
	return c, nil
}

// parseSize reads a byte count: a number, or one with a KiB, MiB or GiB
// suffix.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.n
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("%q: want a size such as 2GiB, 64MiB or 1048576", s)
	}
	return n * mult, nil
}

// prepareKVFile finds or makes the data file, after checking the free
// space. skip is the reason to skip the scenario, if the disk is too
// small.
func prepareKVFile(cfg kvConfig) (path, skip string, err error) {
	size := cfg.fileSize / kvproto.RecordSize * kvproto.RecordSize
	path = filepath.Join(cfg.dir, fmt.Sprintf("ringbench-kv-%d.dat", size))
	if st, err := os.Stat(path); err != nil || st.Size() != size {
		var fs unix.Statfs_t
		if err := unix.Statfs(cfg.dir, &fs); err != nil {
			return "", "", fmt.Errorf("-kv-dir %s: %w", cfg.dir, err)
		}
		free := int64(fs.Bavail) * fs.Bsize
		const margin = 256 << 20 // left for everything else
		if free < size+margin {
			return "", fmt.Sprintf("%s has %s free; the %s data file needs %s more (give -kv-dir on a larger disk, or a smaller -kv-file-size)",
				cfg.dir, bytesText(free), bytesText(size), bytesText(size+margin-free)), nil
		}
	}
	fmt.Fprintf(cfg.stderr, "ringbench: data file %s (%s, %d records)\n", path, bytesText(size), size/kvproto.RecordSize)
	start := time.Now()
	reused, err := kvproto.PrepareFile(path, size/kvproto.RecordSize, func(done, total int64) {
		fmt.Fprintf(cfg.stderr, "\rringbench: writing the data file: %3d%%", done*100/total)
	})
	if err != nil {
		return "", "", fmt.Errorf("making the data file %s: %w", path, err)
	}
	if reused {
		fmt.Fprintln(cfg.stderr, "ringbench: the data file is there from an earlier run; reusing it")
	} else {
		fmt.Fprintf(cfg.stderr, "\rringbench: wrote the data file in %s\n", time.Since(start).Round(time.Second))
	}
	return path, "", nil
}

// bytesText writes n bytes in GiB or MiB with one decimal, or in bytes.
func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d B", n)
}

// benchKV runs the key-value scenario and writes kv.jsonl and kv.md in
// out.
func benchKV(ctx context.Context, cfg kvConfig) (int, error) {
	path, skip, err := prepareKVFile(cfg)
	if err != nil {
		return 1, err
	}
	if skip != "" {
		fmt.Fprintln(cfg.stderr, "ringbench: skipping -kv:", skip)
		return 0, nil
	}
	records := kvproto.Records(cfg.fileSize / kvproto.RecordSize * kvproto.RecordSize)
	logs, binDir, err := buildInto(ctx, cfg.src, cfg.out, "./cmd/ringkv", "./cmd/ringload")
	if err != nil {
		return 1, err
	}
	ringkv, ringload := filepath.Join(binDir, "ringkv"), filepath.Join(binDir, "ringload")
	jf, err := os.Create(filepath.Join(cfg.out, "kv.jsonl"))
	if err != nil {
		return 1, err
	}
	defer jf.Close()
	var runs []kvRun
	failed := false
	for rep := range cfg.repeats {
		for _, writes := range cfg.writes {
			for _, conns := range cfg.conns {
				for _, srv := range rotation(cfg.servers, rep) {
					if ctx.Err() != nil {
						return 1, ctx.Err()
					}
					base := filepath.Join(logs, fmt.Sprintf("kv-%s-w%d-c%d-r%d", srv, writes, conns, rep))
					r := kvOnce(ctx, cfg, ringkv, ringload, path, records, srv, conns, writes, rep, base)
					if r.Err != "" {
						failed = true
						fmt.Fprintf(cfg.stderr, "ringbench: kv %s %d%% puts %d conns repeat %d: %s\n", srv, writes, conns, rep, r.Err)
					} else {
						fmt.Fprintf(cfg.stderr, "kv %-8s %3d%% puts %5d conns rep %d: %8.0f req/s %8.0f per CPU-s p99 %7.0fµs threads %3d\n",
							srv, writes, conns, rep, r.ReqPerS, r.PerCPU, r.P99us, r.ThreadsMax)
					}
					runs = append(runs, r)
					if err := writeJSONLine(jf, r); err != nil {
						return 1, err
					}
				}
			}
		}
	}
	var md bytes.Buffer
	writeKVReport(&md, cfg, path, runs)
	io.Copy(cfg.stdout, bytes.NewReader(md.Bytes()))
	if err := os.WriteFile(filepath.Join(cfg.out, "kv.md"), md.Bytes(), 0o644); err != nil {
		return 1, err
	}
	if failed {
		return 1, nil
	}
	return 0, nil
}

// kvOnce runs one server under the load and measures it.
func kvOnce(ctx context.Context, cfg kvConfig, ringkv, ringload, path string, records int64, srv string, conns, writes, rep int, base string) kvRun {
	r := kvRun{Server: srv, Conns: conns, Writes: writes, Outstanding: cfg.outstanding, Repeat: rep}
	fail := func(err error) kvRun {
		r.Err = err.Error()
		return r
	}
	addr, err := freePort()
	if err != nil {
		return fail(err)
	}
	p, err := startServer(ctx, []string{ringkv, "-addr", addr, "-file", path, "-impl", srv}, addr, cfg.serverCPUs, base+".log")
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := p.stop(); err != nil && r.Err == "" {
			r.Err = fmt.Sprintf("ringkv: %v; log %s", err, base+".log")
		}
	}()
	args := []string{"-proto", "kv", "-addr", addr, "-conns", strconv.Itoa(conns),
		"-outstanding", strconv.Itoa(cfg.outstanding), "-kv-records", strconv.FormatInt(records, 10),
		"-kv-writes", strconv.Itoa(writes), "-warmup", cfg.warmup.String(), "-duration", cfg.duration.String(),
		// A short window on a busy disk may see no put's sync end.
		"-first-wait", "5s",
		"-server-pid", strconv.Itoa(p.cmd.Process.Pid), "-json"}
	rctx, cancel := context.WithTimeout(ctx, cfg.warmup+cfg.duration+60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(rctx, ringload, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err = startPinned(cmd, cfg.loadCPUs)
	if err == nil {
		err = cmd.Wait()
	}
	var lr struct {
		ReqPerS          float64 `json:"req_per_s"`
		PerCPU           float64 `json:"req_per_server_cpu_s"`
		CPUCores         float64 `json:"server_cpu_cores"`
		P50us            float64 `json:"p50_us"`
		P99us            float64 `json:"p99_us"`
		P999us           float64 `json:"p999_us"`
		ThreadsMax       int     `json:"server_threads_max"`
		SyscallsReq      float64 `json:"syscalls_per_req"`
		VerifyErrors     uint64  `json:"verify_errors"`
		FirstVerifyError string  `json:"first_verify_error"`
		DialErrors       int     `json:"dial_errors"`
		IOErrors         int     `json:"io_errors"`
		FirstError       string  `json:"first_error"`
	}
	if jerr := json.Unmarshal(stdout.Bytes(), &lr); jerr != nil {
		return fail(fmt.Errorf("ringload: %v (exit %v): %s", jerr, err, tail0(stderr.String())))
	}
	r.ReqPerS, r.PerCPU, r.CPUCores = lr.ReqPerS, lr.PerCPU, lr.CPUCores
	r.P50us, r.P99us, r.P999us = lr.P50us, lr.P99us, lr.P999us
	r.ThreadsMax, r.SyscallsReq = lr.ThreadsMax, lr.SyscallsReq
	r.Errors = lr.VerifyErrors + uint64(lr.DialErrors+lr.IOErrors)
	switch {
	case lr.VerifyErrors > 0:
		r.Err = fmt.Sprintf("%d replies failed their check; first: %s", lr.VerifyErrors, lr.FirstVerifyError)
	case lr.DialErrors+lr.IOErrors > 0:
		r.Err = fmt.Sprintf("%d connection errors; first: %s", lr.DialErrors+lr.IOErrors, lr.FirstError)
	case err != nil:
		r.Err = fmt.Sprintf("ringload: %v: %s", err, tail0(stderr.String()))
	}
	return r
}

// writeKVReport writes the medians per variant, connection count and
// server, with each server's requests per server CPU-second over std's.
func writeKVReport(w io.Writer, cfg kvConfig, path string, runs []kvRun) {
	fmt.Fprintf(w, "\n## Key-value, 4 KiB records with O_DIRECT (%s)\n\n", cfg.commandLine)
	fmt.Fprintf(w, "ringkv on CPUs %s, ringload -proto kv on CPUs %s; %d requests in flight over all connections; data file %s (%s); %s warm-up, %s measured; %d repeats, medians, min-max in brackets. Servers: ring = ringpoll network and ringpoll.File on its rings; osfile = ringpoll network and os.File; std = net and os.File; sendfile = ring with gets sent by Conn.SendFile.\n\n",
		cfg.serverCPUs, cfg.loadCPUs, cfg.outstanding, path, bytesText(cfg.fileSize), cfg.warmup, cfg.duration, cfg.repeats)
	for _, writes := range cfg.writes {
		for _, conns := range cfg.conns {
			variant := "gets only"
			if writes > 0 {
				variant = fmt.Sprintf("%d%% puts (group-commit fsync)", writes)
			}
			fmt.Fprintf(w, "### %s, %d connections\n\n", variant, conns)
			tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
			fmt.Fprintln(tw, "| server\t requests/s\t per server CPU-s\t vs std\t p50 µs\t p99 µs\t p99.9 µs\t threads (max)\t syscalls/req\t errors\t")
			fmt.Fprintln(tw, "|---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
			per := func(srv string) []kvRun {
				var rs []kvRun
				for _, r := range runs {
					if r.Server == srv && r.Writes == writes && r.Conns == conns && r.Err == "" {
						rs = append(rs, r)
					}
				}
				return rs
			}
			key := func(r kvRun) float64 { return r.PerCPU }
			stdKey := kvMedian(per("std"), key)
			for _, srv := range cfg.servers {
				rs := per(srv)
				if len(rs) == 0 {
					fmt.Fprintf(tw, "| %s\t failed\t\t\t\t\t\t\t\t\t\n", srv)
					continue
				}
				vs := "-"
				if stdKey > 0 {
					vs = fmt.Sprintf("%.2f", kvMedian(rs, key)/stdKey)
				}
				var errs uint64
				for _, r := range rs {
					errs += r.Errors
				}
				fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %d\t\n", srv,
					kvStat(rs, func(r kvRun) float64 { return r.ReqPerS }, 0), kvStat(rs, key, 0), vs,
					kvStat(rs, func(r kvRun) float64 { return r.P50us }, 0), kvStat(rs, func(r kvRun) float64 { return r.P99us }, 0),
					kvStat(rs, func(r kvRun) float64 { return r.P999us }, 0), kvStat(rs, func(r kvRun) float64 { return float64(r.ThreadsMax) }, 0),
					kvStat(rs, func(r kvRun) float64 { return r.SyscallsReq }, 1), errs)
			}
			tw.Flush()
			fmt.Fprintln(w)
		}
	}
}

// kvMedian returns the median of get over rs.
func kvMedian(rs []kvRun, get func(kvRun) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = get(r)
	}
	slices.Sort(xs)
	return benchfmt.Median(xs)
}

// kvStat prints the median of get over rs, with the range when there are
// repeats.
func kvStat(rs []kvRun, get func(kvRun) float64, prec int) string {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = get(r)
	}
	slices.Sort(xs)
	if len(xs) == 1 {
		return strconv.FormatFloat(xs[0], 'f', prec, 64)
	}
	return fmt.Sprintf("%.*f [%.*f-%.*f]", prec, benchfmt.Median(xs), prec, xs[0], prec, xs[len(xs)-1])
}
