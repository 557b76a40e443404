//go:build linux

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// altTestConfig loads a and b, both measured as this process (whose CPU
// includes the clients': enough to check the bookkeeping).
func altTestConfig(a, b string) altConfig {
	pid := os.Getpid()
	return altConfig{addrs: [2]string{a, b}, pids: [2]int{pid, pid}, conns: 4, size: 256, proto: "echo", depth: 1, period: 20 * time.Millisecond, warmup: 10 * time.Millisecond, pairs: 4}
}

// TestAltLoad: both servers get their turns, every pair gives a ratio,
// and every echo is checked.
func TestAltLoad(t *testing.T) {
	res, err := altLoad(context.Background(), altTestConfig(startStd(t, "echo"), startStd(t, "echo")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Pairs != 4 || len(res.Ratios) != 4 {
		t.Fatalf("%d pairs, %d ratios: want 4", res.Pairs, len(res.Ratios))
	}
	for i := range 2 {
		if res.Requests[i] == 0 || res.ServerCPUNS[i] <= 0 || res.CPUusPerReq[i] <= 0 {
			t.Errorf("side %d: %d requests, %d ns, %v µs a request", i, res.Requests[i], res.ServerCPUNS[i], res.CPUusPerReq[i])
		}
	}
	for _, r := range res.Ratios {
		if r <= 0 {
			t.Errorf("ratio %v", r)
		}
	}
	if res.RatioLo > res.RatioMedian || res.RatioHi < res.RatioMedian {
		t.Errorf("median %v outside its interval %v-%v", res.RatioMedian, res.RatioLo, res.RatioHi)
	}
	if res.VerifyErrors != 0 || res.FirstError != "" {
		t.Errorf("%d verify errors, first error %q", res.VerifyErrors, res.FirstError)
	}
	var out bytes.Buffer
	if err := writeAlt(&out, res, false); err != nil || !strings.Contains(out.String(), "of 4 pairs") {
		t.Errorf("text report (%v):\n%s", err, out.String())
	}
}

// wantWholeBatches checks that each side counted a positive number of
// whole batches of depth requests.
func wantWholeBatches(t *testing.T, res *benchfmt.TurnsResult, depth uint64) {
	t.Helper()
	for i := range 2 {
		if res.Requests[i] == 0 || res.Requests[i]%depth != 0 {
			t.Errorf("side %d: %d requests, want a positive multiple of %d (whole batches)", i, res.Requests[i], depth)
		}
	}
}

// TestAltPipelinedRPC: length-prefixed messages, eight in flight per
// connection, every reply checked and every message counted.
func TestAltPipelinedRPC(t *testing.T) {
	cfg := altTestConfig(startStd(t, "rpc"), startStd(t, "rpc"))
	cfg.proto, cfg.depth = "rpc", 8
	res, err := altLoad(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantWholeBatches(t, res, 8)
	if res.Pairs != 4 || res.VerifyErrors != 0 || res.Proto != "rpc" || res.Depth != 8 {
		t.Errorf("%d pairs, %d verify errors (%q), proto %q depth %d", res.Pairs, res.VerifyErrors, res.FirstError, res.Proto, res.Depth)
	}
	var out bytes.Buffer
	if err := writeAlt(&out, res, false); err != nil || !strings.Contains(out.String(), "256 B rpc, 8 in flight") {
		t.Errorf("text report (%v):\n%s", err, out.String())
	}
}

// TestAltPaced: with a rate, every turn is paced: both sides served,
// every reply checked, whole batches counted, and a batch the pacer did
// not send before its turn ended goes in a later turn (the run would hang,
// or a reply go unmatched, if it did not).
func TestAltPaced(t *testing.T) {
	cfg := altTestConfig(startStd(t, "rpc"), startStd(t, "rpc"))
	// Four connections at 400 req/s in pipelines of two: each turn of
	// 20 ms sends about four batches, so most connections wait out most
	// turns with a batch prepared that the pacer never reaches.
	cfg.proto, cfg.depth, cfg.rate, cfg.pairs = "rpc", 2, 400, 8
	res, err := altLoad(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantWholeBatches(t, res, 2)
	if res.Pairs != 8 || res.VerifyErrors != 0 || res.Rate != 400 {
		t.Errorf("%d pairs, %d verify errors (%q), rate %v", res.Pairs, res.VerifyErrors, res.FirstError, res.Rate)
	}
	var out bytes.Buffer
	if err := writeAlt(&out, res, false); err != nil || !strings.Contains(out.String(), "400 req/s a turn") {
		t.Errorf("text report (%v):\n%s", err, out.String())
	}
}

// TestAltDetectsCorruption: a server that flips a byte is caught on its
// side.
func TestAltDetectsCorruption(t *testing.T) {
	good, bad := startStd(t, "echo"), startEcho(t, echoCorrupt, 0)
	res, err := altLoad(context.Background(), altTestConfig(good, bad))
	if err != nil {
		t.Fatal(err)
	}
	if res.VerifyErrors == 0 || !strings.Contains(res.FirstError, bad) {
		t.Fatalf("%d verify errors, first %q: want the corrupting server %s named", res.VerifyErrors, res.FirstError, bad)
	}
}

// TestAltServerHangsUp: a server that drops its connections ends the run
// with an error naming it, instead of waiting for turns that cannot come.
func TestAltServerHangsUp(t *testing.T) {
	good, gone := startStd(t, "echo"), startEcho(t, echoHangUp, 256)
	cfg := altTestConfig(good, gone)
	cfg.pairs = 50 // the hang-up comes within the first turns
	_, err := altLoad(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), gone) {
		t.Fatalf("altLoad: %v, want an error naming %s", err, gone)
	}
}

// TestCheckAlt: what -alt-addr cannot run is refused with the reason.
func TestCheckAlt(t *testing.T) {
	ok := altConfig{addrs: [2]string{"a:1", "b:1"}, pids: [2]int{1, 2}, conns: 1, size: 16, proto: "echo", depth: 1, period: time.Second, pairs: 2}
	for _, good := range []func(*altConfig){
		func(*altConfig) {},
		func(c *altConfig) { c.proto, c.depth = "rpc", 8 },
		func(c *altConfig) { c.depth = 16 },
		func(c *altConfig) { c.rate = 2 },
	} {
		c := ok
		good(&c)
		if err := checkAlt(c); err != nil {
			t.Errorf("checkAlt(%+v): %v", c, err)
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*altConfig)
		want string
	}{
		{"negative rate", func(c *altConfig) { c.rate = -1 }, "-rate -1"},
		{"a batch a turn", func(c *altConfig) { c.rate, c.depth = 10, 8 }, "two batches of -depth 8"},
		{"kv", func(c *altConfig) { c.proto = "kv" }, "-proto echo or rpc"},
		{"no depth", func(c *altConfig) { c.depth = 0 }, "-depth 1 or more"},
		{"same address", func(c *altConfig) { c.addrs[1] = c.addrs[0] }, "a second server"},
		{"no pid", func(c *altConfig) { c.pids[1] = 0 }, "-alt-pid"},
		{"one pair", func(c *altConfig) { c.pairs = 1 }, "at least 2 pairs"},
		{"short", func(c *altConfig) { c.size = 8 }, "16 bytes"},
	} {
		c := ok
		tc.edit(&c)
		if err := checkAlt(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestAltDialFails: a second server that is not there is named, and the
// first one's connections are closed.
func TestAltDialFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	_, err = altLoad(context.Background(), altTestConfig(startStd(t, "echo"), gone))
	if err == nil || !strings.Contains(err.Error(), "dial "+gone) {
		t.Fatalf("altLoad: %v, want a dial error naming %s", err, gone)
	}
}
