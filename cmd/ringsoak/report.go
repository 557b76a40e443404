//go:build linux

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// maxSamples bounds the unexpected error messages a run keeps.
const maxSamples = 12

// KindStats is what the clients of one kind did in a run.
type KindStats struct {
	Conns         int64 `json:"conns"`
	Failed        int64 `json:"failed"` // connections with an unexpected error
	BytesSent     int64 `json:"bytes_sent"`
	BytesVerified int64 `json:"bytes_verified"`
	// Expected and Unexpected count errors by kind.
	Expected   map[errKind]int64 `json:"errors_expected,omitempty"`
	Unexpected map[errKind]int64 `json:"errors_unexpected,omitempty"`
}

// tally adds up the results of a run's clients. It is safe for concurrent
// use.
type tally struct {
	mu      sync.Mutex
	kinds   map[clientKind]*KindStats
	samples []string
}

func newTally() *tally { return &tally{kinds: map[clientKind]*KindStats{}} }

// add counts one client connection's result.
func (t *tally) add(r result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.kinds[r.kind]
	if k == nil {
		k = &KindStats{Expected: map[errKind]int64{}, Unexpected: map[errKind]int64{}}
		t.kinds[r.kind] = k
	}
	k.Conns++
	k.BytesSent += r.sent
	k.BytesVerified += r.verified
	failed := false
	for _, e := range r.errs {
		if e.expected {
			k.Expected[e.kind]++
			continue
		}
		k.Unexpected[e.kind]++
		failed = true
		if len(t.samples) < maxSamples {
			t.samples = append(t.samples, fmt.Sprintf("%s: %s: %s", r.kind, e.kind, e.msg))
		}
	}
	if failed {
		k.Failed++
	}
}

// RunReport is the verdict of one engine/API run.
type RunReport struct {
	Engine string `json:"engine"` // as asked: "uring", "auto"
	Ran    string `json:"ran"`    // the engine that served: auto resolves
	API    string `json:"api"`
	// Skipped, if set, says why the run did not happen.
	Skipped string `json:"skipped,omitempty"`
	Passed  bool   `json:"passed"`
	// Failures lists why the run failed.
	Failures []string `json:"failures,omitempty"`
	Seed     uint64   `json:"seed"`
	Traffic  string   `json:"traffic"`  // how long clients ran
	Teardown string   `json:"teardown"` // shutdown and leak checks

	Kinds         map[clientKind]*KindStats `json:"kinds"`
	Conns         int64                     `json:"conns"`
	BytesSent     int64                     `json:"bytes_sent"`
	BytesVerified int64                     `json:"bytes_verified"`
	Expected      map[errKind]int64         `json:"errors_expected"`
	Unexpected    map[errKind]int64         `json:"errors_unexpected"`
	ErrorSamples  []string                  `json:"error_samples,omitempty"`
	// HangDump is the goroutine profile taken when clients did not finish.
	HangDump string `json:"hang_dump,omitempty"`

	ServerEchoed   int64             `json:"server_bytes_echoed"`
	ServerAccepted int64             `json:"server_accepted,omitempty"` // conn API only
	ServerErrors   map[errKind]int64 `json:"server_errors,omitempty"`   // for information

	Linger        *LingerCheck    `json:"linger,omitempty"`
	Shutdown      string          `json:"shutdown_took"`
	ShutdownError string          `json:"shutdown_error,omitempty"`
	FDs           *FDCheck        `json:"fds,omitempty"`
	Goroutines    *GoroutineCheck `json:"goroutines,omitempty"`
	Stats         *StatsCheck     `json:"stats,omitempty"`
}

// fill copies the tally into the report and adds up the totals.
func (r *RunReport) fill(t *tally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r.Kinds = t.kinds
	r.ErrorSamples = t.samples
	r.Expected, r.Unexpected = map[errKind]int64{}, map[errKind]int64{}
	for _, k := range t.kinds {
		r.Conns += k.Conns
		r.BytesSent += k.BytesSent
		r.BytesVerified += k.BytesVerified
		for e, n := range k.Expected {
			r.Expected[e] += n
		}
		for e, n := range k.Unexpected {
			r.Unexpected[e] += n
		}
	}
}

