//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseUDP(t *testing.T) {
	ss, zs, err := parseUDP("std,ringpoll", "32,1200")
	if err != nil || len(ss) != 2 || len(zs) != 2 || zs[1] != 1200 {
		t.Fatalf("parseUDP = %v, %v, %v", ss, zs, err)
	}
	if ss, _, err := parseUDP("ringpoll-pooled", "64"); err != nil || len(ss) != 1 {
		t.Errorf("parseUDP(ringpoll-pooled) = %v, %v", ss, err)
	}
	if _, _, err := parseUDP("nosuch", "32"); err == nil || !strings.Contains(err.Error(), "ringpoll-pooled") {
		t.Errorf("an unknown server's error does not list every known one: %v", err)
	}
	for _, bad := range [][2]string{{"nosuch", "32"}, {"std", "8"}, {"std", "9000"}, {"", "32"}, {"std", "x"}} {
		if _, _, err := parseUDP(bad[0], bad[1]); err == nil {
			t.Errorf("parseUDP(%q, %q) succeeded", bad[0], bad[1])
		}
	}
}

// TestUDPServerArgv: std-twin runs the very command std runs, so that its
// ratio to std shows how far two identical servers land apart; the conn
// servers answer one datagram per call through a ringpoll PacketConn.
func TestUDPServerArgv(t *testing.T) {
	b := bins{ringecho: "/b/ringecho"}
	argv := func(name string) []string { return udpServers[name](b, 9000, "/s.json", true, 0) }
	if std, twin := argv("std"), argv("std-twin"); strings.Join(std, " ") != strings.Join(twin, " ") {
		t.Errorf("std-twin runs %q, std %q", twin, std)
	}
	for name, want := range map[string]string{
		"ringpoll-conn":       "-api conn -reply",
		"ringpoll-conn-epoll": "-api conn -engine epoll -reply",
	} {
		if got := strings.Join(argv(name), " "); !strings.HasSuffix(got, want) {
			t.Errorf("%s runs %q, want it to end %q", name, got, want)
		}
	}
}

