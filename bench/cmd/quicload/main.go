// Command quicload loads a QUIC server that speaks bench/internal/quicbench's
// protocol (frameserve's quic-* kinds) and reports what it measured; it is
// the client of ringbench -frameworks' QUIC scenarios, the same for every
// server. It dials -conns connections with quic-go (quic.DialAddr: a std
// UDP socket each), then runs -streams streams at a time on each: every
// stream asks for -size bytes and reads the answer, and the next starts
// when it ends. It stops starting streams after -duration or -requests,
// whichever comes first, lets those under way finish, and closes the
// connections:
//
//	quicload -addr 127.0.0.1:4433 -conns 100 -streams 10 -size 64 -duration 10s
//
// It prints its report to stdout: a heading, then one "key: value" line
// each,
//
//	quicload 127.0.0.1:4433: 100 connections x 10 streams, 64 B per stream, for 10s
//	requests: 812345
//	seconds: 10.002381
//	bytes: 51990080
//	req_per_s: 81216.7
//	p50_us: 1012
//	p99_us: 3401
//	p999_us: 5933
//	errors: 0
//
// requests are the streams answered in full; seconds run from the first
// stream's start to the last one's end; bytes are the answer bytes read,
// of failed streams too; the percentiles are the answered streams'
// latencies in µs, from opening the stream to the answer's last byte
// (nearest rank, -1 without any); errors count failed streams and
// connections that failed to dial, and a first_error line says what the
// first was.
//
// Each answer's length is checked, and with -verify every byte. It exits
// 0 after a report, 1 if no stream was answered (the report is printed
// all the same), 2 for bad flags. A connection still busy 10 s after the
// end is closed, which fails its streams.
package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/ringpoll/ringpoll/bench/internal/cmdline"
	"github.com/ringpoll/ringpoll/bench/internal/quicbench"
)

// Bounds of a run: the dials, and the wait for the streams under way at
// the end.
const (
	dialTimeout = 10 * time.Second
	grace       = 10 * time.Second
)

// config is a parsed and validated command line.
type config struct {
	addr           string
	conns, streams int
	size           int64
	duration       time.Duration
	requests       int64
	verify         bool
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is quicload's whole life; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return cmdline.Exit(stderr, "quicload", err, "")
	}
	rep := load(cfg)
	rep.write(stdout, cfg)
	if rep.requests == 0 {
		fmt.Fprintf(stderr, "quicload: no stream was answered\n")
		return 1
	}
	return 0
}

// parseFlags parses and validates the command line; errors name the flag
// and say what is wanted.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := cmdline.FlagSet("quicload", stderr)
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:4433", "the server's UDP `host:port`")
	fs.IntVar(&cfg.conns, "conns", 1, "connections")
	fs.IntVar(&cfg.streams, "streams", 1, "streams at a time on each connection")
	fs.Int64Var(&cfg.size, "size", 64, "bytes each stream asks for")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to start streams")
	fs.Int64Var(&cfg.requests, "requests", 10_000_000, "the most streams to start")
	fs.BoolVar(&cfg.verify, "verify", false, "check every byte of the answers, not only their length")
	if err := cmdline.Parse(fs, args); err != nil {
		return cfg, err
	}
	switch _, _, err := net.SplitHostPort(cfg.addr); {
	case err != nil:
		return cfg, fmt.Errorf("-addr %q: want host:port, e.g. 127.0.0.1:4433 (%v)", cfg.addr, err)
	case cfg.conns < 1 || cfg.conns > 10000:
		return cfg, fmt.Errorf("-conns %d: want 1 to 10000", cfg.conns)
	case cfg.streams < 1 || cfg.streams > quicbench.MaxStreams:
		return cfg, fmt.Errorf("-streams %d: want 1 to %d (what the server allows)", cfg.streams, quicbench.MaxStreams)
	case cfg.size < 0 || cfg.size > quicbench.MaxAsk:
		return cfg, fmt.Errorf("-size %d: want 0 to %d bytes", cfg.size, quicbench.MaxAsk)
	case cfg.duration < 100*time.Millisecond || cfg.duration > time.Hour:
		return cfg, fmt.Errorf("-duration %v: want 100ms to 1h", cfg.duration)
	case cfg.requests < 1 || cfg.requests > 1_000_000_000:
		return cfg, fmt.Errorf("-requests %d: want 1 to 1000000000", cfg.requests)
	}
	return cfg, nil
}

