//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// fwParse parses the family's flags from args over a base config.
func fwParse(args ...string) (fwConfig, error) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addFwFlags(fs)
	if err := fs.Parse(args); err != nil {
		return fwConfig{}, err
	}
	return fwConfigFrom(f, config{repeats: 3, loadCPUs: cpuSet{2, 3}}, io.Discard, io.Discard)
}

// TestFwConfig: the defaults give every scenario, the file's and gRPC's
// sizes come from their flags, the threads from the load CPUs; bad values
// say which flag.
func TestFwConfig(t *testing.T) {
	fc, err := fwParse()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sc := range fc.scenarios {
		names = append(names, sc.name)
	}
	if strings.Join(names, ",") != defaultFwScenarios || fc.threads != 2 || fc.fileSize != 64<<20 {
		t.Errorf("defaults: scenarios %v, threads %d, file %d", names, fc.threads, fc.fileSize)
	}
	fc, err = fwParse("-fw-scenarios", "file,grpc-stream", "-fw-file-mib", "2", "-fw-grpc-size", "512", "-fw-threads", "3",
		"-fw-file-conns", "1,2", "-fw-grpc-conns", "5", "-fw-grpc-rpcs", "7")
	if err != nil {
		t.Fatal(err)
	}
	file, grpc := fc.scenarios[0], fc.scenarios[1]
	if file.size != 2<<20 || grpc.size != 512 || fc.threads != 3 {
		t.Errorf("sizes %d and %d, threads %d", file.size, grpc.size, fc.threads)
	}
	if !slices.Equal(fc.connsOf(file), []int{1, 2}) || !slices.Equal(fc.connsOf(grpc), []int{5}) || fc.depthOf(grpc) != 7 || fc.depthOf(file) != 1 {
		t.Errorf("conns %v and %v, depth %d", fc.connsOf(file), fc.connsOf(grpc), fc.depthOf(grpc))
	}
	// Three repeats of three servers each: two counts of connections for
	// the file, one for gRPC.
	if n := fc.fwTotalRuns(); n != 3*(3*2+3*1) {
		t.Errorf("%d runs, want 27", n)
	}
	fc, err = fwParse("-fw-scenarios", "quic-small,quic-bulk", "-fw-quic-conns", "10,50", "-fw-quic-streams", "4",
		"-fw-quic-bulk-conns", "3", "-fw-quic-bulk-mib", "8")
	if err != nil {
		t.Fatal(err)
	}
	small, bulk := fc.scenarios[0], fc.scenarios[1]
	if small.size != 64 || bulk.size != 8<<20 || !slices.Equal(fc.connsOf(small), []int{10, 50}) || !slices.Equal(fc.connsOf(bulk), []int{3}) ||
		fc.depthOf(small) != 4 || fc.depthOf(bulk) != 1 {
		t.Errorf("QUIC: sizes %d and %d, conns %v and %v, depths %d and %d", small.size, bulk.size,
			fc.connsOf(small), fc.connsOf(bulk), fc.depthOf(small), fc.depthOf(bulk))
	}
	fc, err = fwParse("-fw-scenarios", "dns", "-fw-dns-clients", "4,40", "-fw-dns-depth", "25")
	if err != nil {
		t.Fatal(err)
	}
	if dns := fc.scenarios[0]; !slices.Equal(fc.connsOf(dns), []int{4, 40}) || fc.depthOf(dns) != 25 || !dns.udp {
		t.Errorf("dns: conns %v, depth %d, udp %v", fc.connsOf(dns), fc.depthOf(dns), dns.udp)
	}
	fc, err = fwParse("-fw-scenarios", "http-close")
	if err != nil {
		t.Fatal(err)
	}
	if sc := fc.scenarios[0]; sc.header != "Connection: close" || sc.client != "wrk" || sc.ref != "http-std" {
		t.Errorf("http-close: header %q, client %q, reference %q", sc.header, sc.client, sc.ref)
	}
	if _, err := fwParse("-fw-scenarios", "nosuch"); err == nil || !strings.Contains(err.Error(), "http-close") {
		t.Errorf("an unknown scenario: error %v, want one listing http-close too", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-fw-scenarios", "nosuch"}, "-fw-scenarios"},
		{[]string{"-fw-dns-clients", "0"}, "-fw-dns-clients"},
		{[]string{"-fw-dns-depth", "0"}, "-fw-dns-depth"},
		{[]string{"-fw-scenarios", "file,file"}, "twice"},
		{[]string{"-fw-scenarios", ","}, "no scenario"},
		{[]string{"-fw-conns", "0"}, "-fw-conns"},
		{[]string{"-fw-h2-conns", "x"}, "-fw-h2-conns"},
		{[]string{"-fw-h2-streams", "0"}, "-fw-h2-streams"},
		{[]string{"-fw-file-mib", "0"}, "-fw-file-mib"},
		{[]string{"-fw-grpc-rpcs", "0"}, "-fw-grpc-rpcs"},
		{[]string{"-fw-grpc-size", "-1"}, "-fw-grpc-size"},
		{[]string{"-fw-threads", "-1"}, "-fw-threads"},
		{[]string{"-fw-quic-conns", "0"}, "-fw-quic-conns"},
		{[]string{"-fw-quic-streams", "1001"}, "-fw-quic-streams"},
		{[]string{"-fw-quic-bulk-conns", ""}, "-fw-quic-bulk-conns"},
		{[]string{"-fw-quic-bulk-mib", "0"}, "-fw-quic-bulk-mib"},
	} {
		if _, err := fwParse(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one naming %s", tc.args, err, tc.want)
		}
	}
}

// TestFwServerArgv: the servers' command lines; the file scenario's get
// the file, h2c's -h2c; the checks ask what the scenario serves.
func TestFwServerArgv(t *testing.T) {
	sc := func(name string) fwScenario {
		s, ok := lookupFwScenario(name)
		if !ok {
			t.Fatalf("no scenario %q", name)
		}
		return s
	}
	for _, tc := range []struct {
		got, want []string
	}{
		{fwServerArgv("/b/fs", "hertz-ringpoll", sc("hertz-json"), "A", "/f"), []string{"/b/fs", "-server", "hertz-ringpoll", "-addr", "A"}},
		{fwServerArgv("/b/fs", "http-std", sc("h2c-hello"), "A", "/f"), []string{"/b/fs", "-server", "http-std", "-addr", "A", "-h2c"}},
		{fwServerArgv("/b/fs", "http-ringpoll", sc("file"), "A", "/f"), []string{"/b/fs", "-server", "http-ringpoll", "-addr", "A", "-file", "/f"}},
		{fwServerArgv("/b/fs", "grpc-std", sc("grpc-unary"), "A", "/f"), []string{"/b/fs", "-server", "grpc-std", "-addr", "A"}},
		{fwCheckArgv("/b/fs", sc("file"), "A", "/f"), []string{"/b/fs", "-check", "file", "-addr", "A", "-file", "/f"}},
		{fwCheckArgv("/b/fs", sc("grpc-stream"), "A", "/f"), []string{"/b/fs", "-check", "grpc-stream", "-addr", "A"}},
		{fwServerArgv("/b/fs", "quic-ringpoll", sc("quic-bulk"), "A", "/f"), []string{"/b/fs", "-server", "quic-ringpoll", "-addr", "A"}},
		{fwCheckArgv("/b/fs", sc("quic-small"), "A", "/f"), []string{"/b/fs", "-check", "quic-small", "-addr", "A"}},
		{fwServerArgv("/b/fs", "dns-ringpoll-epoll", sc("dns"), "A", "/f"), []string{"/b/fs", "-server", "dns-ringpoll-epoll", "-addr", "A"}},
		{fwCheckArgv("/b/fs", sc("dns"), "A", "/f"), []string{"/b/fs", "-check", "dns", "-addr", "A"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}
	fc, err := fwParse("-fw-threads", "1", "-fw-grpc-rpcs", "4")
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]string{"wrk": "wrk", "h2load": "h2load", "grpc": "g", "quicload": "q", "dnsperf": "d"}
	if got := fc.clientArgv(tools, sc("grpc-stream"), "127.0.0.1:7000", 3, 2, "n"); !slices.Equal(got,
		grpcArgv("g", "7000", 3, 4, 1, 2, "streaming", "n")) {
		t.Errorf("gRPC client: %q", got)
	}
	if got := fc.clientArgv(tools, sc("h2c-hello"), "A", 3, 2, "/log"); got[len(got)-1] != "http://A/hello" || !slices.Contains(got, "-m") {
		t.Errorf("h2load: %q", got)
	}
	if got := fc.clientArgv(tools, sc("file"), "A", 3, 2, "/s.lua"); got[0] != "wrk" || got[len(got)-1] != "http://A/file" {
		t.Errorf("wrk: %q", got)
	}
	// quic-small asks 64 B on -fw-quic-streams streams; quic-bulk one
	// stream of -fw-quic-bulk-mib at a time (set by fwConfigFrom).
	if got := fc.clientArgv(tools, sc("quic-small"), "A", 100, 2, ""); !slices.Equal(got, quicloadArgv("q", "A", 100, 10, 64, 2)) {
		t.Errorf("quicload, small: %q", got)
	}
	bulk := sc("quic-bulk")
	bulk.size = 4 << 20
	if got := fc.clientArgv(tools, bulk, "A", 2, 2, ""); !slices.Equal(got, quicloadArgv("q", "A", 2, 1, 4<<20, 2)) {
		t.Errorf("quicload, bulk: %q", got)
	}
	// dnsperf: -fw-dns-depth queries outstanding per client.
	if got := fc.clientArgv(tools, sc("dns"), "127.0.0.1:53", 10, 2, "/q"); !slices.Equal(got, dnsperfArgv("d", "127.0.0.1:53", 1, 10, 2, 2, "/q")) {
		t.Errorf("dnsperf: %q", got)
	}
	// The QUIC and DNS servers listen on UDP.
	if network, addr, err := fwAddr(sc("quic-small")); network != "udp" || err != nil || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("fwAddr(quic-small) = %s, %s, %v", network, addr, err)
	}
	// Every server a scenario names is one frameserve knows, and the
	// reference is among them.
	for _, s := range fwScenarios {
		if !slices.Contains(s.servers, s.ref) {
			t.Errorf("%s: reference %s not among %v", s.name, s.ref, s.servers)
		}
	}
}

// TestInstaller: tools on PATH are used as they are; missing ones are
// installed with apt-get as root (after an update if the first install
// fails), and otherwise reported with the reason.
func TestInstaller(t *testing.T) {
	type call = string
	for _, tc := range []struct {
		name      string
		euid      int
		have      []string // on PATH before
		installs  []string // what a successful install adds
		failFirst bool     // the first install fails
		failAll   bool     // every apt-get fails
		wantCalls []call
		wantFound []string
		wantWhy   string // in the missing tools' errors
	}{
		{name: "present", have: []string{"wrk", "h2load"}, wantFound: []string{"h2load", "wrk"}},
		{name: "not root", euid: 1000, have: []string{"wrk", "apt-get"}, wantFound: []string{"wrk"}, wantWhy: "not root"},
		{name: "no apt-get", have: []string{"wrk"}, wantFound: []string{"wrk"}, wantWhy: "no apt-get"},
		{name: "installed", have: []string{"apt-get"}, installs: []string{"wrk", "h2load"},
			wantCalls: []call{"apt-get install -y --no-install-recommends wrk nghttp2-client"}, wantFound: []string{"h2load", "wrk"}},
		{name: "after update", have: []string{"apt-get", "wrk"}, installs: []string{"h2load"}, failFirst: true,
			wantCalls: []call{"apt-get install -y --no-install-recommends nghttp2-client", "apt-get update",
				"apt-get install -y --no-install-recommends nghttp2-client"}, wantFound: []string{"h2load", "wrk"}},
		{name: "fails", have: []string{"apt-get"}, failAll: true,
			wantCalls: []call{"apt-get install -y --no-install-recommends wrk nghttp2-client", "apt-get update"}, wantWhy: "installing it failed: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := slices.Clone(tc.have)
			var calls []call
			var logged []string
			in := installer{euid: tc.euid, log: func(s string) { logged = append(logged, s) },
				lookPath: func(name string) (string, error) {
					if slices.Contains(path, name) {
						return "/usr/bin/" + name, nil
					}
					return "", errors.New("not found")
				},
				run: func(_ context.Context, env []string, argv ...string) error {
					calls = append(calls, strings.Join(argv, " "))
					if !slices.Equal(env, []string{"DEBIAN_FRONTEND=noninteractive"}) {
						t.Errorf("env %q", env)
					}
					if tc.failAll || (tc.failFirst && len(calls) == 1) {
						return errors.New("boom")
					}
					if argv[1] == "install" {
						path = append(path, tc.installs...)
					}
					return nil
				}}
			found, missing := in.ensure(context.Background(), []string{"wrk", "h2load"})
			if (len(logged) > 0) != (len(tc.wantCalls) > 0) {
				t.Errorf("logged %q, ran %q: want a line when it installs", logged, calls)
			}
			if !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("ran %q, want %q", calls, tc.wantCalls)
			}
			var names []string
			for n, p := range found {
				names = append(names, n)
				if p != "/usr/bin/"+n {
					t.Errorf("%s at %s", n, p)
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.wantFound) {
				t.Errorf("found %v, want %v", names, tc.wantFound)
			}
			if found == nil || missing == nil || len(found)+len(missing) != 2 {
				t.Errorf("found %v, missing %v: want both tools in one or the other", found, missing)
			}
			for n, err := range missing {
				if !strings.Contains(err.Error(), tc.wantWhy) || !strings.Contains(err.Error(), "apt-get install "+debPackages[n]) {
					t.Errorf("%s: %v, want %q and the package to install", n, err, tc.wantWhy)
				}
			}
		})
	}
}

