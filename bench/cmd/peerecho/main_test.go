package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBadFlags checks that run rejects bad command lines with exit status
// 2 and a message naming the flag and what it wants.
func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string // must appear in stderr
	}{
		{nil, "-impl is required"},
		{[]string{"-proto", "echo"}, "-impl is required"},
		{[]string{"-impl", "evio", "-proto", "echo"}, `-impl "evio": want netpoll or gnet`},
		{[]string{"-impl", "gnet"}, "-proto is required"},
		{[]string{"-impl", "gnet", "-proto", "http"}, `-proto "http": want echo, rpc`},
		{[]string{"-impl", "netpoll", "-proto", "udp"}, "only with -impl gnet"},
		{[]string{"-impl", "netpoll", "-proto", "rpc", "-addr", "7000"}, `-addr "7000": want host:port`},
		{[]string{"-impl", "netpoll", "-proto", "rpc", "-loops", "-1"}, "-loops -1: want a count >= 0"},
		{[]string{"-impl", "netpoll", "-proto", "rpc", "-loops", "many"}, "-loops"},
		{[]string{"-impl", "netpoll", "-proto", "rpc", "-bogus"}, "-bogus"},
		{[]string{"-impl", "netpoll", "-proto", "rpc", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tt.args, &stderr); code != 2 {
				t.Errorf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr does not mention %q:\n%s", tt.want, stderr.String())
			}
		})
	}
}

// TestParseFlags checks that good command lines parse, with defaults.
func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-impl", "gnet", "-proto", "rpc", "-addr", "[::1]:0", "-loops", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{impl: implGnet, proto: protoRPC, addr: "[::1]:0", loops: 3}
	if cfg != want {
		t.Errorf("got %+v, want %+v", cfg, want)
	}
	cfg, err = parseFlags([]string{"-impl", "netpoll", "-proto", "echo"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.addr != "127.0.0.1:7000" || cfg.loops != 0 {
		t.Errorf("defaults: got %+v", cfg)
	}
}

// peerechoCmd returns a command running peerecho (the test binary standing
// in for it, see TestMain) with args. Under -race the child is race-enabled
// too; its exit-time sleep (1 s by default) is turned off.
func peerechoCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "PEERECHO_RUN_MAIN=1",
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return cmd
}

// TestProcess runs peerecho as a process, as ringbench does: it must print
// the one listening line with the real address, serve, and on SIGTERM or
// SIGINT stop and exit 0 within the 2 s budget, printing nothing else.
func TestProcess(t *testing.T) {
	cases := []struct {
		impl, proto string
		loops       string
		sig         syscall.Signal
	}{
		{implNetpoll, protoEcho, "0", syscall.SIGTERM},
		{implNetpoll, protoRPC, "2", syscall.SIGINT},
		{implGnet, protoEcho, "0", syscall.SIGINT},
		{implGnet, protoRPC, "3", syscall.SIGTERM},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%s/%v", tc.impl, tc.proto, tc.sig), func(t *testing.T) {
			cmd := peerechoCmd("-impl", tc.impl, "-proto", tc.proto, "-addr", "127.0.0.1:0", "-loops", tc.loops)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			lines := make(chan string, 16)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
				exited <- cmd.Wait()
			}()
			defer func() {
				_ = cmd.Process.Kill()
			}()

			var first string
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("peerecho exited without a line: %v", <-exited)
				}
				first = l
			case <-time.After(10 * time.Second):
				t.Fatal("no listening line within 10 s")
			}
			re := regexp.MustCompile(fmt.Sprintf(`^peerecho: %s %s listening on (127\.0\.0\.1:[1-9][0-9]*)$`, tc.impl, tc.proto))
			m := re.FindStringSubmatch(first)
			if m == nil {
				t.Fatalf("first stderr line %q does not match %v", first, re)
			}

			c, err := net.DialTimeout("tcp", m[1], 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(connTimeout))
			if err := rpcOrEcho(tc.proto, c, 3); err != nil {
				t.Fatal(err)
			}

			start := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			var rest []string
			timeout := time.After(5 * time.Second)
		collect:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						break collect
					}
					rest = append(rest, l)
				case <-timeout:
					t.Fatal("no exit within 5 s of the signal")
				}
			}
			if err := <-exited; err != nil {
				t.Errorf("exit: %v, want status 0", err)
			}
			if d := time.Since(start); d > stopTimeout+time.Second {
				t.Errorf("exit took %v after the signal", d)
			}
			if len(rest) > 0 {
				t.Errorf("stderr has more than the listening line:\n%s", strings.Join(rest, "\n"))
			}
			expectClosed(t, c, 2*time.Second)
		})
	}
}

// TestProcessListenFailure checks exit status 1 and a message when the
// address is taken.
func TestProcessListenFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	for _, impl := range impls {
		t.Run(impl, func(t *testing.T) {
			cmd := peerechoCmd("-impl", impl, "-proto", "echo", "-addr", addr)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("peerecho still running 10 s after a listen failure")
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("exit: %v, want status 1", err)
			}
			out := stderr.String()
			if !strings.Contains(out, "listen on "+addr) || strings.Contains(out, "listening on") {
				t.Errorf("stderr:\n%s\nwant a listen failure for %s", out, addr)
			}
		})
	}
}