// TestUDPReport: the table has each server's medians and its ratio to std
// on datagrams per busy CPU-second; a server whose runs all failed says
// so.
func TestUDPReport(t *testing.T) {
	cfg := udpConfig{servers: []string{"ringpoll", "std", "xnet"}, sizes: []int{32}, flows: 8, repeats: 3, loadCPUs: cpuSet{1}, serverCPUs: cpuSet{0}}
	var runs []udpRun
	for i, per := range []float64{900, 1000, 1100} {
		runs = append(runs, udpRun{Server: "std", Size: 32, Repeat: i, PerCPU: per, RecvPPS: per, Busy: 1, UserBusy: -1, KernelBusy: -1})
		runs = append(runs, udpRun{Server: "ringpoll", Size: 32, Repeat: i, PerCPU: 1.5 * per, RecvPPS: 1.5 * per, Busy: 1, UserBusy: 0.25, KernelBusy: 0.75})
		runs = append(runs, udpRun{Server: "xnet", Size: 32, Repeat: i, Err: "boom"})
	}
	var b bytes.Buffer
	writeUDPReport(&b, cfg, runs)
	out := b.String()
	// ringpoll's split: a quarter of a busy CPU-second over 1500
	// datagrams a second is 166,667 ns of user time a datagram at the
	// median; std counted no ticks.
	for _, want := range []string{"| ringpoll", "1500 [1350-1650]", "| 166667 / 500000", "| 1.50", "| std", "| - ", "| 1.00", "| xnet", "failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestUDPReportPaired: request/response runs are compared with std's
// repeat by repeat, on CPU per request and on the tail, and a repeat in
// which a server failed is left out of its ratios.
func TestUDPReportPaired(t *testing.T) {
	cfg := udpConfig{servers: []string{"ringpoll", "std"}, sizes: []int{64}, flows: 100, repeats: 4, rr: true, rate: 20000, loadCPUs: cpuSet{1}, serverCPUs: cpuSet{0}}
	var runs []udpRun
	for i, r := range []struct{ cpu, p99 float64 }{{9, 120}, {8, 110}, {9, 90}} {
		// std drifts from repeat to repeat; the ratios do not.
		drift := float64(i + 1)
		runs = append(runs,
			udpRun{Server: "std", Size: 64, Repeat: i, Mode: "rr", CPUusReq: 10 * drift, P99us: 100 * drift, P999us: 500 * drift},
			udpRun{Server: "ringpoll", Size: 64, Repeat: i, Mode: "rr", CPUusReq: r.cpu * drift, P99us: r.p99 * drift, P999us: 250 * drift})
	}
	runs = append(runs,
		udpRun{Server: "std", Size: 64, Repeat: 3, Mode: "rr", CPUusReq: 10, P99us: 100, P999us: 500},
		udpRun{Server: "ringpoll", Size: 64, Repeat: 3, Mode: "rr", Err: "boom"})
	var b bytes.Buffer
	writeUDPReport(&b, cfg, runs)
	out := b.String()
	for _, want := range []string{"| server | CPU-µs per request | p99 | p99.9 |", "| ringpoll | 0.900 (", "| 1.100 (", "| 0.500 (0.500-0.500, n=3) |"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "| std |") {
		t.Errorf("std is paired with itself:\n%s", out)
	}
}

// TestUDPReportOverC: one way, with the C server among them, each server
// is also paired with C's runs repeat by repeat; C is not paired with
// itself.
func TestUDPReportOverC(t *testing.T) {
	cfg := udpConfig{servers: []string{"ringpoll", "std", cRecvmmsg}, sizes: []int{32}, flows: 8, repeats: 3, loadCPUs: cpuSet{1}, serverCPUs: cpuSet{0}}
	var runs []udpRun
	for i := range 3 {
		// The machine drifts from repeat to repeat; the ratios do not.
		drift := float64(i + 1)
		runs = append(runs,
			udpRun{Server: "std", Size: 32, Repeat: i, PerCPU: 1000 * drift, Busy: 1, UserBusy: -1, KernelBusy: -1},
			udpRun{Server: "ringpoll", Size: 32, Repeat: i, PerCPU: 1800 * drift, Busy: 1, UserBusy: -1, KernelBusy: -1},
			udpRun{Server: cRecvmmsg, Size: 32, Repeat: i, PerCPU: 2000 * drift, Busy: 1, UserBusy: -1, KernelBusy: -1})
	}
	var b bytes.Buffer
	writeUDPReport(&b, cfg, runs)
	out := b.String()
	for _, want := range []string{"| server | received per busy CPU-s | received per busy CPU-s over C's |",
		"| ringpoll | 1.800 (1.800-1.800, n=3) | 0.900 (0.900-0.900, n=3) |",
		"| c-recvmmsg | 2.000 (2.000-2.000, n=3) | - |"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestUDPChart: one bar per server that has runs, scaled to the largest,
// with its median printed.
func TestUDPChart(t *testing.T) {
	cfg := udpConfig{servers: []string{"ringpoll", "std", "xnet"}, sizes: []int{32}}
	runs := []udpRun{
		{Server: "ringpoll", Size: 32, PerCPU: 2e6}, {Server: "ringpoll", Size: 32, PerCPU: 2.2e6},
		{Server: "std", Size: 32, PerCPU: 1e6}, {Server: "xnet", Size: 32, Err: "boom"},
	}
	var b bytes.Buffer
	writeUDPChart(&b, cfg, runs, 32, 0)
	out := b.String()
	if strings.Count(out, "<rect") != 2 || !strings.Contains(out, ">2.1M<") || !strings.Contains(out, ">1M<") || strings.Contains(out, "xnet") {
		t.Errorf("chart:\n%s", out)
	}
}

// TestCPUTicksBusySince: the busy CPUs come from the wall time and the idle time
// between two readings, not from the tick-sampled busy fields.
func TestCPUTicksBusySince(t *testing.T) {
	at := time.Unix(1000, 0)
	p := cpuTicks{idle: 500, at: at, n: 2}
	for _, c := range []struct {
		name string
		c    cpuTicks
		want float64
	}{
		{"a fifth busy", cpuTicks{idle: 500 + 1600, at: at.Add(10 * time.Second), n: 2}, 0.4},
		{"all idle", cpuTicks{idle: 500 + 2000, at: at.Add(10 * time.Second), n: 2}, 0},
		{"idle over wall", cpuTicks{idle: 500 + 2100, at: at.Add(10 * time.Second), n: 2}, 0},
		{"never idle", cpuTicks{idle: 500, at: at.Add(10 * time.Second), n: 2}, 2},
		{"no time passed", cpuTicks{idle: 500, at: at, n: 2}, 0},
	} {
		if got := c.c.busySince(p); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: busySince = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestParseCPUTicks: the chosen CPUs' lines are summed into idle (idle,
// iowait), user (user, nice) and kernel (system, irq, softirq) time, steal
// and guest time into none; a CPU missing from the text is an error.
func TestParseCPUTicks(t *testing.T) {
	const stat = `cpu  100 100 100 100 100 100 100 100 0 0
cpu0 1 2 3 4 5 6 7 8 9 10
cpu1 10 20 30 40 50 60 70 80 90 100
cpu2 1000 2000 3000 4000 5000 6000 7000 8000 0 0
intr 12345
`
	got, err := parseCPUTicks(stat, cpuSet{0, 2})
	if err != nil {
		t.Fatal(err)
	}
	want := cpuTicks{user: 1 + 2 + 1000 + 2000, kern: 3 + 6 + 7 + 3000 + 6000 + 7000, idle: 4 + 5 + 4000 + 5000, n: 2}
	if got != want {
		t.Errorf("parseCPUTicks = %+v, want %+v", got, want)
	}
	if _, err := parseCPUTicks(stat, cpuSet{1, 3}); err == nil || !strings.Contains(err.Error(), "found 1 of CPUs") {
		t.Errorf("CPU 3 missing: err = %v", err)
	}
	if _, err := parseCPUTicks("cpu0 1 2 x 4 5 6 7 8\n", cpuSet{0}); err == nil {
		t.Error("a malformed field parsed")
	}
}

// TestCPUTicksUserShare: the user share is of the user and kernel ticks
// counted between two readings; none counted, or a counter that went
// back, gives -1.
func TestCPUTicksUserShare(t *testing.T) {
	p := cpuTicks{user: 100, kern: 200}
	for _, c := range []struct {
		name string
		c    cpuTicks
		want float64
	}{
		{"a quarter user", cpuTicks{user: 110, kern: 230}, 0.25},
		{"all kernel", cpuTicks{user: 100, kern: 250}, 0},
		{"all user", cpuTicks{user: 150, kern: 200}, 1},
		{"no ticks", cpuTicks{user: 100, kern: 200}, -1},
		{"went back", cpuTicks{user: 90, kern: 300}, -1},
	} {
		if got := c.c.userShareSince(p); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: userShareSince = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCUDPRR: bench/c/udp_rr.c, built as ringbench builds it, measures
// request/response against an echo server with ringload's JSON fields,
// logs every measured request with -l, and fails (exit 1, errors counted)
// against a server that answers wrongly.
func TestCUDPRR(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler:", err)
	}
	bin := filepath.Join(t.TempDir(), "udp_rr")
	_, file, _, _ := runtime.Caller(0)
	if err := cCompile(context.Background(), filepath.Join(filepath.Dir(file), "..", "..", "bench", "c", "udp_rr.c"), bin); err != nil {
		t.Fatal(err)
	}
	for _, corrupt := range []bool{false, true} {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			buf := make([]byte, 2048)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				if corrupt {
					buf[n-1] ^= 1
				}
				pc.WriteTo(buf[:n], from)
			}
		}()
		log := filepath.Join(t.TempDir(), "log")
		port := pc.LocalAddr().(*net.UDPAddr).Port
		cmd := exec.Command(bin, append([]string{"-l", log}, cUDPRRArgs(port, 4, 2000, 64, 50*time.Millisecond, 300*time.Millisecond)...)...)
		out, err := cmd.Output()
		pc.Close()
		var res struct {
			Conns    int     `json:"conns"`
			Requests uint64  `json:"requests"`
			ReqPerS  float64 `json:"req_per_s"`
			P50us    float64 `json:"p50_us"`
			P99us    float64 `json:"p99_us"`
			MaxUs    float64 `json:"max_us"`
			Lost     uint64  `json:"lost"`
			Errors   uint64  `json:"errors"`
		}
		if jerr := json.Unmarshal(out, &res); jerr != nil {
			t.Fatalf("udp_rr's output %q: %v (exit: %v)", out, jerr, err)
		}
		if corrupt {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || res.Errors == 0 {
				t.Errorf("against a corrupting server: exit %v, %+v; want exit 1 and errors", err, res)
			}
			continue
		}
		if err != nil {
			t.Fatalf("udp_rr: %v", err)
		}
		if res.Conns != 4 || res.Requests == 0 || res.Errors != 0 || res.P50us <= 0 || res.P50us > res.P99us || res.P99us > res.MaxUs {
			t.Errorf("result %+v", res)
		}
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if uint64(len(lines)) != res.Requests {
			t.Errorf("log: %d lines for %d requests", len(lines), res.Requests)
		}
		for _, l := range lines {
			var id int
			var sent, took int64
			if n, err := fmt.Sscan(l, &id, &sent, &took); n != 3 || err != nil || id < 0 || id >= 4 || sent <= 0 || took <= 0 || float64(took) > res.MaxUs*1e3+1e3 {
				t.Fatalf("log line %q: want a client of 4, a send time, a latency up to the max", l)
			}
		}
	}
}

// TestUDPOutputs: the report goes to stdout and name.md, with a chart per
// size and rate linked from it; with noCharts (-charts=false) the report
// alone.
func TestUDPOutputs(t *testing.T) {
	runs := []udpRun{{Server: "std", Size: 32, Offered: 1000, PerCPU: 1e6, RecvPPS: 1e6, Busy: 1, UserBusy: -1, KernelBusy: -1}}
	for _, noCharts := range []bool{false, true} {
		dir := t.TempDir()
		var out bytes.Buffer
		cfg := udpConfig{servers: []string{"std"}, sizes: []int{32}, out: dir, stdout: &out, noCharts: noCharts, loadCPUs: cpuSet{1}, serverCPUs: cpuSet{0}}
		if err := writeUDPOutputs(cfg, runs, "udp", []float64{1000}); err != nil {
			t.Fatal(err)
		}
		md, err := os.ReadFile(filepath.Join(dir, "udp.md"))
		if err != nil || string(md) != out.String() || !strings.Contains(out.String(), "| std") {
			t.Fatalf("noCharts %v: udp.md (%v) and stdout differ or lack the table:\n%s\n---\n%s", noCharts, err, md, out.String())
		}
		svgs, _ := filepath.Glob(filepath.Join(dir, "*.svg"))
		linked := strings.Contains(out.String(), "](udp-32-1000.svg)")
		if noCharts == (len(svgs) != 0) || noCharts == linked {
			t.Errorf("noCharts %v: charts %v, linked %v", noCharts, svgs, linked)
		}
	}
}

// TestUDPTurnsSmoke runs the one-way UDP scenario end to end with
// -udp-turns: ringbench builds ringecho and ringload, starts each server
// once for the cell (one log each, not one a run), measures every server
// in every repeat, and says in the report that the repeats were turns.
func TestUDPTurnsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs servers")
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"-udp", "-udp-turns", "-udp-servers", "std,ringpoll", "-udp-sizes", "64", "-udp-offered", "200000",
		"-udp-flows", "2", "-rps=false", "-repeats", "3", "-warmup", "100ms", "-duration", "400ms", "-charts=false", "-out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "udp.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for line := range strings.Lines(string(b)) {
		var r udpRun
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("udp.jsonl: %v: %s", err, line)
		}
		// With one CPU nothing is pinned and no server CPU's busy time
		// is read.
		if r.Err != "" || r.RecvPPS <= 0 || (r.Busy <= 0 && runtime.NumCPU() >= 2) {
			t.Errorf("run %+v", r)
		}
		seen[fmt.Sprintf("%s/%d", r.Server, r.Repeat)]++
	}
	for _, srv := range []string{"std", "ringpoll"} {
		for rep := range 3 {
			if k := fmt.Sprintf("%s/%d", srv, rep); seen[k] != 1 {
				t.Errorf("%s measured %d times, want once", k, seen[k])
			}
		}
	}
	logs, _ := filepath.Glob(filepath.Join(out, "logs", "udp-*.log"))
	if len(logs) != 2 {
		t.Errorf("server logs %v, want one a server: the servers stay up through the turns", logs)
	}
	if !strings.Contains(stdout.String(), "3 repeats in turns") {
		t.Errorf("the report does not say the repeats were turns:\n%s", stdout.String())
	}
}