// TestParseThreadCPU reads a thread's schedstat and status; since sums
// the threads' differences, counting new threads from zero.
func TestParseThreadCPU(t *testing.T) {
	status := "Name:\tframeserve\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n"
	ns, sw, err := parseThreadCPU("123456789 1000 42\n", status)
	if err != nil || ns != 123456789 || sw != 15 {
		t.Errorf("parseThreadCPU = %d, %d, %v; want 123456789, 15", ns, sw, err)
	}
	for _, bad := range [][2]string{{"", status}, {"x 1 2", status}, {"1 2 3", "Name:\tx\n"}} {
		if _, _, err := parseThreadCPU(bad[0], bad[1]); err == nil {
			t.Errorf("parseThreadCPU(%q, %q) succeeded", bad[0], bad[1])
		}
	}
	before := procCPU{1: {100, 5}, 2: {50, 1}, 3: {7, 7}}
	after := procCPU{1: {300, 9}, 2: {60, 1}, 4: {40, 2}}
	if cpu, sw, gone := after.since(before); cpu != 200+10+40 || sw != 4+0+2 || gone != 1 {
		t.Errorf("since = %d ns, %d switches, %d gone; want 250, 6, 1", cpu, sw, gone)
	}
	// This process, read live.
	s, err := sampleProcCPU(os.Getpid())
	if err != nil || len(s) == 0 {
		t.Errorf("sampleProcCPU(self) = %v, %v", s, err)
	}
}

