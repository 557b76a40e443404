//go:build linux

package main

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tringecho\nVmPeak:\t  9000 kB\nVmRSS:\t    5120 kB\nRssAnon:\t 3000 kB\n"
	if n, err := parseVmRSS([]byte(status)); err != nil || n != 5120<<10 {
		t.Errorf("parseVmRSS = %d, %v; want %d", n, err, 5120<<10)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n", "VmRSS:\n"} {
		if n, err := parseVmRSS([]byte(bad)); err == nil {
			t.Errorf("parseVmRSS(%q) = %d, want an error", bad, n)
		}
	}
	// This process has one.
	if n, err := readRSS(os.Getpid()); err != nil || n <= 0 {
		t.Errorf("readRSS(self) = %d, %v", n, err)
	}
}

// TestLoadPrime: with -prime every connection echoes once as it connects,
// and the server's resident memory is read before the dials, with the
// connections idle and at the end of the window.
func TestLoadPrime(t *testing.T) {
	for _, proto := range []string{"echo", "rpc"} {
		cfg := testConfig(startStd(t, proto))
		cfg.proto, cfg.prime, cfg.conns = proto, true, 20
		cfg.serverPID = os.Getpid()
		cfg.warmup, cfg.duration = 0, 200*time.Millisecond
		res, err := load(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		if res.Requests == 0 || res.VerifyErrors != 0 || res.DialErrors != 0 || res.IOErrors != 0 {
			t.Errorf("%s: %+v", proto, *res)
		}
		if res.ServerRSSBase <= 0 || res.ServerRSSIdle <= 0 || res.ServerRSSEnd <= 0 {
			t.Errorf("%s: server RSS %d, %d, %d bytes; note %q", proto, res.ServerRSSBase, res.ServerRSSIdle, res.ServerRSSEnd, res.ServerNote)
		}
	}
	// Without -server-pid nothing is read.
	cfg := testConfig(startStd(t, "echo"))
	cfg.warmup, cfg.duration = 0, 100*time.Millisecond
	res, err := load(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerRSSBase != -1 || res.ServerRSSIdle != -1 || res.ServerRSSEnd != -1 {
		t.Errorf("server RSS %d, %d, %d without -server-pid, want -1", res.ServerRSSBase, res.ServerRSSIdle, res.ServerRSSEnd)
	}
}

// TestLoadPrimeCorrupt: a first echo that comes back wrong fails its
// connection, and says why.
func TestLoadPrimeCorrupt(t *testing.T) {
	cfg := testConfig(startEcho(t, echoCorrupt, 0))
	cfg.prime = true
	_, err := load(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), errPrimeMismatch.Error()) {
		t.Errorf("load against a corrupting server with -prime: %v, want %q", err, errPrimeMismatch)
	}
}

func TestCheckNofile(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if err := checkNofile(int(min(lim.Cur, 1<<30))); err != nil {
		t.Errorf("checkNofile(the limit): %v", err)
	}
	if lim.Cur < 1<<30 {
		if err := checkNofile(int(lim.Cur) + 1); err == nil || !strings.Contains(err.Error(), "RLIMIT_NOFILE") {
			t.Errorf("checkNofile(past the limit): %v", err)
		}
	}
}

// TestLoadCloseReset: with -close-reset the connections end in resets,
// which leave no TIME_WAIT behind, and the server reads ECONNRESET;
// without it, a FIN, and the server reads the end of the stream.
func TestLoadCloseReset(t *testing.T) {
	for _, reset := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ends := make(chan error, 8)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					_, err := io.Copy(c, c)
					ends <- err // nil at the end of the stream
				}()
			}
		}()
		cfg := testConfig(ln.Addr().String())
		cfg.closeReset = reset
		cfg.warmup, cfg.duration = 0, 100*time.Millisecond
		if _, err := load(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		for range cfg.conns {
			select {
			case err := <-ends:
				if reset != errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("close-reset %v: the server's read ended with %v", reset, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("close-reset %v: a connection did not end", reset)
			}
		}
		ln.Close()
	}
}

// TestLoadSources: -sources spreads the connections over loopback source
// addresses, each dial still given a port at connect.
func TestLoadSources(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	seen := make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			seen <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	cfg := testConfig(ln.Addr().String())
	cfg.sources, cfg.conns = 3, 6
	cfg.warmup, cfg.duration = 0, 100*time.Millisecond
	res, err := load(context.Background(), cfg)
	if err != nil || res.DialErrors != 0 || res.Requests == 0 {
		t.Fatalf("load with -sources 3: %v, %+v", err, res)
	}
	ips := map[string]bool{}
	for range 6 {
		ips[<-seen] = true
	}
	if !ips["127.0.0.1"] || !ips["127.0.0.2"] || !ips["127.0.0.3"] || len(ips) != 3 {
		t.Errorf("connections came from %v, want 127.0.0.1 to 127.0.0.3", ips)
	}
	for _, bad := range []config{{sources: 0}, {sources: maxSources + 1}, {sources: 2, addr: "10.0.0.1:80"}} {
		c := testConfig(cmp.Or(bad.addr, "127.0.0.1:1"))
		c.sources = bad.sources
		if err := c.check(); err == nil || !strings.Contains(err.Error(), "-sources") {
			t.Errorf("check with -sources %d and -addr %s: %v", c.sources, c.addr, err)
		}
	}
}
