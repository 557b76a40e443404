package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringpoll/ringpoll"
)

// TestMain lets the test binary stand in for ringidle's child: measureAll
// re-executes os.Executable() with "-child SERVER".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestSmallRun measures a few servers with 200 connections once and checks
// that the numbers are sane: every connection served and still open, growth
// not negative, about one goroutine per connection for a goroutine per
// connection and none for the handler API. The settle time must exceed the
// 1 s for which ringpoll's Server keeps idle handler goroutines.
func TestSmallRun(t *testing.T) {
	servers := []string{"std", "ringpoll-epoll-handler", "ringpoll-epoll-conn-4k"}
	if ringpoll.UringStatus() == nil {
		servers = append(servers, "ringpoll-uring-handler")
	} else {
		t.Logf("io_uring unavailable, not measuring ringpoll-uring-handler: %v", ringpoll.UringStatus())
	}
	out := filepath.Join(t.TempDir(), "idle.jsonl")
	var stdout, stderr bytes.Buffer
	args := []string{"-n", "200", "-repeats", "1", "-settle", "1200ms", "-warmup", "256",
		"-servers", strings.Join(servers, ","), "-out", out}
	if code := cli(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	t.Logf("table:\n%s", &stdout)

	runs, sums := readJSONLines(t, out)
	if len(runs) != len(servers) || len(sums) != len(servers) {
		t.Fatalf("%d runs and %d medians, want %d of each", len(runs), len(sums), len(servers))
	}
	var stdStack float64
	for _, r := range runs {
		if r.Server == "std" {
			stdStack = r.PerConn.StackInuse
		}
	}
	for _, r := range runs {
		spec, err := parseServer(r.Server)
		if err != nil {
			t.Fatal(err)
		}
		p := r.PerConn
		if r.Error != "" || r.Failed != 0 || r.N != 200 {
			t.Errorf("%s: error %q, %d failed, n %d", r.Server, r.Error, r.Failed, r.N)
		}
		if p.RSS < 0 || p.RSSFree < 0 || p.HeapInuse <= 0 || p.BaseRSS <= 0 {
			t.Errorf("%s: RSS %.0f, scavenged %.0f, heap %.0f B/conn, baseline RSS %.0f: want growth, not shrinkage",
				r.Server, p.RSS, p.RSSFree, p.HeapInuse, p.BaseRSS)
		}
		want := float64(spec.wantGoroutines())
		if p.Goroutines < want-0.05 || p.Goroutines > want+0.05 {
			t.Errorf("%s: %.3f goroutines/conn, want about %v", r.Server, p.Goroutines, want)
		}
		if want == 1 {
			// A parked goroutine keeps at least the minimum 2 KiB stack;
			// its buffer is on the heap.
			if p.StackInuse < 1024 {
				t.Errorf("%s: stack %.0f B/conn, want a goroutine's stack", r.Server, p.StackInuse)
			}
			if p.HeapInuse < float64(spec.bufSize) {
				t.Errorf("%s: heap %.0f B/conn, want at least the %d-byte read buffer", r.Server, p.HeapInuse, spec.bufSize)
			}
		} else if p.StackInuse > stdStack/2 {
			// Not 0: stack spans of the handler goroutines the burst
			// started stay in use for a while after they exit.
			t.Errorf("%s: stack %.0f B/conn, want well under std's %.0f (no goroutine per connection)", r.Server, p.StackInuse, stdStack)
		}
	}
	for _, s := range sums {
		if s.Runs != 1 {
			t.Errorf("%s: %d runs in the median, want 1", s.Server, s.Runs)
		}
		if s.Server == "std" && s.VsStd != 1 {
			t.Errorf("std vs std = %v, want 1", s.VsStd)
		}
		if strings.HasSuffix(s.Server, "-handler") && s.MeetsTarget == nil {
			t.Errorf("%s: no verdict on the 1/4-of-std target", s.Server)
		}
		if !strings.Contains(stdout.String(), "| "+s.Server+" |") {
			t.Errorf("table has no row for %s", s.Server)
		}
	}
}

// readJSONLines reads -out's runs and medians.
func readJSONLines(t *testing.T, path string) ([]runResult, []summary) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs []runResult
	var sums []summary
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var kind struct{ Kind string }
		if err := json.Unmarshal(sc.Bytes(), &kind); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		switch kind.Kind {
		case "run":
			var r runResult
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		case "median":
			var s summary
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Fatal(err)
			}
			sums = append(sums, s)
		default:
			t.Fatalf("line of unknown kind %q", kind.Kind)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return runs, sums
}

