// Package benchfmt holds the formats the benchmark programs share: the
// records ringbench writes and its chart renderer (in the bench module)
// reads, one JSON object per line, a Run per measured repeat and a Summary
// per cell of the matrix; and LoopTotals, the loop counters ringecho dumps
// for ringload.
package benchfmt

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
)

// Cell is one point of the benchmark matrix: a server under one load.
type Cell struct {
	// Scenario is "echo" (the seeds' ping-pong echo) or "rpc"
	// (netpoll-benchmark's rules: length-prefixed messages, the handler off
	// the event loop, the reply in a buffer of its own).
	Scenario string `json:"scenario"`
	// Mode is "pingpong" (one message in flight per connection) or
	// "pipeline" (Depth messages written together, then Depth replies
	// read).
	Mode  string `json:"mode"`
	Depth int    `json:"depth"`
	// Rate is the offered load in requests per second over all
	// connections; 0 means as fast as the load generator goes.
	Rate float64 `json:"rate"`
	// Server names the server: a ringpoll engine ("uring", "epoll", ...),
	// "std" (net, a goroutine per connection), "netpoll" or "gnet".
	Server string `json:"server"`
	Conns  int    `json:"conns"`
	Size   int    `json:"size"` // message bytes (payload, without rpc's 4-byte prefix)
}

// Load names the offered load: "max" or "rate40000".
func (c Cell) Load() string {
	if c.Rate <= 0 {
		return "max"
	}
	return fmt.Sprintf("rate%.0f", c.Rate)
}

// Group names the chart a cell is drawn in: every cell with the same
// scenario, mode, depth, load and size, whatever its server and
// connections, for example "echo-pingpong-1024B-max" or
// "rpc-pipeline8-512B-rate40000".
func (c Cell) Group() string {
	mode := c.Mode
	if c.Mode == "pipeline" {
		mode = fmt.Sprintf("pipeline%d", c.Depth)
	}
	return fmt.Sprintf("%s-%s-%dB-%s", c.Scenario, mode, c.Size, c.Load())
}

// Run is one measured repeat of a cell: what the load generator reported.
type Run struct {
	Kind string `json:"kind"` // "run"
	Cell
	Repeat int `json:"repeat"` // 1-based
	// Placement is where the processes ran, e.g. "server cpu 0, load cpu 1".
	Placement string `json:"placement"`
	// Result is the load generator's JSON object (cmd/ringload's result).
	Result map[string]any `json:"result"`
	// Err says why the run produced no result; Result is then nil.
	Err string `json:"error,omitempty"`
}

// Stat is one metric over the repeats of a cell. Values that were not
// measured (negative in the load generator's output) are left out; N counts
// the rest. With N == 0 every field is NaN-free zero and the metric is
// missing.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// Spread is (Max-Min)/Median, the relative spread of the repeats, or 0.
func (s Stat) Spread() float64 {
	if s.N == 0 || s.Median == 0 {
		return 0
	}
	return (s.Max - s.Min) / math.Abs(s.Median)
}