// TestFwResult: per-request, per-MiB and per-CPU-second figures from a
// client's result, the server's CPU and the client's; figures the client
// lacks stay -1.
func TestFwResult(t *testing.T) {
	r := fwResult(clientResult{Requests: 1000, Seconds: 2, ReqPerS: 500, Bytes: 4000, P50us: 10, P99us: 20, P999us: -1},
		0.5, 2.5, 300)
	for k, want := range map[string]float64{
		"server_cpu_cores": 0.2, "server_cpu_us_per_req": 500, "req_per_server_cpu_s": 2000,
		"bytes_per_s": 2000, "bytes_per_server_cpu_s": 8000, "ctx_switches_per_req": 0.3, "p999_us": -1,
	} {
		if got := r[k].(float64); !near(got, want) {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	r = fwResult(clientResult{Requests: 1000, Seconds: 2, Bytes: -1, ClientCPUs: -1}, 0, 2, 0)
	for _, k := range []string{"bytes_per_s", "req_per_server_cpu_s", "server_cpu_ms_per_mib", "client_cpu_us_per_req",
		"both_cpu_us_per_req", "req_per_both_cpu_s"} {
		if r[k].(float64) != -1 {
			t.Errorf("without bytes and CPU: %s = %v, want -1", k, r[k])
		}
	}
	// The client's CPU, and both processes' per request and per MiB: 8
	// MiB over 0.5 s of the server's CPU and 0.3 s of the client's.
	r = fwResult(clientResult{Requests: 2, Seconds: 1, Bytes: 8 << 20, ClientCPUs: 0.3}, 0.5, 1, 0)
	for k, want := range map[string]float64{
		"client_cpu_s": 0.3, "client_cpu_us_per_req": 150000, "both_cpu_us_per_req": 400000, "req_per_both_cpu_s": 2.5,
		"server_cpu_ms_per_mib": 62.5, "client_cpu_ms_per_mib": 37.5, "both_cpu_ms_per_mib": 100,
		"bytes_per_both_cpu_s": 10 << 20,
	} {
		if got := r[k].(float64); !near(got, want) {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
}

// fwFakeRun is a run of the hertz-hello scenario with the figures the
// report uses.
func fwFakeRun(server string, conns, rep int, perCPU float64, errs int64) benchfmt.Run {
	cell := benchfmt.Cell{Scenario: "hertz-hello", Mode: "http1", Depth: 1, Server: server, Conns: conns, Size: 13}
	res := fwResult(clientResult{Requests: perCPU, Seconds: 1, ReqPerS: perCPU, Bytes: 100 * perCPU, P50us: 50, P99us: 900, P999us: 2000,
		Errors: errs, ErrorText: map[bool]string{true: "3 non-2xx/3xx"}[errs > 0]}, 1, 1, 10)
	return benchfmt.Run{Kind: "run", Cell: cell, Repeat: rep, Placement: "servers on CPUs 0, clients on CPUs 1", Result: res}
}

// fwTestRuns is three repeats of the hertz-hello scenario at 100
// connections, hertz-std with errors in one, and a failed check at 1000.
func fwTestRuns() []benchfmt.Run {
	var runs []benchfmt.Run
	for rep := 1; rep <= 3; rep++ {
		f := 1 + 0.01*float64(rep-2)
		runs = append(runs,
			fwFakeRun("hertz-netpoll", 100, rep, 100000*f, 0),
			fwFakeRun("hertz-ringpoll", 100, rep, 120000*f, 0),
			fwFakeRun("hertz-std", 100, rep, 80000*f, map[bool]int64{true: 3}[rep == 2]))
	}
	runs = append(runs, benchfmt.Run{Kind: "run", Cell: benchfmt.Cell{Scenario: "hertz-hello", Mode: "http1", Depth: 1,
		Server: "hertz-ringpoll", Conns: 1000, Size: 13}, Repeat: 1, Err: "the answer's check failed: boom"})
	return runs
}

// TestFwReport: a table per scenario and load with each server's ratio to
// the reference, the paired ratios, the flagged runs; and -report writes
// the same from results.jsonl.
func TestFwReport(t *testing.T) {
	runs := fwTestRuns()
	sums := summarize(runs, hertzServers)
	var b bytes.Buffer
	writeFwReport(&b, meta{Repeats: 3, Notes: []string{"clients: wrk"}}, runs, sums, []string{"hertz-hello-http1-13B-max-cpu.svg"})
	out := b.String()
	for _, want := range []string{
		"### hertz-hello: Hertz, GET /hello (13 B), HTTP/1.1 keep-alive, wrk",
		"| server | conns | req/s | p50 µs | p99 µs | p99.9 µs | server CPU (cores) | CPU µs/req | req per server CPU-s | vs hertz-netpoll | paired vs hertz-netpoll | errors |",
		"| hertz-ringpoll | 100 | 120000 ±1% | 50 | 900 | 2000 | 1.00 | 8.33 ±1% | 120000 | 1.20 | 1.200 (1.200–1.200, n=3) | 0 |",
		"| hertz-netpoll | 100 | 100000 ±1% | 50 | 900 | 2000 | 1.00 | 10.00 ±1% | 100000 | 1 | 1 | 0 |",
		"| hertz-std | 100 | 80000 ±1% |", "| 0.80 | 0.800 (0.800–0.800, n=3) | **3** |",
		"| hertz-ringpoll | 1000 | - |", "| **1** |",
		"- repeat 2, hertz-std, 100 conns: 3 errors (3 non-2xx/3xx)",
		"- repeat 1, hertz-ringpoll, 1000 conns: the answer's check failed: boom",
		"![hertz-hello-http1-13B-max: cpu](hertz-hello-http1-13B-max-cpu.svg)",
		"- clients: wrk",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "-throughput.svg") {
		t.Errorf("report links a chart that was not written:\n%s", out)
	}
	// How the servers ran: afresh each repeat, or in turns.
	b.Reset()
	writeFwReport(&b, meta{Repeats: 3, Turns: true}, runs, sums, nil)
	if !strings.Contains(out, "on a server started afresh for each scenario and repeat") || strings.Contains(out, "-fw-turns") ||
		!strings.Contains(b.String(), "in turns (-fw-turns): each scenario's servers started once") || strings.Contains(b.String(), "started afresh") {
		t.Errorf("the reports do not say how the servers ran:\n%s\n---\n%s", out, b.String())
	}

	// -report reads the runs back and writes the family's report.
	dir := t.TempDir()
	results := filepath.Join(dir, "results.jsonl")
	var jl bytes.Buffer
	for _, run := range runs {
		writeJSONLine(&jl, run)
	}
	if err := os.WriteFile(results, jl.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	if err := reportAgain(results, dir, "ringbench -report", &stdout); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "| hertz-ringpoll | 100 | 120000 ±1% |"; !strings.Contains(string(md), want) || !strings.Contains(stdout.String(), want) {
		t.Errorf("-report: report.md and the terminal lack %q:\n%s", want, md)
	}
}

// TestFwReportFile: the file scenario adds MiB columns and compares bytes
// per server CPU-second, not downloads, which miss the ones under way at
// the end; and bytes per busy second of the server's CPUs and of all,
// paired against the reference too.
func TestFwReportFile(t *testing.T) {
	var runs []benchfmt.Run
	for rep := 1; rep <= 2; rep++ {
		for _, srv := range []struct {
			name                string
			downloads, mibs     float64
			serverBusy, allBusy float64
		}{{"http-std", 10, 700, 0.35, 1.4}, {"http-ringpoll", 10, 1400, 1.4, 2.0}} {
			cell := benchfmt.Cell{Scenario: "file", Mode: "http1", Depth: 1, Server: srv.name, Conns: 4, Size: 64 << 20}
			res := fwResult(clientResult{Requests: srv.downloads, Seconds: 1, ReqPerS: srv.downloads, Bytes: srv.mibs * (1 << 20),
				P50us: 1, P99us: 2, P999us: 3}, 0.5, 1, 0)
			res["bytes_per_server_cpus_busy_s"] = perBusy(srv.mibs*(1<<20), srv.serverBusy)
			res["bytes_per_all_cpus_busy_s"] = perBusy(srv.mibs*(1<<20), srv.allBusy)
			runs = append(runs, benchfmt.Run{Kind: "run", Cell: cell, Repeat: rep, Result: res})
		}
	}
	var b bytes.Buffer
	writeFwReport(&b, meta{Repeats: 2}, runs, summarize(runs, []string{"http-ringpoll", "http-std"}), nil)
	out := b.String()
	for _, want := range []string{
		"### file: net/http, http.ServeFile download, HTTP/1.1 keep-alive, wrk, a 64 MiB file",
		"ratio of the medians of bytes per server CPU-second",
		"| MiB/s | MiB per server CPU-s | vs http-std |",
		"| MiB per busy s, server's CPUs | MiB per busy s, all CPUs | paired vs http-std, all CPUs | errors |",
		// 1400/1.4 and 1400/2.0 MiB per busy second; 700/0.35 and 700/1.4
		// for std: 1.4 times the bytes per busy second of all CPUs.
		"| http-ringpoll | 4 | 10 ±0% | 1 | 2 | 3 | 0.50 | 50000.00 ±0% | 20 | 1400 ±0% | 2800 | 2.00 | 2.000 (2.000–2.000, n=2) | 1000 | 700 | 1.400 (1.400–1.400, n=2) | 0 |",
		"| http-std | 4 | 10 ±0% | 1 | 2 | 3 | 0.50 | 50000.00 ±0% | 20 | 700 ±0% | 1400 | 1 | 1 | 2000 | 500 | 1 | 0 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestFwReportQUIC: the QUIC scenarios add the client's CPU and both
// processes', per request (small) or per MiB (bulk, compared in bytes),
// paired against quic-std for the two processes together.
func TestFwReportQUIC(t *testing.T) {
	var runs []benchfmt.Run
	for rep := 1; rep <= 2; rep++ {
		for _, srv := range []struct {
			name             string
			server, client   float64 // CPU-seconds
			requests, mibs   float64
			scenario, format string
		}{
			{"quic-std", 1, 1, 1000, 100, "quic-bulk", ""}, {"quic-ringpoll", 0.5, 1, 1000, 100, "quic-bulk", ""},
			{"quic-std", 1, 1, 20000, -1, "quic-small", ""}, {"quic-ringpoll", 0.8, 1.2, 25000, -1, "quic-small", ""},
		} {
			cell := benchfmt.Cell{Scenario: srv.scenario, Mode: "quic", Depth: 10, Server: srv.name, Conns: 100, Size: 64}
			bytes := srv.requests * 64
			if srv.scenario == "quic-bulk" {
				cell.Depth, cell.Conns, cell.Size = 1, 2, 4<<20
				bytes = srv.mibs * (1 << 20)
			}
			res := fwResult(clientResult{Requests: srv.requests, Seconds: 1, ReqPerS: srv.requests, Bytes: bytes,
				P50us: 1, P99us: 2, P999us: 3, ClientCPUs: srv.client}, srv.server, 1, 0)
			runs = append(runs, benchfmt.Run{Kind: "run", Cell: cell, Repeat: rep, Result: res})
		}
	}
	var b bytes.Buffer
	writeFwReport(&b, meta{Repeats: 2}, runs, summarize(runs, quicServers), nil)
	out := b.String()
	for _, want := range []string{
		"- client CPU (QUIC and DNS scenarios):",
		"### quic-bulk: quic-go, large answers, quicload, 1 stream at a time per connection, each asking for 4 MiB",
		"| MiB/s | MiB per server CPU-s | vs quic-std | paired vs quic-std | server CPU ms/MiB | client CPU ms/MiB | both CPU ms/MiB | paired vs quic-std, both | errors |",
		// Half the server's CPU for the same bytes: twice the bytes per
		// server CPU-second, 2/1.5 per CPU-second of both.
		"| quic-ringpoll | 2 | 1000 ±0% | 1 | 2 | 3 | 0.50 | 500.00 ±0% | 2000 | 100 ±0% | 200 | 2.00 | 2.000 (2.000–2.000, n=2) | 5.00 | 10.00 | 15.00 | 1.333 (1.333–1.333, n=2) | 0 |",
		"| quic-std | 2 | 1000 ±0% | 1 | 2 | 3 | 1.00 | 1000.00 ±0% | 1000 | 100 ±0% | 100 | 1 | 1 | 10.00 | 10.00 | 20.00 | 1 | 0 |",
		"### quic-small: quic-go, 64 B answers on many streams, quicload, 10 streams at a time per connection, each asking for 64 B",
		"| req per server CPU-s | vs quic-std | paired vs quic-std | client CPU µs/req | both CPU µs/req | paired vs quic-std, both | errors |",
		"\"paired vs quic-std, both\" the same of requests per CPU-second of the server and the client together",
		// 25000 requests for 0.8 + 1.2 CPU-seconds: 80 µs each, 12500
		// per CPU-second of both against quic-std's 10000.
		"| quic-ringpoll | 100 | 25000 ±0% | 1 | 2 | 3 | 0.80 | 32.00 ±0% | 31250 | 1.56 | 1.562 (1.562–1.562, n=2) | 48.00 | 80.00 | 1.250 (1.250–1.250, n=2) | 0 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestMakeFile: the served file has the size asked for, and is the same
// each time (seeded), so runs serve the same bytes.
func TestMakeFile(t *testing.T) {
	a, err := makeFile(3<<20 + 5)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(a)
	b, err := makeFile(3<<20 + 5)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(b)
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if len(x) != 3<<20+5 || !bytes.Equal(x, y) || bytes.Count(x[:4096], []byte{0}) > 100 {
		t.Errorf("files of %d and %d bytes, equal %v", len(x), len(y), bytes.Equal(x, y))
	}
}

// TestBusySince: busy seconds are the wall time between two samples less
// the idle time that passed, per CPU set; an unknown sample or no time
// between gives -1.
func TestBusySince(t *testing.T) {
	at := time.Unix(1000, 0)
	a := busySample{server: cpuTicks{idle: 1000, at: at, n: 1}, all: cpuTicks{idle: 2000, at: at, n: 2}, ok: true}
	later := at.Add(2 * time.Second)
	// 100 of 200 idle ticks on the server's CPU, 100 of 400 over both.
	b := busySample{server: cpuTicks{idle: 1100, at: later, n: 1}, all: cpuTicks{idle: 2100, at: later, n: 2}, ok: true}
	s, all := a.since(b)
	if math.Abs(s-1) > 1e-9 || math.Abs(all-3) > 1e-9 {
		t.Errorf("since: server %v, all %v; want 1 and 3", s, all)
	}
	if s, all := (busySample{}).since(b); s != -1 || all != -1 {
		t.Errorf("since from an unknown sample: %v, %v; want -1, -1", s, all)
	}
	if s, _ := a.since(a); s != -1 {
		t.Errorf("since with no time between: %v, want -1", s)
	}
	if got := perBusy(100, -1); got != -1 {
		t.Errorf("perBusy(100, -1) = %v, want -1", got)
	}
}

// TestFwTurns: -fw-turns asks for turns; in their order every server is
// measured once at each connection count in each repeat, the pairs of a
// cell run back to back, and the servers' order rotates from repeat to
// repeat, so that none is always first.
func TestFwTurns(t *testing.T) {
	for _, args := range [][]string{nil, {"-fw-turns"}} {
		fc, err := fwParse(args...)
		if err != nil {
			t.Fatal(err)
		}
		if fc.turns != (len(args) > 0) {
			t.Errorf("%v: turns %v", args, fc.turns)
		}
	}
	servers := []string{"http-std", "http-ringpoll", "http-ringpoll-epoll"}
	ts := fwTurns(servers, []int{100, 1000}, 4)
	if len(ts) != 4*2*3 {
		t.Fatalf("%d turns, want 24", len(ts))
	}
	seen := map[fwTurn]int{}
	first := map[string]int{}
	for i, tu := range ts {
		seen[tu]++
		if i%3 == 0 {
			first[tu.server]++
		}
		// A cell's servers run back to back: one repeat and one count
		// for each run of three.
		if g := ts[i-i%3]; g.rep != tu.rep || g.conns != tu.conns {
			t.Errorf("turn %d %+v is not with its cell's group %+v", i, tu, g)
		}
	}
	for rep := 1; rep <= 4; rep++ {
		for _, c := range []int{100, 1000} {
			for _, s := range servers {
				if n := seen[fwTurn{rep: rep, conns: c, server: s}]; n != 1 {
					t.Errorf("repeat %d, %d conns, %s: measured %d times, want once", rep, c, s, n)
				}
			}
		}
	}
	if len(first) != 3 {
		t.Errorf("the servers that ran first in a cell: %v, want all three in turn", first)
	}
}
