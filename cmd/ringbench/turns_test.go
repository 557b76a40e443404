//go:build linux

package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// TestTurnsPeers: turns meet the twin and the peers, not the default's
// other variants, and measure every saturated load once, paced ones only
// when asked.
func TestTurnsPeers(t *testing.T) {
	servers, err := parseServers("uring,uring-twin,uring-inline,epoll,std,netpoll,gnet,c-liburing")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range turnsPeers(servers) {
		names = append(names, s.name)
	}
	if want := []string{"uring-twin", "std", "netpoll", "gnet", "c-liburing"}; !slices.Equal(names, want) {
		t.Errorf("turns meet %q, want %q", names, want)
	}
	loads, err := parseLoads("echo:1024:pp:max,echo:1024:pp:40000,rpc:1024:p8:max,echo:512:p16:max,echo:512:pp:max,echo:1024:pp:max")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range turnsLoads(loads, false) {
		got = append(got, l.turnsKey().String())
	}
	if want := []string{"echo 1024 B", "rpc 1024 B, 8 in flight", "echo 512 B, 16 in flight", "echo 512 B"}; !slices.Equal(got, want) {
		t.Errorf("turns loads %q, want %q", got, want)
	}
	got = got[:0]
	for _, l := range turnsLoads(loads, true) {
		got = append(got, l.turnsKey().String())
	}
	if want := []string{"echo 1024 B", "echo 1024 B at 40000 req/s", "rpc 1024 B, 8 in flight", "echo 512 B, 16 in flight", "echo 512 B"}; !slices.Equal(got, want) {
		t.Errorf("turns loads with -turns-paced %q, want %q", got, want)
	}
	cfg := &config{servers: servers, loads: loads, conns: []int{10, 100}}
	if n := turnsCount(cfg); n != 4*2*5 {
		t.Errorf("turnsCount %d, want 40", n)
	}
	cfg.turnsPaced = true
	if n := turnsCount(cfg); n != 5*2*5 {
		t.Errorf("turnsCount with -turns-paced %d, want 50", n)
	}
	cfg.turnsPaced = false
	cfg.servers = slices.DeleteFunc(cfg.servers, func(s server) bool { return s.name == defaultServer })
	if n := turnsCount(cfg); n != 0 {
		t.Errorf("turnsCount without the default %d, want 0", n)
	}
}

// TestWriteTurns: one row per load and connection count, each cell the
// median and interval, and a verdict against the Go peers only: ahead
// where every interval lies above 1, behind where one lies below, level
// otherwise; the twin and C do not decide it.
func TestWriteTurns(t *testing.T) {
	fig := func(m, lo, hi float64) *benchfmt.TurnsResult {
		return &benchfmt.TurnsResult{Pairs: 12, RatioMedian: m, RatioLo: lo, RatioHi: hi, CPUusPerReq: [2]float64{7, 7.5}}
	}
	runs := []turnsRun{
		{Kind: "turns", Peer: "uring-twin", Conns: 100, Size: 1024, Result: fig(1.01, 0.97, 1.04)},
		{Kind: "turns", Peer: "std", Conns: 100, Size: 1024, Result: fig(1.10, 1.05, 1.15)},
		{Kind: "turns", Peer: "gnet", Conns: 100, Size: 1024, Result: fig(1.04, 1.01, 1.09)},
		{Kind: "turns", Peer: "c-liburing", Conns: 100, Size: 1024, Result: fig(0.90, 0.85, 0.95)},
		{Kind: "turns", Peer: "uring-twin", Conns: 1000, Size: 1024, Result: fig(0.99, 0.96, 1.03)},
		{Kind: "turns", Peer: "std", Conns: 1000, Size: 1024, Result: fig(1.10, 1.05, 1.15)},
		{Kind: "turns", Peer: "gnet", Conns: 1000, Size: 1024, Result: fig(1.02, 0.98, 1.06)},
		{Kind: "turns", Peer: "uring-twin", Conns: 10, Size: 1024, Result: fig(1.00, 0.98, 1.02)},
		{Kind: "turns", Peer: "std", Conns: 10, Size: 1024, Err: "std did not start: boom"},
		{Kind: "turns", Peer: "gnet", Conns: 10, Size: 1024, Result: fig(0.98, 0.97, 0.99)},
		{Kind: "turns", Peer: "std", Conns: 100, Size: 1024, Scenario: "rpc", Depth: 8, Result: fig(1.20, 1.16, 1.25)},
		{Kind: "turns", Peer: "gnet", Conns: 100, Size: 1024, Scenario: "rpc", Depth: 8, Result: fig(1.02, 0.99, 1.08)},
		{Kind: "turns", Peer: "std", Conns: 100, Size: 1024, Scenario: "echo", Depth: 1, Result: fig(1.50, 1.40, 1.60)},
		{Kind: "turns", Peer: "gnet", Conns: 10, Size: 1024, Scenario: "echo", Depth: 1, Rate: 8500, Result: fig(1.40, 1.30, 1.50)},
	}
	var md, text bytes.Buffer
	writeTurns(&md, runs, true)
	writeTurns(&text, runs, false)
	for _, want := range []string{
		"| load | conns | uring-twin | std | gnet | c-liburing | verdict |",
		"| echo 1024 B | 100 | 1.010 (0.970–1.040) | 1.100 (1.050–1.150) | 1.040 (1.010–1.090) | 0.900 (0.850–0.950) | ahead of every Go peer |",
		"| echo 1024 B | 1000 | 0.990 (0.960–1.030) | 1.100 (1.050–1.150) | 1.020 (0.980–1.060) | - | level with the Go peers |",
		"| echo 1024 B | 10 | 1.000 (0.980–1.020) | - | 0.980 (0.970–0.990) | - | behind a Go peer |",
		"| rpc 1024 B, 8 in flight | 100 | - | 1.200 (1.160–1.250) | 1.020 (0.990–1.080) | - | level with the Go peers |",
		"| echo 1024 B at 8500 req/s | 10 | - | - | 1.400 (1.300–1.500) | - | ahead of every Go peer |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Count(md.String(), "| echo 1024 B | 100 |") != 1 {
		t.Errorf("a comparison that recorded its load echo ping-pong and one of before that did not are not one row:\n%s", md.String())
	}
	if !strings.Contains(text.String(), "echo 1024 B,  100 conns: 1.010 (0.970–1.040), 1.100 (1.050–1.150), 1.040 (1.010–1.090), 0.900 (0.850–0.950), ahead of every Go peer") {
		t.Errorf("text:\n%s", text.String())
	}
	var none bytes.Buffer
	writeTurns(&none, nil, true)
	if none.Len() != 0 {
		t.Errorf("no turns, yet %q", none.String())
	}
	if got := turnsLine(runs[8]); !strings.Contains(got, "boom") {
		t.Errorf("turnsLine of a failed comparison: %q", got)
	}
}