// judge decides the run's verdict from what it recorded.
func (r *RunReport) judge() {
	for _, e := range sortedKeys(r.Unexpected) {
		r.Failures = append(r.Failures, fmt.Sprintf("%d unexpected %s errors", r.Unexpected[e], e))
	}
	if r.Linger != nil && !r.Linger.OK {
		r.Failures = append(r.Failures, fmt.Sprintf("%d server connections still open %s after their clients closed", len(r.Linger.Open), r.Linger.Waited))
	}
	if r.ShutdownError != "" {
		r.Failures = append(r.Failures, "shutdown: "+r.ShutdownError)
	}
	if r.FDs != nil && !r.FDs.OK {
		r.Failures = append(r.Failures, fmt.Sprintf("descriptor leak: %d open, %d before", r.FDs.After, r.FDs.Before))
	}
	if r.Goroutines != nil && !r.Goroutines.OK {
		r.Failures = append(r.Failures, fmt.Sprintf("goroutine leak: %d running, %d before", r.Goroutines.After, r.Goroutines.Before))
	}
	if r.Stats != nil && !r.Stats.OK {
		r.Failures = append(r.Failures, "stats: "+r.Stats.Problem)
	}
	if r.BytesVerified == 0 && r.Skipped == "" {
		r.Failures = append(r.Failures, "no byte was verified")
	}
	r.Passed = len(r.Failures) == 0
}

// Report is the verdict of a whole ringsoak invocation.
type Report struct {
	Seed     uint64       `json:"seed"`
	Duration string       `json:"duration"`
	Wall     string       `json:"wall"`
	Uring    string       `json:"uring_status"` // "ok" or why io_uring is unavailable
	Runs     []*RunReport `json:"runs"`
	Passed   bool         `json:"passed"`
	// Interrupted is set when a signal cut the soak short.
	Interrupted bool `json:"interrupted,omitempty"`
}

// writeJSON writes the report as indented JSON.
func (rep *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeRun prints one run's verdict as text.
func writeRun(w io.Writer, r *RunReport) {
	name := runName(r)
	if r.Skipped != "" {
		fmt.Fprintf(w, "%s: SKIP: %s\n", name, r.Skipped)
		return
	}
	verdict := "PASS"
	if !r.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "%s: %s  (traffic %s, teardown %s, seed %d)\n", name, verdict, r.Traffic, r.Teardown, r.Seed)
	fmt.Fprintf(w, "  %-13s %7s %6s %11s %11s  %s\n", "client", "conns", "failed", "sent", "verified", "errors")
	for _, k := range allKinds {
		if s := r.Kinds[k]; s != nil {
			errs := ""
			if len(s.Expected) > 0 {
				errs += "expected: " + countList(s.Expected) + "  "
			}
			if len(s.Unexpected) > 0 {
				errs += "UNEXPECTED: " + countList(s.Unexpected)
			}
			fmt.Fprintf(w, "  %-13s %7d %6d %11s %11s  %s\n", k, s.Conns, s.Failed,
				byteSize(s.BytesSent), byteSize(s.BytesVerified), cmp.Or(strings.TrimSpace(errs), "-"))
		}
	}
	fmt.Fprintf(w, "  %-13s %7d %6s %11s %11s\n", "total", r.Conns, "", byteSize(r.BytesSent), byteSize(r.BytesVerified))
	fmt.Fprintf(w, "  server echoed %s", byteSize(r.ServerEchoed))
	if r.API == apiConn {
		fmt.Fprintf(w, ", accepted %d connections", r.ServerAccepted)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  errors expected: %s\n", countList(r.Expected))
	fmt.Fprintf(w, "  errors unexpected: %s\n", countList(r.Unexpected))
	if len(r.ServerErrors) > 0 {
		fmt.Fprintf(w, "  server-side errors (information): %s\n", countList(r.ServerErrors))
	}
	if c := r.Linger; c != nil {
		fmt.Fprintf(w, "  server connections closed after their clients (%s) %s\n", c.Waited, okWord(c.OK))
		for _, o := range c.Open {
			fmt.Fprintf(w, "    still open: %s\n", o)
		}
	}
	shut := "ok"
	if r.ShutdownError != "" {
		shut = r.ShutdownError
	}
	fmt.Fprintf(w, "  shutdown %s: %s\n", r.Shutdown, shut)
	if c := r.FDs; c != nil {
		fmt.Fprintf(w, "  fds %d -> %d (%s) %s\n", c.Before, c.After, c.Waited, okWord(c.OK))
		for _, e := range c.Extra {
			fmt.Fprintf(w, "    left open: %s\n", e)
		}
	}
	if c := r.Goroutines; c != nil {
		fmt.Fprintf(w, "  goroutines %d -> %d (%s) %s\n", c.Before, c.After, c.Waited, okWord(c.OK))
		if c.Dump != "" {
			fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(strings.TrimSpace(c.Dump), "\n", "\n    "))
		}
	}
	if c := r.Stats; c != nil {
		fmt.Fprintf(w, "  stats: %d loops, buffers out %d (%s) %s; accepts %d, in %s, out %s, ENOBUFS %d, CQ overflows %d, rearms %d, enters %d, epoll_waits %d, wakeups %d\n",
			c.Loops, c.BuffersOut, c.Waited, okWord(c.OK), c.Accepts, byteSize(int64(c.BytesIn)), byteSize(int64(c.BytesOut)),
			c.ENOBUFS, c.CQOverflows, c.Rearms, c.Enters, c.EpollWaits, c.Wakeups)
		if c.Problem != "" {
			fmt.Fprintf(w, "    %s\n", c.Problem)
		}
	}
	for _, s := range r.ErrorSamples {
		fmt.Fprintf(w, "  sample: %s\n", s)
	}
	if r.HangDump != "" {
		fmt.Fprintf(w, "  goroutines when the clients hung:\n    %s\n", strings.ReplaceAll(strings.TrimSpace(r.HangDump), "\n", "\n    "))
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  FAILURE: %s\n", f)
	}
}

