//go:build linux

package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fakeRun is a run with the figures the report uses; the rest of a real
// result is left out.
func fakeRun(server string, conns int, rate float64, rep int, reqs, cpuUs, sys, p99 float64) benchfmt.Run {
	cell := load{scenario: "echo", size: 1024, mode: "pingpong", depth: 1, rate: rate}.cell(server, conns)
	return benchfmt.Run{
		Kind: "run", Cell: cell, Repeat: rep, Placement: "servers on CPUs 0, load generator on CPUs 1",
		Result: map[string]any{
			"req_per_s": reqs, "p50_us": p99 / 3, "p99_us": p99, "p999_us": p99 * 2, "p9999_us": p99 * 4,
			"server_cpu_cores": reqs * cpuUs / 1e6, "server_cpu_us_per_req": cpuUs,
			"req_per_server_cpu_s": 1e6 / cpuUs, "syscalls": 1, "syscalls_per_req": sys,
			"server_user_us_per_req": cpuUs * 0.15, "server_kernel_us_per_req": cpuUs * 0.85,
			"ctx_switches_per_req": 0.25, "verify_errors": 0, "dial_errors": 0, "io_errors": 0,
		},
	}
}

// testRuns is a small matrix: three servers, two connection counts, two
// loads, repeats with spread, a server that failed one run, one without
// syscalls (perf missing), one with only the library's syscall count, and
// one that fell behind its offered rate (and has no user and kernel
// split, as results from before ringload measured it).
func testRuns() []benchfmt.Run {
	var runs []benchfmt.Run
	for rep := 1; rep <= 3; rep++ {
		f := 1 + 0.01*float64(rep-2) // repeats 1% apart
		for _, c := range []int{10, 100} {
			capped := fakeRun("uring", c, 40000, rep, 40000, 18*f, 2.6, 200)
			if c == 100 {
				// No perf: the library's own count stands in.
				capped.Result["syscalls_per_req"] = -1.0
				capped.Result["loop_syscalls_per_req"] = 1.5
			}
			runs = append(runs,
				fakeRun("std", c, 0, rep, 100000*f, 8*f, 3.1, 250*f),
				fakeRun("uring", c, 0, rep, 110000*f, 7*f, 0.5, 230*f),
				fakeRun("netpoll", c, 0, rep, 95000*f, 8.5*f, 2.2, 260*f),
				fakeRun("std", c, 40000, rep, 40000, 16*f, 3.8, 300),
				capped,
			)
			slow := fakeRun("netpoll", c, 40000, rep, 30000, 20, -1, 900)
			// A result from before ringload split the CPU.
			delete(slow.Result, "server_user_us_per_req")
			delete(slow.Result, "server_kernel_us_per_req")
			if rep == 2 && c == 100 {
				slow = benchfmt.Run{Kind: "run", Cell: slow.Cell, Repeat: rep, Err: "server did not start: boom"}
			}
			runs = append(runs, slow)
		}
	}
	return runs
}

func TestSummarize(t *testing.T) {
	sums := summarize(testRuns(), []string{"uring", "std", "netpoll"})
	if len(sums) != 12 {
		t.Fatalf("%d summaries, want 12 cells", len(sums))
	}
	// Order: groups as first seen, then servers as listed, then conns.
	first := sums[0]
	if first.Server != "uring" || first.Conns != 10 || first.Rate != 0 || first.Repeats != 3 {
		t.Errorf("first summary %+v", first.Cell)
	}
	if m := first.CPUusPerReq; m.N != 3 || m.Median != 7 || m.Min != 7*0.99 || m.Max != 7*1.01 {
		t.Errorf("uring CPU/req %+v, want median 7 over 3 from 6.93 to 7.07", m)
	}
	var failed benchfmt.Summary
	for _, s := range sums {
		if s.Server == "netpoll" && s.Rate > 0 && s.Conns == 100 {
			failed = s
		}
	}
	if failed.Errors != 1 || failed.ReqPerS.N != 2 || failed.SyscallsPerReq.N != 0 || failed.SyscallsSource != "" {
		t.Errorf("netpoll with a failed run and no syscalls: %+v", failed)
	}
}

