//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestUDPLoad: -proto udp sends datagrams of the size asked, numbered by
// flow, counts what it sent in the window, and stops by itself.
func TestUDPLoad(t *testing.T) {
	rc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got, badFlow atomic.Uint64
	first := make(chan struct{})
	go func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := rc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n != 100 {
				t.Errorf("datagram of %d bytes, want 100", n)
			}
			if got.Add(1) == 1 {
				close(first)
			}
			if buf[0] >= 3 {
				badFlow.Add(1)
			}
		}
	}()
	res, err := udpLoad(context.Background(), rc.LocalAddr().String(), 3, 100, true, 0, 50*time.Millisecond, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent == 0 || res.SentPPS <= 0 || res.Errors != 0 || res.Window < 0.2 {
		t.Errorf("result %+v", res)
	}
	// The sender outruns this reader, so the kernel drops some: only what
	// arrived can be checked.
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("no datagram arrived")
	}
	if badFlow.Load() != 0 {
		t.Errorf("received %d datagrams, %d with a flow number over 2", got.Load(), badFlow.Load())
	}
}

// udpEcho starts a UDP server that sends every datagram back, with its
// last byte flipped if corrupt, until the test ends, and returns its
// address.
func udpEcho(t *testing.T, corrupt bool) string {
	t.Helper()
	rc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := rc.ReadFrom(buf)
			if err != nil {
				return
			}
			if corrupt {
				buf[n-1] ^= 1
			}
			rc.WriteTo(buf[:n], from)
		}
	}()
	return rc.LocalAddr().String()
}

// TestUDPRR: -proto udp-rr gets its requests echoed, measures their
// latency, and finds a server that answers wrongly.
func TestUDPRR(t *testing.T) {
	for _, corrupt := range []bool{false, true} {
		addr := udpEcho(t, corrupt)
		var log bytes.Buffer
		begin := time.Now()
		res, err := udpRR(context.Background(), addr, 4, 64, 2000, 50*time.Millisecond, 300*time.Millisecond, &log)
		if err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		if corrupt {
			if res.Errors == 0 || res.FirstErr == "" {
				t.Errorf("corrupting server: result %+v, want errors", res)
			}
			continue
		}
		if res.Requests == 0 || res.Errors != 0 || res.P99us <= 0 || res.P50us > res.P99us {
			t.Errorf("result %+v", res)
		}
		// The latency log: one line per measured request, each a client
		// of the four, a send time within the run, the latency.
		lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
		if uint64(len(lines)) != res.Requests {
			t.Errorf("latency log: %d lines for %d requests measured", len(lines), res.Requests)
		}
		for _, l := range lines {
			var id int
			var sent, took int64
			if n, err := fmt.Sscan(l, &id, &sent, &took); n != 3 || err != nil {
				t.Fatalf("latency log line %q: %v", l, err)
			}
			if id < 0 || id >= 4 || sent < begin.UnixNano() || sent > end.UnixNano() || took <= 0 || float64(took) > res.MaxUs*1e3+1e3 {
				t.Fatalf("latency log line %q: want a client of 4, a send time within the run, a latency up to the max (%.0f µs)", l, res.MaxUs)
			}
		}
	}
}

// TestUDPRRUnpaced: without a rate each client sends its next request as
// soon as its reply came, and the run ends when its context does.
func TestUDPRRUnpaced(t *testing.T) {
	addr := udpEcho(t, false)
	res, err := udpRR(context.Background(), addr, 2, 32, 0, 20*time.Millisecond, 200*time.Millisecond, nil)
	if err != nil || res.Requests == 0 || res.Errors != 0 {
		t.Fatalf("unpaced run: %+v, %v", res, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	begin := time.Now()
	if _, err := udpRR(ctx, addr, 2, 32, 0, 0, time.Hour, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("a run whose context ended: %v, want context.Canceled", err)
	}
	if d := time.Since(begin); d > 30*time.Second {
		t.Fatalf("a cancelled run of an hour took %v", d)
	}
}

// TestUDPLoadPaced: with a rate, the load offers about that many
// datagrams a second, not more.
func TestUDPLoadPaced(t *testing.T) {
	rc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	res, err := udpLoad(context.Background(), rc.LocalAddr().String(), 2, 64, true, 20000, 50*time.Millisecond, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// The schedule bounds it from above (one batch of catch-up per flow);
	// a slow machine may send less.
	if max := 20000*res.Window + 2*64 + 2*64; float64(res.Sent) > max || res.Sent == 0 {
		t.Errorf("sent %d in %.2fs at 20000/s offered (at most %.0f)", res.Sent, res.Window, max)
	}
}
