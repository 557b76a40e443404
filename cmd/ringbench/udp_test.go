//go:build linux

package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseUDP(t *testing.T) {
	ss, zs, err := parseUDP("std,ringpoll", "32,1200")
	if err != nil || len(ss) != 2 || len(zs) != 2 || zs[1] != 1200 {
		t.Fatalf("parseUDP = %v, %v, %v", ss, zs, err)
	}
	for _, bad := range [][2]string{{"nosuch", "32"}, {"std", "8"}, {"std", "9000"}, {"", "32"}, {"std", "x"}} {
		if _, _, err := parseUDP(bad[0], bad[1]); err == nil {
			t.Errorf("parseUDP(%q, %q) succeeded", bad[0], bad[1])
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
		runs = append(runs, udpRun{Server: "std", Size: 32, Repeat: i, PerCPU: per, RecvPPS: per, Busy: 1})
		runs = append(runs, udpRun{Server: "ringpoll", Size: 32, Repeat: i, PerCPU: 1.5 * per, RecvPPS: 1.5 * per, Busy: 1})
		runs = append(runs, udpRun{Server: "xnet", Size: 32, Repeat: i, Err: "boom"})
	}
	var b bytes.Buffer
	writeUDPReport(&b, cfg, runs)
	out := b.String()
	for _, want := range []string{"| ringpoll", "1500 [1350-1650]", "| 1.50", "| std", "| 1.00", "| xnet", "failed"} {
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