// report is what a run measured.
type report struct {
	requests int64
	seconds  float64
	bytes    int64
	latUS    []float64 // the answered streams' latencies, sorted
	errors   int64
	first    error
}

// worker is one stream at a time on one connection, and what it counted.
type worker struct {
	conn          *quic.Conn
	requests      int64
	bytes, errors int64
	first         error
	latUS         []float64
}

// load dials the connections and runs the streams.
func load(cfg config) report {
	var rep report
	conns := dial(cfg, &rep)
	if len(conns) == 0 {
		return rep
	}
	defer func() {
		for _, c := range conns {
			c.CloseWithError(0, "done")
		}
	}()
	start := time.Now()
	end := start.Add(cfg.duration)
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(grace))
	defer cancel()
	// Past the grace, the connections close: reads under way fail.
	stopWatch := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.CloseWithError(1, "quicload: streams still busy after the run")
		}
	})
	defer stopWatch()

	var left atomic.Int64
	left.Store(cfg.requests)
	workers := make([]*worker, 0, len(conns)*cfg.streams)
	var wg sync.WaitGroup
	for _, c := range conns {
		for range cfg.streams {
			w := &worker{conn: c}
			workers = append(workers, w)
			wg.Go(func() { w.run(ctx, cfg, end, &left) })
		}
	}
	wg.Wait()
	rep.seconds = time.Since(start).Seconds()
	for _, w := range workers {
		rep.requests += w.requests
		rep.bytes += w.bytes
		rep.errors += w.errors
		if rep.first == nil {
			rep.first = w.first
		}
		rep.latUS = append(rep.latUS, w.latUS...)
	}
	slices.Sort(rep.latUS)
	return rep
}

// dial opens the connections at once, counting those that fail in rep.
func dial(cfg config, rep *report) []*quic.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	conns := make([]*quic.Conn, cfg.conns)
	errs := make([]error, cfg.conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() { conns[i], errs[i] = quic.DialAddr(ctx, cfg.addr, quicbench.ClientTLS(), nil) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			rep.errors++
			if rep.first == nil {
				rep.first = fmt.Errorf("dial: %w", err)
			}
		}
	}
	return slices.DeleteFunc(conns, func(c *quic.Conn) bool { return c == nil })
}

// run asks on w's connection, one stream after another, until end, until
// the run's requests are taken, or until the connection is gone.
func (w *worker) run(ctx context.Context, cfg config, end time.Time, left *atomic.Int64) {
	buf := make([]byte, min(max(cfg.size, 1), 64<<10))
	for {
		t0 := time.Now()
		if !t0.Before(end) || left.Add(-1) < 0 {
			return
		}
		n, err := quicbench.Ask(ctx, w.conn, cfg.size, buf, cfg.verify)
		w.bytes += n
		if err != nil {
			w.errors++
			if w.first == nil {
				w.first = err
			}
			if w.conn.Context().Err() != nil {
				return
			}
			continue
		}
		w.requests++
		w.latUS = append(w.latUS, float64(time.Since(t0).Nanoseconds())/1e3)
	}
}

// write prints the report.
func (r report) write(w io.Writer, cfg config) {
	fmt.Fprintf(w, "quicload %s: %d connections x %d streams, %d B per stream, for %v\n",
		cfg.addr, cfg.conns, cfg.streams, cfg.size, cfg.duration)
	perS := 0.0
	if r.seconds > 0 {
		perS = float64(r.requests) / r.seconds
	}
	fmt.Fprintf(w, "requests: %d\nseconds: %.6f\nbytes: %d\nreq_per_s: %.1f\n", r.requests, r.seconds, r.bytes, perS)
	for _, p := range []struct {
		key string
		q   float64
	}{{"p50_us", 0.5}, {"p99_us", 0.99}, {"p999_us", 0.999}} {
		fmt.Fprintf(w, "%s: %.0f\n", p.key, quantile(r.latUS, p.q))
	}
	fmt.Fprintf(w, "errors: %d\n", r.errors)
	if r.first != nil {
		fmt.Fprintf(w, "first_error: %v\n", r.first)
	}
}

// quantile returns the q quantile of sorted xs (nearest rank), or -1 if
// there are none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}
