//go:build linux

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
	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// TestSmoke runs a one-second matrix end to end: ringbench builds
// ringecho and ringload, starts std net and a ringpoll engine (uring where
// io_uring works, else epoll) in their own processes, loads them with both
// scenarios, and writes its outputs. The bench module (netpoll, gnet,
// charts) is left out: its own tests cover the charts.
func TestSmoke(t *testing.T) {
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
		"-servers", "std," + engine, "-conns", "2,8", "-loads", "echo:100:pp:max,rpc:64:p4:5000",
		"-repeats", "1", "-warmup", "50ms", "-duration", "200ms", "-turns", "2s", "-charts=false", "-out", out,
	}, &stdout, &stderr)
	if code != 0 {
		// The servers' own logs say why one exited (they go with the
		// temporary directory).
		var logs strings.Builder
		paths, _ := filepath.Glob(filepath.Join(out, "logs", "*.log"))
		for _, p := range paths {
			b, _ := os.ReadFile(p)
			logs.WriteString("--- " + filepath.Base(p) + "\n" + string(b))
		}
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nserver logs:\n%s", code, stdout.String(), stderr.String(), logs.String())
	}

	// results.jsonl: a run per cell, every byte verified, then a summary
	// per cell.
	f, err := os.Open(filepath.Join(out, "results.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs, sums, turns int
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var kind struct{ Kind string }
		if err := json.Unmarshal(sc.Bytes(), &kind); err != nil {
			t.Fatalf("results.jsonl: %v: %s", err, sc.Bytes())
		}
		switch kind.Kind {
		case "run":
			var r benchfmt.Run
			json.Unmarshal(sc.Bytes(), &r)
			lr, ok := decode(r)
			if !ok || r.Err != "" {
				t.Errorf("run %+v failed: %s", r.Cell, r.Err)
				continue
			}
			if lr.ReqPerS <= 0 || lr.VerifyErrors != 0 || lr.IOErrors != 0 || lr.DialErrors != 0 {
				t.Errorf("run %+v: %+v", r.Cell, lr)
			}
			if lr.ServerCPUusPerReq <= 0 {
				t.Errorf("run %+v: server CPU not measured", r.Cell)
			}
			runs++
		case "summary":
			var s benchfmt.Summary
			json.Unmarshal(sc.Bytes(), &s)
			if s.Repeats != 1 || s.ReqPerS.N != 1 || s.Errors != 0 || s.VerifyErrors != 0 {
				t.Errorf("summary %+v", s)
			}
			sums++
		case "turns":
			// The default against std in turns, at the saturated
			// echo load (only where the default is "uring").
			var tr turnsRun
			json.Unmarshal(sc.Bytes(), &tr)
			if tr.Err != "" || tr.Result == nil || tr.Result.Pairs != 2 || tr.Peer != "std" || tr.Size != 100 || tr.Result.RatioMedian <= 0 {
				t.Errorf("turns %+v (result %+v)", tr, tr.Result)
			}
			turns++
		default:
			t.Errorf("results.jsonl: line of kind %q", kind.Kind)
		}
	}
	const cells = 2 * 2 * 2 // servers x loads x conns
	if runs != cells || sums != cells {
		t.Errorf("%d runs and %d summaries, want %d of each", runs, sums, cells)
	}
	wantTurns := 0
	if engine == "uring" {
		wantTurns = 2 // conns
	}
	if turns != wantTurns {
		t.Errorf("%d comparisons in turns, want %d", turns, wantTurns)
	}

	report, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## echo, 100 B, ping-pong, as fast as the load generator goes",
		"## rpc, 64 B, pipelined, 4 in flight, 5000 req/s offered",
		"| std | 2 |", "| " + engine + " | 8 |", "Ratios, ringpoll over the peer",
	} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report.md lacks %q:\n%s", want, report)
		}
	}
	if !strings.Contains(stdout.String(), "== rpc, 64 B") || !strings.Contains(stderr.String(), "load generator on CPUs") {
		t.Errorf("terminal output:\n%s\n%s", stdout.String(), stderr.String())
	}
	if wantTurns > 0 && (!strings.Contains(string(report), "## Turns: the default against each server") || !strings.Contains(stdout.String(), "== turns")) {
		t.Errorf("no turns in report.md or on the terminal:\n%s\n%s", report, stdout.String())
	}
	logs, _ := filepath.Glob(filepath.Join(out, "logs", "*.log"))
	if len(logs) != 4+2*wantTurns { // a server process per server and scenario, two per comparison in turns
		t.Errorf("server logs %v, want %d", logs, 4+2*wantTurns)
	}
}