// NewStat summarizes vs, skipping negative values (not measured) and NaNs.
func NewStat(vs []float64) Stat {
	var xs []float64
	for _, v := range vs {
		if v >= 0 && !math.IsNaN(v) && !math.IsInf(v, 0) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return Stat{}
	}
	slices.Sort(xs)
	n := len(xs)
	med := xs[n/2]
	if n%2 == 0 {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	return Stat{Median: med, Min: xs[0], Max: xs[n-1], N: n}
}

// Summary is a cell over its repeats: medians and spread.
type Summary struct {
	Kind string `json:"kind"` // "summary"
	Cell
	Repeats   int    `json:"repeats"`
	Placement string `json:"placement"`

	ReqPerS        Stat `json:"req_per_s"`
	P50us          Stat `json:"p50_us"`
	P99us          Stat `json:"p99_us"`
	P999us         Stat `json:"p999_us"`
	P9999us        Stat `json:"p9999_us"`
	ServerCPUCores Stat `json:"server_cpu_cores"`
	CPUusPerReq    Stat `json:"server_cpu_us_per_req"`
	ReqPerCPUs     Stat `json:"req_per_server_cpu_s"`
	// UserUsPerReq and KernelUsPerReq are CPUusPerReq split by the share
	// of the server's user and system tick samples in each run (ringload's
	// server_user_us_per_req and server_kernel_us_per_req).
	UserUsPerReq   Stat `json:"server_user_us_per_req"`
	KernelUsPerReq Stat `json:"server_kernel_us_per_req"`
	SyscallsPerReq Stat `json:"syscalls_per_req"`
	CtxSwPerReq    Stat `json:"ctx_switches_per_req"`
	// SyscallsSource is "perf" (perf stat on the server), "library" (the
	// server's own count of the event-loop syscalls it makes, a lower
	// bound) or "" (not measured).
	SyscallsSource string `json:"syscalls_source"`

	// Errors counts runs that failed and connection errors; VerifyErrors
	// echoes that came back wrong. Both should be 0.
	Errors       int `json:"errors"`
	VerifyErrors int `json:"verify_errors"`
}

// LoopTotals is what `ringecho -stats-file` writes on SIGUSR1 and
// `ringload -server-stats` reads: the server's event-loop counters, summed
// over its loops, and Seq, which counts the dumps so a reader can tell a
// fresh one from an old.
type LoopTotals struct {
	Seq uint64 `json:"seq"`
	// Syscalls is every event-loop syscall the library counts:
	// io_uring_enter and epoll_wait calls. Writers' own send calls,
	// wake-ups and the Go runtime's syscalls are not in it, so it is a
	// lower bound on the server's syscalls.
	Syscalls   uint64 `json:"syscalls"`
	Enters     uint64 `json:"enters"`
	EpollWaits uint64 `json:"epoll_waits"`
	SQEs       uint64 `json:"sqes"`
	CQEs       uint64 `json:"cqes"`
	BytesIn    uint64 `json:"bytes_in"`
	BytesOut   uint64 `json:"bytes_out"`
	// ENOBUFS counts receives that found every provided buffer in use,
	// Rearms the multishot requests armed again (io_uring only).
	ENOBUFS uint64 `json:"enobufs,omitempty"`
	Rearms  uint64 `json:"rearms,omitempty"`
	// Packets counts the datagrams a UDP server received.
	Packets uint64 `json:"packets,omitempty"`
}

// WriteLoopTotals writes t to path as JSON, through a temporary file and a
// rename, so a reader never sees half of it.
func WriteLoopTotals(path string, t LoopTotals) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadLoopTotals reads what WriteLoopTotals wrote.
func ReadLoopTotals(path string) (LoopTotals, error) {
	var t LoopTotals
	b, err := os.ReadFile(path)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// BootstrapRounds is how many resamples make a Bootstrap interval; the
// generator is seeded, so a report is the same each time it is written
// from the same runs.
const BootstrapRounds = 2000

// Median returns the median of xs, in any order (it sorts a copy unless
// they are sorted already). It is 0 for no xs.
func Median(xs []float64) float64 {
	if !slices.IsSorted(xs) {
		xs = slices.Sorted(slices.Values(xs))
	}
	n := len(xs)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// Bootstrap returns a 95% percentile interval of the median of xs. It is
// 0, 0 for no xs.
func Bootstrap(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	rng := rand.New(rand.NewPCG(1, 2))
	meds := make([]float64, BootstrapRounds)
	sample := make([]float64, len(xs))
	for i := range meds {
		for j := range sample {
			sample[j] = xs[rng.IntN(len(xs))]
		}
		slices.Sort(sample)
		meds[i] = Median(sample)
	}
	slices.Sort(meds)
	return meds[BootstrapRounds*25/1000], meds[BootstrapRounds*975/1000-1]
}

// TurnsResult is what ringload -alt-addr measures and prints as JSON, and
// what ringbench -turns reads back: two servers, A and B, loaded in
// alternating turns, and A's requests per server CPU-second over B's for
// each pair of turns.
type TurnsResult struct {
	Addrs        [2]string  `json:"addrs"`
	PIDs         [2]int     `json:"server_pids"`
	Conns        int        `json:"conns"`
	Size         int        `json:"size"`
	Proto        string     `json:"proto,omitempty"` // "echo" or "rpc"; empty: echo (before rpc turns)
	Depth        int        `json:"depth,omitempty"` // messages in flight per connection; 0: 1 (before pipelined turns)
	Rate         float64    `json:"rate,omitempty"`  // requests a second offered in a turn; 0: as fast as replies come
	PeriodS      float64    `json:"period_s"`
	Pairs        int        `json:"pairs"`
	Requests     [2]uint64  `json:"requests"`
	ServerCPUNS  [2]int64   `json:"server_cpu_ns"`
	CPUusPerReq  [2]float64 `json:"server_cpu_us_per_req"`
	Ratios       []float64  `json:"ratios"`        // per pair: A's requests per CPU-second over B's
	RatioMedian  float64    `json:"ratio_median"`  // of Ratios
	RatioLo      float64    `json:"ratio_lo"`      // 95% bootstrap interval of the median
	RatioHi      float64    `json:"ratio_hi"`      //
	VerifyErrors uint64     `json:"verify_errors"` // both sides
	FirstError   string     `json:"first_error,omitempty"`
}
