package charts

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output")

const goldenDir = "testdata/golden"

// wantCharts are the charts testdata/results.jsonl gives: the rpc group has
// no syscall counts at all, so no syscalls chart.
var wantCharts = []string{
	"echo-pingpong-1024B-max-cpu.svg",
	"echo-pingpong-1024B-max-p99.svg",
	"echo-pingpong-1024B-max-syscalls.svg",
	"echo-pingpong-1024B-max-throughput.svg",
	"rpc-pipeline8-512B-rate40000-cpu.svg",
	"rpc-pipeline8-512B-rate40000-p99.svg",
	"rpc-pipeline8-512B-rate40000-throughput.svg",
}

func readTestdata(t *testing.T) []benchfmt.Summary {
	t.Helper()
	f, err := os.Open("testdata/results.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// render renders the test data into a fresh directory and checks that the
// expected files, and only those, were written and returned.
func render(t *testing.T) (dir string, paths []string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "charts") // Render creates it
	paths, err := Render(readTestdata(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, name := range wantCharts {
		want = append(want, filepath.Join(dir, name))
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("Render returned\n%s\nwant\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(wantCharts) {
		t.Errorf("%d files in %s, want %d", len(entries), dir, len(wantCharts))
	}
	return dir, paths
}

func TestGolden(t *testing.T) {
	_, paths := render(t)
	if *update {
		if err := os.RemoveAll(goldenDir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range paths {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join(goldenDir, filepath.Base(path))
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (%d vs %d bytes); if the change is intended, run go test -update and look at the new charts",
				filepath.Base(path), golden, len(got), len(want))
		}
	}
	if !*update {
		entries, err := os.ReadDir(goldenDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !slices.Contains(wantCharts, e.Name()) {
				t.Errorf("stale golden file %s", filepath.Join(goldenDir, e.Name()))
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	dir1, paths := render(t)
	dir2, _ := render(t)
	for _, p := range paths {
		a, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir2, filepath.Base(p)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two renderings of the same input differ", filepath.Base(p))
		}
	}
	_ = dir1
}

// svgText decodes an SVG document to its end, failing on malformed XML,
// and returns the contents of its text elements.
func svgText(t *testing.T, data []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	var texts []string
	var inText bool
	var sawSVG bool
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("malformed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			sawSVG = sawSVG || tok.Name.Local == "svg"
			inText = tok.Name.Local == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		}
	}
	if !sawSVG {
		t.Fatal("no svg element")
	}
	return texts
}

func TestSVGContents(t *testing.T) {
	_, paths := render(t)
	want := map[string][]string{
		"echo-pingpong-1024B-max-throughput.svg": {
			"echo, 1024 B, ping-pong, max load: requests/s", "requests/s", "connections",
			"std", "epoll", "uring", "1", "16", "256"},
		"echo-pingpong-1024B-max-p99.svg": {
			"echo, 1024 B, ping-pong, max load: p99 latency", "p99 latency (µs)", "std", "epoll", "uring"},
		"echo-pingpong-1024B-max-cpu.svg": {
			"echo, 1024 B, ping-pong, max load: server CPU per request", "server CPU per request (µs)",
			"std", "epoll", "uring"},
		"echo-pingpong-1024B-max-syscalls.svg": {
			"echo, 1024 B, ping-pong, max load: server syscalls per request", "server syscalls per request",
			"std", "uring", "(library count, lower bound)", "epoll", "not measured"},
		"rpc-pipeline8-512B-rate40000-throughput.svg": {
			"rpc, 512 B, pipeline depth 8, 40000 req/s offered: requests/s", "std", "netpoll", "uring",
			"10", "50", "100"},
		"rpc-pipeline8-512B-rate40000-p99.svg": {"std", "netpoll", "uring"},
		"rpc-pipeline8-512B-rate40000-cpu.svg": {"std", "netpoll", "uring"},
	}
	for _, p := range paths {
		name := filepath.Base(p)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			texts := svgText(t, data)
			for _, w := range want[name] {
				if !slices.Contains(texts, w) {
					t.Errorf("no text %q in %q", w, texts)
				}
			}
			// The legend lists the servers std first, then by name.
			var order []string
			for _, s := range texts {
				if slices.Contains([]string{"std", "epoll", "netpoll", "uring"}, s) {
					order = append(order, s)
				}
			}
			if strings.Contains(name, "syscalls") {
				// Servers without points come last.
				if want := []string{"std", "uring", "epoll"}; !slices.Equal(order, want) {
					t.Errorf("legend order %q, want %q", order, want)
				}
				return
			}
			if len(order) != 3 || order[0] != "std" || !slices.IsSorted(order[1:]) {
				t.Errorf("legend order %q, want std first, then sorted", order)
			}
			for _, s := range []string{"library count", "not measured"} {
				if bytes.Contains(data, []byte(s)) {
					t.Errorf("unexpected %q", s)
				}
			}
		})
	}
}

func TestRead(t *testing.T) {
	const sum = `{"kind":"summary","scenario":"echo","mode":"pingpong","depth":1,"server":"std","conns":4,"size":64,"req_per_s":{"median":10,"min":9,"max":11,"n":3}}`
	const run = `{"kind":"run","scenario":"echo","mode":"pingpong","server":"std","conns":4,"result":{"req_per_s":10}}`
	in := run + "\n\n" + sum + "\n" + run + "\r\n" + `{"kind":"other"}` + "\n" + sum // no final newline
	sums, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 {
		t.Fatalf("%d summaries, want 2", len(sums))
	}
	s := sums[0]
	if s.Server != "std" || s.Conns != 4 || s.Size != 64 || s.ReqPerS != (benchfmt.Stat{Median: 10, Min: 9, Max: 11, N: 3}) {
		t.Errorf("summary %+v", s)
	}
	if g := s.Group(); g != "echo-pingpong-64B-max" {
		t.Errorf("group %q", g)
	}
}

func TestReadErrors(t *testing.T) {
	const run = `{"kind":"run","server":"std"}`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not json", run + "\n" + run + "\nnot json\n", "line 3"},
		{"truncated", run + "\n{\"kind\":\"summary\",\"conns\":", "line 2"},
		{"not an object", "[1,2]\n", "line 1"},
		{"bad field", run + "\n\n" + `{"kind":"summary","conns":"many"}` + "\n", "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sums, err := Read(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("no error, %d summaries", len(sums))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	sums, err := Read(strings.NewReader(""))
	if err != nil || len(sums) != 0 {
		t.Fatalf("Read of nothing: %v, %v", sums, err)
	}
	sums, err = Read(strings.NewReader(`{"kind":"run"}` + "\n"))
	if err != nil || len(sums) != 0 {
		t.Fatalf("Read of runs only: %v, %v", sums, err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	paths, err := Render(sums, dir)
	if err != nil || len(paths) != 0 {
		t.Fatalf("Render of nothing: %v, %v", paths, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Render of nothing made %s: %v", dir, err)
	}
}

func TestUnmeasured(t *testing.T) {
	// Only throughput was measured: one chart; a duplicate cell replaces
	// the earlier one.
	cell := benchfmt.Cell{Scenario: "echo", Mode: "pipeline", Depth: 4, Server: "uring", Conns: 8, Size: 128, Rate: 1000}
	sums := []benchfmt.Summary{
		{Kind: "summary", Cell: cell, ReqPerS: benchfmt.Stat{Median: 5, Min: 5, Max: 5, N: 1}},
		{Kind: "summary", Cell: cell, ReqPerS: benchfmt.Stat{Median: 1000, Min: 990, Max: 1010, N: 2}},
	}
	dir := t.TempDir()
	paths, err := Render(sums, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "echo-pipeline4-128B-rate1000-throughput.svg")}
	if !slices.Equal(paths, want) {
		t.Fatalf("paths %q, want %q", paths, want)
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	texts := svgText(t, data)
	for _, w := range []string{"echo, 128 B, pipeline depth 4, 1000 req/s offered: requests/s", "uring", "8"} {
		if !slices.Contains(texts, w) {
			t.Errorf("no text %q in %q", w, texts)
		}
	}
	// The y axis reaches the later cell's max: a tick label of 1000 or
	// more in k.
	if !slices.ContainsFunc(texts, func(s string) bool { return strings.HasSuffix(s, "k") }) &&
		!slices.Contains(texts, "1000") {
		t.Errorf("y axis does not reach 1000: %q", texts)
	}
}

func TestGroups(t *testing.T) {
	var sums []benchfmt.Summary
	for _, srv := range []string{"uring", "std", "epoll", "gnet"} {
		for _, c := range []int{64, 1, 8} {
			sums = append(sums, benchfmt.Summary{Kind: "summary", Cell: benchfmt.Cell{
				Scenario: "echo", Mode: "pingpong", Server: srv, Conns: c, Size: 1024}})
		}
	}
	sums = append(sums, benchfmt.Summary{Kind: "summary", Cell: benchfmt.Cell{
		Scenario: "echo", Mode: "pingpong", Server: "std", Conns: 1, Size: 1024, Rate: 500}})
	gs := groups(sums)
	if len(gs) != 2 || gs[0].name != "echo-pingpong-1024B-max" || gs[1].name != "echo-pingpong-1024B-rate500" {
		t.Fatalf("groups %v", gs)
	}
	if want := []string{"std", "epoll", "gnet", "uring"}; !slices.Equal(gs[0].servers, want) {
		t.Errorf("servers %q, want %q", gs[0].servers, want)
	}
	var conns []int
	for _, s := range gs[0].byServer["gnet"] {
		conns = append(conns, s.Conns)
	}
	if want := []int{1, 8, 64}; !slices.Equal(conns, want) {
		t.Errorf("conns %v, want %v", conns, want)
	}
}

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		cell benchfmt.Cell
		want string
	}{
		{benchfmt.Cell{Scenario: "echo", Mode: "pingpong", Depth: 1, Size: 1024},
			"echo, 1024 B, ping-pong, max load"},
		{benchfmt.Cell{Scenario: "rpc", Mode: "pipeline", Depth: 8, Size: 512, Rate: 40000},
			"rpc, 512 B, pipeline depth 8, 40000 req/s offered"},
		{benchfmt.Cell{Scenario: "rpc", Mode: "burst", Size: 0, Rate: 2500.5},
			"rpc, 0 B, burst, 2500.5 req/s offered"},
	} {
		if got := describe(tc.cell); got != tc.want {
			t.Errorf("describe(%+v) = %q, want %q", tc.cell, got, tc.want)
		}
	}
}

func TestYTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var ls []string
		for _, tk := range yTicks(lo, hi) {
			if tk.Label != "" {
				ls = append(ls, tk.Label)
			}
		}
		return ls
	}
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 275000, []string{"0", "50k", "100k", "150k", "200k", "250k"}},
		{0, 14.7, []string{"0", "2.5", "5", "7.5", "10", "12.5"}},
		{0, 2.2, []string{"0", "0.5", "1", "1.5", "2"}},
		{0, 0.3, []string{"0", "0.05", "0.1", "0.15", "0.2", "0.25", "0.3"}},
		{0, 1.3e6, []string{"0", "250k", "500k", "750k", "1M", "1.25M"}},
	} {
		if got := labels(tc.lo, tc.hi); !slices.Equal(got, tc.want) {
			t.Errorf("yTicks(%v, %v) labels %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
	if ts := yTicks(1, 1); ts != nil {
		t.Errorf("yTicks of an empty range: %v", ts)
	}
}

func TestMetrics(t *testing.T) {
	if got, want := Metrics(), []string{"throughput", "p99", "cpu", "syscalls"}; !slices.Equal(got, want) {
		t.Errorf("Metrics() = %q, want %q", got, want)
	}
}

func TestLongTitle(t *testing.T) {
	// A title wider than the chart is broken after the group's
	// description; an unnamed server still gets a legend entry.
	cell := benchfmt.Cell{Scenario: "a-scenario-with-a-rather-long-name", Mode: "pipeline", Depth: 128,
		Size: 1048576, Rate: 1234567.5, Conns: 1}
	s := benchfmt.Summary{Kind: "summary", Cell: cell, CPUusPerReq: benchfmt.Stat{Median: 3, Min: 3, Max: 3, N: 1}}
	dir := t.TempDir()
	paths, err := Render([]benchfmt.Summary{s}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || filepath.Base(paths[0]) != "a-scenario-with-a-rather-long-name-pipeline128-1048576B-rate1234568-cpu.svg" {
		t.Fatalf("paths %q", paths)
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	texts := svgText(t, data)
	for _, w := range []string{
		"a-scenario-with-a-rather-long-name, 1048576 B, pipeline depth 128, 1234567.5 req/s offered:",
		"server CPU per request",
		"(unnamed server)",
	} {
		if !slices.Contains(texts, w) {
			t.Errorf("no text %q in %q", w, texts)
		}
	}
}

func TestFileName(t *testing.T) {
	if got, want := fileName("rpc/x-pipeline8-512B max"), "rpc_x-pipeline8-512B_max"; got != want {
		t.Errorf("fileName = %q, want %q", got, want)
	}
}
