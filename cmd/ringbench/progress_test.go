//go:build linux

package main

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// lockedBuffer is a bytes.Buffer safe for the progress goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestProgress(t *testing.T) {
	cell := load{scenario: "echo", size: 1024, mode: "pingpong", depth: 1}.cell("uring", 100)
	ok := benchfmt.Run{Kind: "run", Cell: cell, Repeat: 1, Result: map[string]any{
		"req_per_s": 1000.0, "p99_us": 250.0, "server_cpu_us_per_req": 8.5, "verify_errors": 2.0, "io_errors": 3.0}}
	failed := benchfmt.Run{Kind: "run", Cell: cell, Repeat: 2, Err: "server did not start: boom"}

	// Not a terminal: a line per finished run.
	var plain lockedBuffer
	p := newProgress(&plain, false, 2, 2, time.Second)
	p.start(1, cell)
	p.done(ok)
	p.start(2, cell)
	p.done(failed)
	p.note("a note")
	p.finish()
	want := "[1/2] repeat 1: uring, echo-pingpong-1024B-max, 100 conns: 1000 req/s, p99 250 µs, 8.50 µs CPU/req, 2 VERIFY ERRORS, 3 ERRORS\n" +
		"[2/2] repeat 2: uring, echo-pingpong-1024B-max, 100 conns: failed: server did not start: boom\n" +
		"a note\n"
	if got := plain.String(); got != want {
		t.Errorf("plain progress:\n%s\nwant:\n%s", got, want)
	}

	// A terminal: one status line rewritten in place, runs that went
	// wrong kept above it, and a last line when done.
	var tty lockedBuffer
	began := time.Now()
	p = newProgress(&tty, true, 2, 2, time.Second)
	p.start(1, cell)
	// The ticker redraws the status line.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(tty.String(), "[0/2] "); {
		if time.Now().After(deadline) {
			t.Fatalf("no status line drawn: %q", tty.String())
		}
		time.Sleep(time.Millisecond)
	}
	p.done(ok)
	p.done(failed)
	p.finish()
	spent := time.Since(began)
	out := tty.String()
	// Before any run finished, the estimate is the runs' expected length
	// (2 x 1 s); the time elapsed is whatever the clock said, between 0
	// and the test's own time (usually 0:00).
	before := regexp.MustCompile(`\r\033\[K\[0/2\] (\d+):(\d\d) elapsed, ~0:02 left · repeat 1: uring, echo-pingpong-1024B-max, 100 conns`)
	lines := before.FindAllStringSubmatch(out, -1)
	if len(lines) == 0 {
		t.Errorf("terminal progress lacks the status line before the first run ended:\n%q", out)
	}
	for _, m := range lines {
		mins, _ := strconv.Atoi(m[1])
		secs, _ := strconv.Atoi(m[2])
		if el := time.Duration(60*mins+secs) * time.Second; el > spent.Round(time.Second) {
			t.Errorf("status line says %d:%s elapsed, more than the %v spent:\n%q", mins, m[2], spent, out)
		}
	}
	for _, want := range []string{
		"\r\033[Krepeat 2: uring, echo-pingpong-1024B-max, 100 conns: failed: server did not start: boom\n",
		"\r\033[Krepeat 1: uring, echo-pingpong-1024B-max, 100 conns: 1000 req/s, p99 250 µs, 8.50 µs CPU/req, 2 VERIFY ERRORS, 3 ERRORS\n",
		"[2/2] ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal progress lacks %q:\n%q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\n") {
		t.Errorf("terminal progress should end its line:\n%q", out)
	}
}