// TestReportGolden renders the table and the markdown report of testRuns
// and compares them with testdata/golden (go test -update rewrites them).
func TestReportGolden(t *testing.T) {
	sums := summarize(testRuns(), []string{"uring", "std", "netpoll"})
	var table, md bytes.Buffer
	writeTable(&table, sums)
	m := meta{
		Date: "2026-11-22 04:00 UTC", Command: "ringbench -test", Machine: "2 x Test CPU, Linux 6.18",
		Go: "go1.26", Placement: "servers on CPUs 0, load generator on CPUs 1", Repeats: 3,
		Warmup: "300ms", Duration: "1s", Syscalls: "perf stat", Notes: []string{"a note"},
	}
	writeMarkdown(&md, m, testRuns(), sums, []string{"echo-pingpong-1024B-max-throughput.svg", "echo-pingpong-1024B-rate40000-cpu.svg"})
	for name, got := range map[string][]byte{"table.txt": table.Bytes(), "report.md": md.Bytes()} {
		path := filepath.Join("testdata", "golden", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (go test -update rewrites it); got:\n%s", name, path, got)
		}
	}
	// Facts the golden files must hold, so an -update cannot bless a
	// broken report.
	for _, want := range []string{
		"| uring | 10 | 110000 ±1% |", // median and spread
		"| 0.88 |",                    // uring CPU/req over std: 7/8
		"30000 ±0% (behind)",          // netpoll under the offered rate
		"1, 0 verify",                 // the failed run
		"![echo-pingpong-1024B-max: throughput](echo-pingpong-1024B-max-throughput.svg)",
		"| uring | 100 | 0.88 | 0.82 | 0.16 | 0.23 |", // ratios vs std and netpoll
		"| 1.50 (lib) |",   // syscalls from the library's count
		"| 62500 | 3.80 |", // std's, from perf
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md.String(), "rate40000-throughput.svg") {
		t.Error("report links a chart that was not written")
	}
}

func TestParseFlags(t *testing.T) {
	good := []string{"echo:1024:pp:max", "rpc:512:p16:40000", " echo:64:pp:1 , rpc:16:p2:max "}
	for _, s := range good {
		if _, err := parseLoads(s); err != nil {
			t.Errorf("parseLoads(%q): %v", s, err)
		}
	}
	ls, _ := parseLoads("rpc:512:p16:40000")
	if l := ls[0]; l.scenario != "rpc" || l.size != 512 || l.mode != "pipeline" || l.depth != 16 || l.rate != 40000 {
		t.Errorf("parsed %+v", l)
	}
	for _, s := range []string{"", "echo", "http:1024:pp:max", "echo:8:pp:max", "echo:1024:p1:max",
		"echo:1024:px:max", "echo:1024:q:max", "echo:1024:pp:fast", "echo:1024:pp:0"} {
		if _, err := parseLoads(s); err == nil {
			t.Errorf("parseLoads(%q) succeeded", s)
		}
	}
	if _, err := parseServers("uring,iocp"); err == nil || !strings.Contains(err.Error(), "want one of") {
		t.Errorf("unknown server: %v", err)
	}
	if _, err := parseServers("std,std"); err == nil {
		t.Error("a server listed twice was accepted")
	}
	if cs, err := parseConns("500,10,100,10"); err != nil || len(cs) != 3 || cs[0] != 10 || cs[2] != 500 {
		t.Errorf("parseConns: %v, %v", cs, err)
	}
	for _, s := range []string{"", "0", "ten", "-5"} {
		if _, err := parseConns(s); err == nil {
			t.Errorf("parseConns(%q) succeeded", s)
		}
	}
	if set, err := parseCPUs("0,2-3"); err != nil || set.String() != "0,2,3" {
		t.Errorf("parseCPUs: %v, %v", set, err)
	}
	for _, s := range []string{"a", "3-1", "-1", "5000"} {
		if _, err := parseCPUs(s); err == nil {
			t.Errorf("parseCPUs(%q) succeeded", s)
		}
	}
	var out, errb bytes.Buffer
	for _, args := range [][]string{
		{"-servers", "iocp"}, {"-conns", "0"}, {"-loads", "x"}, {"-repeats", "0"},
		{"-duration", "1ms"}, {"-warmup", "-1s"}, {"-server-cpus", "x"}, {"-out", ""}, {"stray"},
		{"-udp", "-udp-rate", "1000", "-udp-client", "rust"}, {"-udp", "-udp-client", "c"},
		{"-turns", "1s"}, {"-turns", "0", "-turns-paced"},
		{"-cores", "5000"}, {"-cores", "-1"}, {"-cores", "1", "-server-cpus", "0"},
	} {
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("run(%q) exit %d, want 2", args, code)
		}
	}
}

