//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

func TestScaleFit(t *testing.T) {
	keep, notes := scaleFit([]int{10, 19000, 25000}, 20000, 28232)
	if !slices.Equal(keep, []int{10, 19000}) || len(notes) != 1 || !strings.Contains(notes[0], "25000 connections left out: the open-files limit") {
		t.Errorf("scaleFit under 20000 descriptors = %v, %q", keep, notes)
	}
	// 100 ports: 50 a source, 250 sources hold 12500.
	keep, notes = scaleFit([]int{10, 12500, 19000}, 1<<20, 100)
	if !slices.Equal(keep, []int{10, 12500}) || len(notes) != 1 || !strings.Contains(notes[0], "ephemeral port range") {
		t.Errorf("scaleFit over 100 ports = %v, %q", keep, notes)
	}
}

func TestScaleSources(t *testing.T) {
	for _, tc := range []struct{ conns, ports, want int }{
		{10, 28232, 1}, {2000, 28232, 1}, {2001, 28232, 2}, {19000, 28232, 10},
		{19000, 1000, 38}, {100000, 100, maxLoadSources}, {5, 1, 5},
	} {
		if got := scaleSources(tc.conns, tc.ports); got != tc.want {
			t.Errorf("scaleSources(%d, %d) = %d, want %d", tc.conns, tc.ports, got, tc.want)
		}
	}
	for s, want := range map[string]int{"32768\t60999\n": 28232, "1024 1024": 1, "x": 1 << 20, "9 3": 1 << 20} {
		if got := parsePortRange(s); got != want {
			t.Errorf("parsePortRange(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestScaleEstimate: the defaults, with every server the matrix has by
// default, fit the 10 minutes on 2 CPUs (the package doc and the
// flag say so).
func TestScaleEstimate(t *testing.T) {
	cfg := config{repeats: 3, warmup: 300 * time.Millisecond, duration: time.Second}
	var err error
	if cfg.servers, err = parseServers(defaultServers); err != nil {
		t.Fatal(err)
	}
	if cfg.conns, err = parseConns(defaultScaleConns); err != nil {
		t.Fatal(err)
	}
	if cfg.loads, err = parseLoads(defaultScaleLoads); err != nil {
		t.Fatal(err)
	}
	if n := scaleRuns(&cfg); n != 6*6*2*3 {
		t.Errorf("%d runs, want %d", n, 6*6*2*3)
	}
	est := scaleEstimate(&cfg)
	if est < 8*time.Minute || est > 10*time.Minute+30*time.Second {
		t.Errorf("the defaults take about %v, want about 10 minutes", est)
	}
	t.Logf("the defaults take about %v", est.Round(time.Second))
	// An rpc load has a server process of its own, and the C server none.
	cfg.loads = append(cfg.loads, load{scenario: "rpc", size: 1024, mode: "pingpong", depth: 1})
	if g := scaleLoadGroups(cfg.loads); len(g) != 2 || len(g[0]) != 2 || len(g[1]) != 1 {
		t.Errorf("scaleLoadGroups = %v", g)
	}
	if n := scaleRuns(&cfg); n != (6*2+5)*6*3 {
		t.Errorf("with an rpc load, %d runs, want %d", n, (6*2+5)*6*3)
	}
}

// TestScaleResults: ringload's JSON lines become a run per load, in
// order; loads without a line failed, with ringload's error.
func TestScaleResults(t *testing.T) {
	ls, _ := parseLoads("echo:1024:pp:20000,echo:1024:pp:max")
	cells := []benchfmt.Cell{ls[0].cell("std", 10), ls[1].cell("std", 10)}
	out := []byte(`{"req_per_s":19000,"offered_rate":20000}` + "\n" + `{"req_per_s":50000,"offered_rate":0}` + "\n")
	runs := scaleResults(cells, 2, "here", out, nil, "")
	if len(runs) != 2 || runs[0].Err != "" || runs[1].Err != "" || runs[1].Rate != 0 || runs[0].Repeat != 2 {
		t.Fatalf("runs %+v", runs)
	}
	if lr, ok := decode(runs[1]); !ok || lr.ReqPerS != 50000 {
		t.Errorf("second run's result %+v", lr)
	}
	runs = scaleResults(cells, 1, "here", out[:bytes.IndexByte(out, '\n')+1], errors.New("exit status 1"), "ringload: the connections did not come to rest")
	if runs[0].Err != "" || runs[1].Result != nil || !strings.Contains(runs[1].Err, "did not come to rest") {
		t.Errorf("a missing line: %+v", runs)
	}
	runs = scaleResults(cells, 1, "here", []byte("{bad\n"), nil, "")
	if runs[0].Result != nil || !strings.Contains(runs[0].Err, "reading ringload's result") || runs[1].Err == "" {
		t.Errorf("a bad line: %+v", runs)
	}
}

// scaleRun is a fake run of -scale with the figures its report uses.
func scaleRun(server string, conns int, rate float64, rep int, cpuUs, idlePer, endPer float64) benchfmt.Run {
	reqs := 40000.0
	if rate > 0 {
		reqs = rate
	}
	r := fakeRun(server, conns, rate, rep, reqs, cpuUs, 1.5, 100+float64(conns)/100)
	const base = 8 << 20
	r.Result["server_rss_base_bytes"] = float64(base)
	r.Result["server_rss_idle_bytes"] = base + idlePer*float64(conns)
	r.Result["server_rss_bytes"] = base + endPer*float64(conns)
	return r
}

// testScaleRuns: four servers at three counts, paced and saturated, three
// repeats 1% apart. uring spends 10% more CPU per request at 19000 than
// at 1000 (within the target), is ahead of every Go peer but gnet
// saturated at 19000, and holds less memory per idle connection than
// gnet past a fixed 4 MiB; epoll, a ringpoll engine, is not a Go peer.
func testScaleRuns() []benchfmt.Run {
	var runs []benchfmt.Run
	for rep := 1; rep <= 3; rep++ {
		f := 1 + 0.01*float64(rep-2)
		for _, c := range []int{10, 1000, 19000} {
			fixed := 4.0 * (1 << 20) / float64(c) // uring's first traffic
			cpu := map[int]float64{10: 9, 1000: 10, 19000: 11}[c]
			for _, rate := range []float64{20000, 0} {
				gnetCPU := 12.0
				if rate == 0 && c == 19000 {
					gnetCPU = 10.5 // ahead of uring here
				}
				runs = append(runs,
					scaleRun("uring", c, rate, rep, cpu*f, 2000+fixed, 2500+fixed),
					scaleRun("epoll", c, rate, rep, 30*f, 1800, 2000),
					scaleRun("std", c, rate, rep, 14*f, 9000, 9000),
					scaleRun("gnet", c, rate, rep, gnetCPU*f, 3000, 3200),
				)
			}
		}
	}
	// A run that failed: it counts in its cell's errors, nowhere else.
	runs[1] = benchfmt.Run{Kind: "run", Cell: runs[1].Cell, Repeat: 1, Err: "server did not start: boom"}
	return runs
}

// TestScaleReportGolden renders the report of testScaleRuns and compares
// it with testdata/golden/scale.md (go test -update rewrites it).
func TestScaleReportGolden(t *testing.T) {
	runs := testScaleRuns()
	sums := scaleSummaries(runs, []string{"uring", "epoll", "std", "gnet"})
	if len(sums) != 2*4*3 {
		t.Fatalf("%d summaries, want %d", len(sums), 2*4*3)
	}
	m := meta{
		Date: "2026-11-29 04:00 UTC", Command: "ringbench -scale", Machine: "2 x Test CPU, Linux 6.18",
		Go: "go1.26", Placement: "servers on CPUs 0, load generator on CPUs 1", Repeats: 3,
		Warmup: "300ms", Duration: "1s", Syscalls: "perf stat", Notes: []string{"a note"},
	}
	var md bytes.Buffer
	writeScaleReport(&md, m, runs, sums, []string{scaleChartName("echo-pingpong-1024B-rate20000", "cpu"), scaleChartName("echo-pingpong-1024B-max", "rss-idle")})
	path := filepath.Join("testdata", "golden", "scale.md")
	if *update {
		if err := os.WriteFile(path, md.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if want, err := os.ReadFile(path); err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	} else if !bytes.Equal(md.Bytes(), want) {
		t.Errorf("scale.md differs from %s (go test -update rewrites it); got:\n%s", path, md.Bytes())
	}
	// Facts the golden file must hold, so an -update cannot bless a
	// broken report.
	for _, want := range []string{
		"| CPU per request at the largest count within 15% of the figure at 1000 connections | 20000 req/s | 1.10× (10.00 µs at 1000, 11.00 at 19000; user 1.10×, kernel 1.10×) | met |",
		"| 20000 req/s | lowest 1.09× (gnet at 19000 connections), over 4 comparisons | met |",
		"| saturated | lowest 0.95× (gnet at 19000 connections), over 4 comparisons | missed: gnet at 19000 (0.95×) |",
		"| RSS per idle connection at or below gnet's | every load | uring 2000 B (10 → 19000), gnet 3000 B (10 → 19000), marginal | met |",
		"| uring | 19000 | 20000 ±0% |",           // paced, on the rate
		"| 2221 B | 2721 B | 0 |",                 // uring's RSS per connection at 19000: 2000 + 4 MiB/19000
		"| uring | 0.90 | 1.00 | 1.10 |",          // CPU over its figure at 1000
		"| uring | 421430 | 6194 | 2221 | 2000 |", // idle RSS per connection, and marginal
		"| std | 9000 | 9000 | 9000 | 9000 |",
		"| 1, 0 verify |", // the failed run
		"![echo-pingpong-1024B-rate20000: server CPU µs per request](scale-echo-pingpong-1024B-rate20000-cpu.svg)",
		"| 19000 | 2.727 (", // paired: uring over epoll, then std and gnet
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(md.String(), "scale-echo-pingpong-1024B-max-cpu.svg") {
		t.Error("report links a chart that was not written")
	}
}

// TestScaleChart: a chart is SVG with a line per server that has points,
// the default drawn thicker; a metric no server measured draws none.
func TestScaleChart(t *testing.T) {
	runs := testScaleRuns()
	sums := scaleSummaries(runs, []string{"uring", "epoll", "std", "gnet"})
	g := scaleGroups(sums)[0]
	var svg bytes.Buffer
	if !writeScaleChart(&svg, "test", []string{"uring", "epoll", "std", "gnet"}, g, func(s scaleSummary) benchfmt.Stat { return s.CPUusPerReq }) {
		t.Fatal("no chart")
	}
	var doc struct {
		Polylines []struct {
			Points string  `xml:"points,attr"`
			Width  float64 `xml:"stroke-width,attr"`
		} `xml:"polyline"`
		Texts []string `xml:"text"`
	}
	if err := xml.Unmarshal(svg.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, svg.String())
	}
	if len(doc.Polylines) != 4 || doc.Polylines[0].Width != 3 || doc.Polylines[1].Width != 1.5 {
		t.Fatalf("polylines %+v", doc.Polylines)
	}
	for _, p := range doc.Polylines {
		if n := len(strings.Fields(p.Points)); n != 3 {
			t.Errorf("a line through %d points, want 3: %q", n, p.Points)
		}
	}
	for _, want := range []string{"10", "1000", "19000", "uring", "gnet", "connections (logarithmic)"} {
		if !slices.Contains(doc.Texts, want) {
			t.Errorf("chart lacks the text %q", want)
		}
	}
	if writeScaleChart(&svg, "none", []string{"uring"}, g, func(scaleSummary) benchfmt.Stat { return benchfmt.Stat{} }) {
		t.Error("a chart without points was drawn")
	}
	dir := t.TempDir()
	names, err := writeScaleCharts(dir, []string{"uring", "epoll", "std", "gnet"}, sums)
	if err != nil || len(names) != 2*len(scaleMetrics) {
		t.Fatalf("writeScaleCharts: %d charts, %v", len(names), err)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Error(err)
		}
	}
	for v, want := range map[float64]float64{0.3: 0.5, 7: 10, 12: 20, 1: 1, 0: 1, 2500: 5000} {
		if got := niceStep(v); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", v, got, want)
		}
	}
}

// TestScaleFlags: -scale takes its counts and loads from its own flags,
// and runs alone.
func TestScaleFlags(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{
		{"-scale", "-conns", "10"}, {"-scale", "-loads", "echo:1024:pp:max"}, {"-scale", "-full"},
		{"-scale", "-turns", "2s"}, {"-scale", "-udp"}, {"-kv", "-frameworks"},
		{"-scale", "-scale-conns", "0"}, {"-scale", "-scale-loads", "x"},
	} {
		errb.Reset()
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("run(%q) exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
	run([]string{"-scale", "-scale-conns", "0"}, &out, &errb)
	if !strings.Contains(errb.String(), "-scale-conns") {
		t.Errorf("a bad -scale-conns is reported as %q", errb.String())
	}
}

// TestSmokeScale runs -scale end to end at two small counts: ringbench
// builds ringecho and ringload, starts std net and a ringpoll engine in a
// process of their own per count, runs a paced and a saturated load on
// the same connections, and writes scale.jsonl, scale.md and the charts.
func TestSmokeScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs servers")
	}
	engine := "uring"
	if ringpoll.UringStatus() != nil {
		engine = "epoll"
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{
		"-scale", "-servers", "std," + engine, "-scale-conns", "2,30", "-scale-loads", "echo:100:pp:2000,echo:100:pp:max",
		"-repeats", "1", "-warmup", "50ms", "-duration", "200ms", "-out", out,
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "scale.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var runs, sums int
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var head struct{ Kind string }
		if err := json.Unmarshal(line, &head); err != nil {
			t.Fatalf("scale.jsonl: %v: %s", err, line)
		}
		switch head.Kind {
		case "run":
			var r benchfmt.Run
			json.Unmarshal(line, &r)
			lr, ok := decode(r)
			if !ok || r.Err != "" || lr.ReqPerS <= 0 || lr.VerifyErrors != 0 || lr.DialErrors+lr.IOErrors != 0 {
				t.Errorf("run %+v: %s, %+v", r.Cell, r.Err, lr)
			}
			if lr.RSSBase <= 0 || lr.RSSIdle <= 0 || lr.RSSEnd <= 0 {
				t.Errorf("run %+v: server RSS %d, %d, %d", r.Cell, lr.RSSBase, lr.RSSIdle, lr.RSSEnd)
			}
			runs++
		case "summary":
			var s scaleSummary
			json.Unmarshal(line, &s)
			if s.Repeats != 1 || s.Errors != 0 || s.RSSIdle.N != 1 || s.RSSEnd.N != 1 {
				t.Errorf("summary %+v", s)
			}
			sums++
		default:
			t.Errorf("scale.jsonl: a line of kind %q", head.Kind)
		}
	}
	if runs != 8 || sums != 8 { // servers x counts x loads
		t.Errorf("%d runs and %d summaries, want 8 of each", runs, sums)
	}
	md, err := os.ReadFile(filepath.Join(out, "scale.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets", "## echo, 100 B, ping-pong, 2000 req/s offered", "| std | 30 |",
		"## Resident memory per idle connection", "(scale-echo-pingpong-100B-max-rss-idle.svg)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("scale.md lacks %q:\n%s", want, md)
		}
	}
	if charts, _ := filepath.Glob(filepath.Join(out, "scale-*.svg")); len(charts) < 2*(len(scaleMetrics)-1) {
		t.Errorf("%d charts: %v", len(charts), charts)
	}
	if logs, _ := filepath.Glob(filepath.Join(out, "logs", "*.log")); len(logs) != 4 { // a server process per server and count
		t.Errorf("server logs %v, want 4", logs)
	}
}

// TestScaleReportAgain: -scale -report writes scale.md and the charts
// again from the runs of a scale.jsonl.
func TestScaleReportAgain(t *testing.T) {
	dir := t.TempDir()
	var jl bytes.Buffer
	for _, r := range testScaleRuns() {
		writeJSONLine(&jl, r)
	}
	results := filepath.Join(dir, "scale.jsonl")
	if err := os.WriteFile(results, jl.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "again")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-scale", "-report", results, "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(out, "scale.md"))
	if err != nil || !strings.Contains(string(md), "| saturated | lowest 0.95× (gnet at 19000 connections)") || !bytes.Equal(md, stdout.Bytes()) {
		t.Errorf("scale.md (%v):\n%s", err, md)
	}
	if charts, _ := filepath.Glob(filepath.Join(out, "scale-*.svg")); len(charts) != 2*len(scaleMetrics) {
		t.Errorf("%d charts", len(charts))
	}
}
