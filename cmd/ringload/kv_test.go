//go:build linux

package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/kvproto"
	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

// kvServer is a std net key-value server for the tests, holding records
// in memory; corrupt makes it answer record 1's bytes to every get. It
// counts the requests in progress and keeps the most it saw.
type kvServer struct {
	corrupt       bool
	inFlight, max atomic.Int64
	puts          atomic.Int64
}

func startKV(t *testing.T, s *kvServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() { defer c.Close(); s.serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func (s *kvServer) serve(c net.Conn) {
	br := bufio.NewReader(c)
	var h [rpcframe.HeaderLen]byte
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return
		}
		n, _ := rpcframe.PayloadLen(h[:])
		req := make([]byte, n)
		if _, err := io.ReadFull(br, req); err != nil {
			return
		}
		if in := s.inFlight.Add(1); in > s.max.Load() {
			s.max.Store(in)
		}
		time.Sleep(100 * time.Microsecond) // a disk, so requests overlap
		op, i, _, err := kvproto.ParseRequest(req)
		out := make([]byte, rpcframe.HeaderLen, rpcframe.HeaderLen+kvproto.RecordSize)
		switch {
		case err != nil:
			out = append(out, "E"+err.Error()...)
		case op == kvproto.OpPut:
			s.puts.Add(1)
			out = append(out, kvproto.PutOK)
		default:
			if s.corrupt {
				i = 1
			}
			out = out[:rpcframe.HeaderLen+kvproto.RecordSize]
			kvproto.Record(i, out[rpcframe.HeaderLen:])
		}
		rpcframe.PutHeader(out, len(out)-rpcframe.HeaderLen)
		s.inFlight.Add(-1)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// TestLoadKV: gets and puts against a good server verify, the cap on
// requests in flight holds, puts are sent about as often as asked, and
// the server's thread count is sampled.
func TestLoadKV(t *testing.T) {
	s := &kvServer{}
	cfg := testConfig(startKV(t, s))
	cfg.proto, cfg.conns, cfg.kvRecords, cfg.kvWrites, cfg.outstanding = "kv", 32, 1000, 50, 8
	cfg.serverPID = os.Getpid()
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.VerifyErrors != 0 || res.IOErrors != 0 {
		t.Fatalf("%d requests, %d verify errors (%s), %d I/O errors (%s)", res.Requests, res.VerifyErrors, res.FirstVerifyError, res.IOErrors, res.FirstError)
	}
	if m := s.max.Load(); m > int64(cfg.outstanding) {
		t.Fatalf("the server saw %d requests at once, over -outstanding %d", m, cfg.outstanding)
	}
	if p := s.puts.Load(); p == 0 || p == int64(res.Requests) {
		t.Fatalf("%d puts of %d requests with -kv-writes 50", p, res.Requests)
	}
	if res.ServerThreadsMax < res.ServerThreads || res.ServerThreadsMax == 0 || res.Size != kvproto.RecordSize {
		t.Fatalf("threads %d, at most %d; size %d", res.ServerThreads, res.ServerThreadsMax, res.Size)
	}
}

// TestLoadKVDetectsWrongRecord: a get answered with another record's
// bytes is a verify error.
func TestLoadKVDetectsWrongRecord(t *testing.T) {
	cfg := testConfig(startKV(t, &kvServer{corrupt: true}))
	cfg.proto, cfg.kvRecords = "kv", 1000
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.VerifyErrors == 0 || !strings.Contains(res.FirstVerifyError, "record") {
		t.Fatalf("a wrong record not caught: %d verify errors, first %q", res.VerifyErrors, res.FirstVerifyError)
	}
}

// TestKVBadFlags: -proto kv needs -kv-records, takes no -depth or -rate,
// and -outstanding needs -proto kv.
func TestKVBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-proto", "kv"},
		{"-proto", "kv", "-kv-records", "10", "-depth", "2"},
		{"-proto", "kv", "-kv-records", "10", "-rate", "100"},
		{"-proto", "kv", "-kv-records", "10", "-kv-writes", "101"},
		{"-outstanding", "4"},
	} {
		var stderr strings.Builder
		if code := run(args, io.Discard, &stderr); code != 2 {
			t.Errorf("ringload %q exited %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
}