// TestPairedRatios: the per-repeat ratios pair runs of the same repeat and
// cell only, and the bootstrap interval holds the median.
func TestPairedRatios(t *testing.T) {
	run := func(server string, repeat int, rpc float64) benchfmt.Run {
		return benchfmt.Run{Kind: "run", Cell: benchfmt.Cell{Scenario: "echo", Mode: "pingpong", Depth: 1, Server: server, Conns: 10, Size: 1024},
			Repeat: repeat, Result: map[string]any{"req_per_server_cpu_s": rpc}}
	}
	runs := []benchfmt.Run{
		run("uring", 1, 110), run("std", 1, 100),
		run("uring", 2, 120), run("std", 2, 100),
		run("uring", 3, 90), // no std in repeat 3: not paired
		run("uring", 4, 100), run("std", 4, 125),
	}
	c := runs[0].Cell
	got := pairedRatios(runs, c, "uring", "std")
	want := []float64{0.8, 1.1, 1.2}
	if !slices.Equal(got, want) {
		t.Fatalf("paired ratios %v, want %v", got, want)
	}
	if m := benchfmt.Median(got); m != 1.1 {
		t.Errorf("median %v, want 1.1", m)
	}
	// In any order, as udp.go's and fwreport.go's callers pass them.
	for _, xs := range [][]float64{{1.2, 0.8, 1.1}, {5, 1, 4, 2}} {
		want := map[int]float64{3: 1.1, 4: 3}[len(xs)]
		if m := benchfmt.Median(xs); m != want {
			t.Errorf("benchfmt.Median(%v) = %v, want %v", xs, m, want)
		}
	}
	lo, hi := benchfmt.Bootstrap(got)
	if lo > 1.1 || hi < 1.1 || lo < 0.8 || hi > 1.2 {
		t.Errorf("bootstrap interval %v-%v, want it within 0.8-1.2 and holding 1.1", lo, hi)
	}
}

// TestVerdictTwin: the verdict line gives the default server over each
// peer and, when the run had one, over its twin, the yardstick for the
// run's noise; the twin is not a peer, so it does not decide the verdict.
func TestVerdictTwin(t *testing.T) {
	var runs []benchfmt.Run
	for rep := 1; rep <= 3; rep++ {
		runs = append(runs,
			fakeRun("uring", 100, 0, rep, 110000, 7, 0.5, 230),
			fakeRun("uring-twin", 100, 0, rep, 110000, 7.7, 0.5, 230),
			fakeRun("gnet", 100, 0, rep, 100000, 7.35, 2.4, 240),
		)
	}
	var b bytes.Buffer
	writeVerdict(&b, summarize(runs, []string{"uring", "uring-twin", "gnet"}))
	want := "    100 conns: 1.05 gnet (ahead of every Go peer; uring-twin, the same server again, 1.10)"
	if !strings.Contains(b.String(), want) {
		t.Errorf("verdict:\n%s\nwant a line %q", b.String(), want)
	}
	// Without a twin the line says nothing of one.
	b.Reset()
	var noTwin []benchfmt.Run
	for _, r := range runs {
		if r.Server != "uring-twin" {
			noTwin = append(noTwin, r)
		}
	}
	writeVerdict(&b, summarize(noTwin, []string{"uring", "gnet"}))
	if strings.Contains(b.String(), "twin") || !strings.Contains(b.String(), "1.05 gnet (ahead of every Go peer)") {
		t.Errorf("verdict without a twin:\n%s", b.String())
	}
}