// writeSummary prints the one-line-per-run table and the overall verdict.
func (rep *Report) writeSummary(w io.Writer) {
	fmt.Fprintf(w, "\nringsoak summary (seed %d, duration %s, wall %s)\n", rep.Seed, rep.Duration, rep.Wall)
	fmt.Fprintf(w, "%-28s %-5s %8s %12s %12s %10s %10s  %s\n", "run", "", "conns", "sent", "verified", "expected", "unexpected", "leaks")
	for _, r := range rep.Runs {
		if r.Skipped != "" {
			fmt.Fprintf(w, "%-28s %-5s %s\n", runName(r), "SKIP", r.Skipped)
			continue
		}
		verdict := "PASS"
		if !r.Passed {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "%-28s %-5s %8d %12s %12s %10d %10d  %s\n", runName(r), verdict, r.Conns,
			byteSize(r.BytesSent), byteSize(r.BytesVerified), sum(r.Expected), sum(r.Unexpected), leakWord(r))
	}
	switch {
	case rep.Interrupted:
		fmt.Fprintln(w, "INTERRUPTED")
	case rep.Passed:
		fmt.Fprintln(w, "PASS")
	default:
		fmt.Fprintln(w, "FAIL")
	}
}

// runName is "engine/api", with the engine auto chose.
func runName(r *RunReport) string {
	e := r.Engine
	if r.Ran != "" && r.Ran != r.Engine {
		e += "(" + r.Ran + ")"
	}
	return e + "/" + r.API
}

// leakWord sums up a run's leak checks.
func leakWord(r *RunReport) string {
	var bad []string
	if r.FDs != nil && !r.FDs.OK {
		bad = append(bad, "fds")
	}
	if r.Goroutines != nil && !r.Goroutines.OK {
		bad = append(bad, "goroutines")
	}
	if r.Stats != nil && !r.Stats.OK {
		bad = append(bad, "stats")
	}
	if r.Linger != nil && !r.Linger.OK {
		bad = append(bad, "linger")
	}
	if r.ShutdownError != "" {
		bad = append(bad, "shutdown")
	}
	if len(bad) == 0 {
		return "none"
	}
	return strings.Join(bad, ",")
}

func okWord(ok bool) string {
	if ok {
		return "ok"
	}
	return "LEAK"
}

// countList formats counts by kind: "reset 3, timeout 1", or "none".
func countList(m map[errKind]int64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[errKind]int64) []errKind {
	keys := make([]errKind, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

func sum(m map[errKind]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// byteSize formats n bytes with a binary unit.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
