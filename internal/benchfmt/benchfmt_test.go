package benchfmt

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewStat(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want Stat
	}{
		{nil, Stat{}},
		{[]float64{-1, math.NaN(), math.Inf(1)}, Stat{}}, // nothing measured
		{[]float64{3}, Stat{Median: 3, Min: 3, Max: 3, N: 1}},
		{[]float64{5, 1, 3}, Stat{Median: 3, Min: 1, Max: 5, N: 3}},
		{[]float64{4, 1, -1, 2, 3}, Stat{Median: 2.5, Min: 1, Max: 4, N: 4}},
	} {
		if got := NewStat(c.in); got != c.want {
			t.Errorf("NewStat(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
	if s := NewStat([]float64{9, 10, 11}).Spread(); math.Abs(s-0.2) > 1e-12 {
		t.Errorf("Spread = %v, want 0.2", s)
	}
	if s := (Stat{}).Spread(); s != 0 {
		t.Errorf("Spread of nothing = %v", s)
	}
}

func TestGroup(t *testing.T) {
	c := Cell{Scenario: "echo", Mode: "pingpong", Depth: 1, Server: "uring", Conns: 100, Size: 1024}
	if g := c.Group(); g != "echo-pingpong-1024B-max" {
		t.Errorf("Group = %q", g)
	}
	c = Cell{Scenario: "rpc", Mode: "pipeline", Depth: 8, Rate: 40000, Server: "std", Conns: 10, Size: 512}
	if g := c.Group(); g != "rpc-pipeline8-512B-rate40000" {
		t.Errorf("Group = %q", g)
	}
}

func TestLoopTotals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stats.json")
	if _, err := ReadLoopTotals(path); err == nil {
		t.Error("reading a missing file succeeded")
	}
	want := LoopTotals{Seq: 3, Syscalls: 10, Enters: 7, EpollWaits: 3, SQEs: 9, CQEs: 11, BytesIn: 1, BytesOut: 2}
	if err := WriteLoopTotals(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLoopTotals(path)
	if err != nil || got != want {
		t.Errorf("round trip: %+v, %v; want %+v", got, err, want)
	}
	if err := os.WriteFile(path, []byte("{half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLoopTotals(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a torn file: %v, want an error naming it", err)
	}
}

func TestMedianBootstrap(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	xs := []float64{0.9, 1.0, 1.1, 1.05, 0.95, 1.2, 0.8}
	lo, hi := Bootstrap(xs)
	if m := Median(xs); lo > m || hi < m || lo < 0.8 || hi > 1.2 {
		t.Errorf("Bootstrap(%v) = %v-%v: want an interval within the data holding the median %v", xs, lo, hi, m)
	}
	if lo2, hi2 := Bootstrap(xs); lo2 != lo || hi2 != hi {
		t.Errorf("Bootstrap is not repeatable: %v-%v, then %v-%v", lo, hi, lo2, hi2)
	}
	if lo, hi := Bootstrap(nil); lo != 0 || hi != 0 {
		t.Errorf("Bootstrap(nil) = %v, %v", lo, hi)
	}
}
