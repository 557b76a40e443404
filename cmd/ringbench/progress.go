//go:build linux

package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// progress shows where the run is: on a terminal, one line rewritten in
// place every quarter second; elsewhere, a line per finished run.
type progress struct {
	w       io.Writer
	tty     bool
	total   int
	perRun  time.Duration // expected length of one run, for the estimate
	repeats int

	mu      sync.Mutex
	began   time.Time
	n       int // runs finished
	current string
	stop    chan struct{}
	stopped chan struct{}
}

func newProgress(w io.Writer, tty bool, total, repeats int, perRun time.Duration) *progress {
	p := &progress{w: w, tty: tty, total: total, repeats: repeats, perRun: perRun,
		began: time.Now(), stop: make(chan struct{}), stopped: make(chan struct{})}
	if !tty {
		close(p.stopped)
		return p
	}
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.mu.Lock()
				p.redraw()
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// describe names a cell for people.
func describe(rep int, c benchfmt.Cell) string {
	return fmt.Sprintf("repeat %d: %s, %s, %d conns", rep, c.Server, c.Group(), c.Conns)
}

// line is the status line: runs done, time spent and an estimate of the
// time left.
func (p *progress) line() string {
	el := time.Since(p.began)
	left := time.Duration(p.total-p.n) * p.perRun
	if p.n > 0 {
		left = el / time.Duration(p.n) * time.Duration(p.total-p.n)
	}
	return fmt.Sprintf("[%d/%d] %s elapsed, ~%s left · %s", p.n, p.total, clock(el), clock(left), p.current)
}

func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

func (p *progress) redraw() {
	fmt.Fprintf(p.w, "\r\033[K%s", p.line())
}

// start says a run began.
func (p *progress) start(rep int, c benchfmt.Cell) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.current = describe(rep, c)
	if p.tty {
		p.redraw()
	}
}

// done says a run finished.
func (p *progress) done(run benchfmt.Run) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	var what string
	bad := run.Err != ""
	if lr, ok := decode(run); ok {
		what = fmt.Sprintf("%.0f req/s, p99 %.0f µs, %.2f µs CPU/req", lr.ReqPerS, lr.P99us, lr.ServerCPUusPerReq)
		if lr.VerifyErrors > 0 {
			what += fmt.Sprintf(", %d VERIFY ERRORS", lr.VerifyErrors)
			bad = true
		}
		if n := lr.DialErrors + lr.IOErrors; n > 0 {
			what += fmt.Sprintf(", %d ERRORS", n)
			bad = true
		}
	} else {
		what = "failed: " + run.Err
	}
	if p.tty {
		// Runs that went wrong stay on screen, above the status line.
		if bad {
			fmt.Fprintf(p.w, "\r\033[K%s: %s\n", describe(run.Repeat, run.Cell), what)
		}
		p.redraw()
		return
	}
	fmt.Fprintf(p.w, "[%d/%d] %s: %s\n", p.n, p.total, describe(run.Repeat, run.Cell), what)
}

// note prints a message above the status line.
func (p *progress) note(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", msg)
		p.redraw()
		return
	}
	fmt.Fprintln(p.w, msg)
}

// finish ends the status line.
func (p *progress) finish() {
	if p.tty {
		close(p.stop)
		<-p.stopped
		p.mu.Lock()
		fmt.Fprintf(p.w, "\r\033[K%s\n", p.line())
		p.mu.Unlock()
	}
}
