//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingEcho is an echo server on 127.0.0.1:0 that counts the
// connections it accepts.
func countingEcho(t *testing.T) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), accepted
}

// TestLoadRates: loads one after another run on the same connections,
// each from clean streams: a paced load ends at rest though its pacer
// leaves requests unsent, a saturated one though every connection has a
// request in flight, and the next load's echoes all verify.
func TestLoadRates(t *testing.T) {
	for _, rates := range [][]float64{{2000, 0}, {0, 3000, 0}} {
		addr, accepted := countingEcho(t)
		cfg := testConfig(addr)
		cfg.conns, cfg.prime, cfg.depth = 20, true, 2
		cfg.warmup, cfg.duration = 50*time.Millisecond, 200*time.Millisecond
		rs, err := loadRates(context.Background(), cfg, rates)
		if err != nil {
			t.Fatalf("rates %v: %v", rates, err)
		}
		if len(rs) != len(rates) {
			t.Fatalf("rates %v: %d results", rates, len(rs))
		}
		for i, r := range rs {
			if r.OfferedRate != rates[i] || r.Requests == 0 || r.VerifyErrors != 0 || r.IOErrors != 0 || r.DialErrors != 0 {
				t.Errorf("rates %v, load %d: %+v", rates, i, *r)
			}
		}
		if n := accepted.Load(); n != int64(cfg.conns) {
			t.Errorf("rates %v: the server accepted %d connections, want %d (one set for every load)", rates, n, cfg.conns)
		}
	}
}

// TestRunRates: -rates prints a JSON line per load.
func TestRunRates(t *testing.T) {
	addr, _ := countingEcho(t)
	var out, errb bytes.Buffer
	code := run([]string{"-addr", addr, "-conns", "4", "-rates", "1000,0", "-warmup", "0s", "-duration", "100ms", "-json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	for i, want := range []float64{1000, 0} {
		var r result
		if err := json.Unmarshal([]byte(lines[i]), &r); err != nil || r.OfferedRate != want || r.Requests == 0 {
			t.Errorf("line %d: %v, %+v", i, err, r)
		}
	}
	for _, args := range [][]string{
		{"-rates", "x"}, {"-rates", "1,-2"}, {"-rates", "1,2", "-rate", "5"},
		{"-rates", "0,1000", "-proto", "kv", "-kv-records", "10"},
	} {
		if code := run(append([]string{"-addr", addr}, args...), &out, &errb); code != 2 {
			t.Errorf("run(%q) exit %d, want 2", args, code)
		}
	}
}