// TestBadFlags checks that a bad command line exits 2 and says why,
// without measuring anything.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"-n", "0"}, "-n 0"},
		{[]string{"-repeats", "0"}, "-repeats 0"},
		{[]string{"-sources", "300"}, "-sources 300"},
		{[]string{"-servers", "std,bogus"}, `unknown server "bogus"`},
		{[]string{"-servers", "ringpoll-kqueue-handler"}, `unknown engine "kqueue"`},
		{[]string{"-servers", "ringpoll-epoll-handler-4k"}, "takes no buffer size"},
		{[]string{"-servers", ","}, "names no server"},
		{[]string{"-heap-profiles", "/nonexistent/dir"}, "not a directory"},
		{[]string{"-child", "nope"}, `unknown server "nope"`},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
		{[]string{"stray"}, "unexpected arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := cli(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, &stderr)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not mention %q", stderr.String(), tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestParseServer checks the server names.
func TestParseServer(t *testing.T) {
	for _, tc := range []struct {
		name          string
		kind, engine  string
		bufSize       int
		wantGoroutine int
	}{
		{"std", kindStd, "", 16 << 10, 1},
		{"std-4k", kindStd, "", 4 << 10, 1},
		{"ringpoll-uring-hybrid-handler", kindHandler, "uring-hybrid", 16 << 10, 0},
		{"ringpoll-uring-sqpoll-conn", kindConn, "uring-sqpoll", 16 << 10, 1},
		{"ringpoll-epoll-conn-64k", kindConn, "epoll", 64 << 10, 1},
		{"netpoll", kindNetpoll, "", 16 << 10, 0},
		{"gnet", kindGnet, "", 16 << 10, 0},
	} {
		s, err := parseServer(tc.name)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if s.kind != tc.kind || s.engine != tc.engine || s.bufSize != tc.bufSize || s.wantGoroutines() != tc.wantGoroutine {
			t.Errorf("%s: got %+v", tc.name, s)
		}
	}
	for _, name := range []string{"", "std-0k", "std-2048k", "ringpoll-epoll", "ringpoll--handler", "netpoll-4k", "gnet2", "ringpoll-auto-handler"} {
		if _, err := parseServer(name); err == nil {
			t.Errorf("%q: no error", name)
		}
	}
	for _, name := range strings.Split(defaultServers(), ",") {
		if _, err := parseServer(name); err != nil {
			t.Errorf("default server %q: %v", name, err)
		}
	}
}

// TestParseProcStatus checks the /proc/PID/status parser.
func TestParseProcStatus(t *testing.T) {
	m, err := parseProcStatus([]byte("Name:\tx\nVmRSS:\t    1234 kB\nRssAnon:\t  1000 kB\nThreads:\t3\n"))
	if err != nil || m.RSS != 1234<<10 || m.RssAnon != 1000<<10 {
		t.Errorf("got %+v, %v", m, err)
	}
	if _, err := parseProcStatus([]byte("Name:\tx\n")); err == nil {
		t.Error("no VmRSS: no error")
	}
	if _, err := parseProcStatus([]byte("VmRSS:\t12 MB\n")); err == nil {
		t.Error("bad unit: no error")
	}
}

// TestMedian checks the median of odd and even counts.
func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median(3,1,2) = %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median(4,1,3,2) = %v", m)
	}
}

// TestSilentConns measures connections that only connect (-talk=false):
// they must be accepted before the measurement and echo after it.
func TestSilentConns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "idle.jsonl")
	var stdout, stderr bytes.Buffer
	args := []string{"-n", "100", "-repeats", "1", "-settle", "1200ms", "-warmup", "0", "-talk=false",
		"-servers", "ringpoll-epoll-handler", "-out", out}
	if code := cli(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	runs, _ := readJSONLines(t, out)
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	r := runs[0]
	if r.Error != "" || r.Failed != 0 || r.Talk || r.PerConn.HeapInuse <= 0 {
		t.Errorf("run: error %q, %d failed, talk %v, heap %.0f B/conn", r.Error, r.Failed, r.Talk, r.PerConn.HeapInuse)
	}
	if g := r.PerConn.Goroutines; g < -0.05 || g > 0.05 {
		t.Errorf("%.3f goroutines/conn, want about 0", g)
	}
}

// TestParseAcceptBacklog checks the /proc/net/tcp reader.
func TestParseAcceptBacklog(t *testing.T) {
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9DDF 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6234737 1 0 100 0 0 10 0
   1: 0100007F:B6F3 00000000:0000 0A 00000000:00000011 00:00000000 00000000     0        0 6231625 2 0 100 0 0 10 0
   2: 0100007F:B6F3 00000000:0000 0A 00000000:00000002 00:00000000 00000000     0        0 6231626 2 0 100 0 0 10 0
   3: 0100007F:B6F3 0100007F:8000 01 00000000:00000005 00:00000000 00000000     0        0 6231627 2 0 100 0 0 10 0
`
	if q, err := parseAcceptBacklog([]byte(tcp), 0xB6F3); err != nil || q != 0x13 {
		t.Errorf("port 0xB6F3: %d, %v; want 19", q, err)
	}
	if q, err := parseAcceptBacklog([]byte(tcp), 0x9DDF); err != nil || q != 0 {
		t.Errorf("port 0x9DDF: %d, %v; want 0", q, err)
	}
	if _, err := parseAcceptBacklog([]byte(tcp), 80); err == nil {
		t.Error("no listener: no error")
	}
}
