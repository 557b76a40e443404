package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServers starts every server kind in turn, on a free port, and
// checks one answer of each thing it serves, with the same checks
// ringbench runs before a measured run (net/http's client, for gRPC a
// unary and a streaming call, for QUIC a 4 MiB and a 64 B stream, every
// byte checked). ringpoll kinds are skipped where ringpoll's engines
// cannot run.
func TestServers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.bin")
	if err := os.WriteFile(file, bytes.Repeat([]byte("ringpoll"), 100000), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind   string
		h2c    bool
		checks []string
	}{
		{"hertz-ringpoll", false, []string{"hello", "json"}},
		{"hertz-netpoll", false, []string{"hello", "json"}},
		{"hertz-std", false, []string{"hello", "json"}},
		{"http-ringpoll", true, []string{"hello", "json", "h2c-hello", "file"}},
		{"http-ringpoll-epoll", false, []string{"hello", "json", "file"}},
		{"http-std", true, []string{"hello", "json", "h2c-hello", "file"}},
		{"grpc-ringpoll", false, []string{"grpc-unary", "grpc-stream"}},
		{"grpc-ringpoll-epoll", false, []string{"grpc-unary", "grpc-stream"}},
		{"grpc-std", false, []string{"grpc-unary", "grpc-stream"}},
		{"quic-ringpoll", false, []string{"quic-bulk", "quic-small"}},
		{"quic-std", false, []string{"quic-bulk", "quic-small"}},
		{"dns-ringpoll", false, []string{"dns"}},
		{"dns-ringpoll-epoll", false, []string{"dns"}},
		{"dns-std", false, []string{"dns"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			cfg := config{kind: tc.kind, addr: "127.0.0.1:0", h2c: tc.h2c}
			if isHTTP(tc.kind) {
				cfg.file = file
			}
			srv, err := start(cfg)
			if errors.Is(err, errors.ErrUnsupported) && strings.Contains(tc.kind, "ringpoll") {
				t.Skipf("ringpoll cannot run here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
				defer cancel()
				if err := srv.stop(ctx); err != nil {
					t.Errorf("stop: %v", err)
				}
			}()
			for _, what := range tc.checks {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				got, err := check(ctx, what, srv.addr, file)
				cancel()
				if err != nil {
					t.Errorf("check %s: %v", what, err)
				} else {
					t.Logf("%s: %s", what, got)
				}
			}
			// A check of the wrong file fails: the checks can fail.
			if isHTTP(tc.kind) {
				other := filepath.Join(t.TempDir(), "other.bin")
				os.WriteFile(other, []byte("not the file"), 0o644)
				if _, err := check(context.Background(), "file", srv.addr, other); err == nil {
					t.Error("check file against another file succeeded")
				}
			}
		})
	}
}

// TestDocument: the JSON answer is exactly jsonSize bytes as encoding/json
// writes it.
func TestDocument(t *testing.T) {
	b, err := json.Marshal(theDocument)
	if err != nil || len(b) != jsonSize || len(theDocument.Items) < 10 {
		t.Errorf("document of %d bytes, %d items (%v); want %d bytes", len(b), len(theDocument.Items), err, jsonSize)
	}
}

// TestBadFlags: bad command lines exit 2 naming the flag.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-server is required"},
		{[]string{"-server", "nginx"}, `-server "nginx"`},
		{[]string{"-server", "http-std", "-addr", "8080"}, `-addr "8080"`},
		{[]string{"-server", "grpc-std", "-h2c"}, "-h2c: only for the http-* servers"},
		{[]string{"-server", "hertz-std", "-file", "/etc/hostname"}, "-file: only the http-* servers"},
		{[]string{"-server", "http-std", "-file", "/no/such/file"}, "-file:"},
		{[]string{"-check", "hello", "-server", "http-std"}, "exclude each other"},
		{[]string{"-check", "nosuch"}, `-check "nosuch"`},
		{[]string{"-check", "file"}, "-check file needs -file"},
		{[]string{"-server", "http-std", "extra"}, `unexpected argument "extra"`},
		{[]string{"-bogus"}, "-bogus"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestCheckFails: a check against nothing listening exits 1 saying so.
func TestCheckFails(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-check", "hello", "-addr", "127.0.0.1:1"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "check hello") {
		t.Errorf("exit %d, stderr %q; want 1", code, stderr.String())
	}
}
