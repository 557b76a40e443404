//go:build linux

// Command ringsoak is a soak and fault tool for ringpoll. It runs a ringpoll
// echo server in its own process, so that it can check its own descriptors,
// goroutines and the library's counters, and drives it on loopback with a
// bounded, seeded mix of clients (std net, independent of the library):
//
//   - echo: 1 to 16 messages of 1 B to 256 KiB (log-distributed), written
//     while the echo is read; ping-pong: each message after the last one's
//     echo;
//   - random-close: Close mid-stream; rst: SO_LINGER 0 and Close mid-stream;
//   - half-close: CloseWrite after the last message, then all of the echo
//     and EOF;
//   - slow-reader: 4 KiB every 50 ms for up to 2 s while the writer sends up
//     to 4 MiB, then the rest at full speed;
//   - never-read: write until a Write blocks for 300 ms, then Close;
//   - slowloris: many connections sending a byte every 100-500 ms, each
//     byte's echo checked;
//   - burst: 200 to 1000 connections opened and closed quickly, each
//     echoing a few bytes.
//
// Every connection writes a pseudo-random stream seeded for it and checks
// the echo byte for byte, in order. Every operation has a deadline. Errors
// are counted by kind (reset, broken-pipe, timeout, eof-early,
// verify-mismatch, dial, closed-self, no-backpressure, other); a client's
// own doing (a write cut off by its own Close, a never-reader's blocked
// write) is expected, anything else fails the run.
//
// After the clients of a run finish, the server must close its side of
// every connection within -linger (a connection it keeps open after its
// client closed is reported with its TCP state and the client that had the
// other end). Then the server is shut down
// (Server.Shutdown with a timeout for the handler API; closing the
// listener and waiting for the connection goroutines for the conn API) and
// the leak checks wait, for up to -settle, until the process has no more
// descriptors and goroutines than before the server started and every
// provided io_uring buffer is back in its ring (Listener.Stats,
// Stats.BuffersOut).
//
// Usage:
//
//	ringsoak [-engine all|auto|epoll|uring|uring-hybrid|uring-reactor|uring-sqpoll[,...]]
//	         [-api both|handler|conn] [-duration 30s] [-seed 1] [-json]
//	         [-clients 16] [-slowloris 300] [-burst 1000] [-max-msg 262144]
//	         [-loops 2] [-input-hw 262144] [-output-hw 262144]
//	         [-ring-count 1024] [-ring-size 4096] [-idle-timeout 30s]
//	         [-io-timeout 10s] [-linger 3s] [-shutdown-timeout 10s] [-settle 5s]
//
// -duration is the traffic time of the whole invocation, split evenly over
// the engine/API runs; shutdown and the leak checks come on top. With
// -engine all, every engine runs in turn; the io_uring ones are skipped,
// with the reason, where ringpoll.UringStatus reports io_uring unusable.
//
// The verdict is printed as text on stdout (each run as it ends, then a
// summary); with -json the report goes to stdout as JSON and the text to
// stderr. The exit status is 0 if every run passed, 1 if any failed (a
// verify mismatch, an unexpected error, a leak, a shutdown that timed out)
// or the soak was interrupted, and 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll"
)

// config is a soak's settings, from the flags.
type config struct {
	engines         []ringpoll.Engine
	apis            []string
	duration        time.Duration
	seed            uint64
	clients         int // concurrent lanes of the weighted mix
	slowloris       int // slowloris connections per run
	burst           int // largest connect burst (0: no bursts)
	maxMsg          int // largest echo message
	loops           int
	inputHW         int
	outputHW        int
	ringCount       int
	ringSize        int
	idleTimeout     time.Duration
	ioTimeout       time.Duration // deadline of every client Read and Write
	shutdownTimeout time.Duration
	linger          time.Duration // how long server connections may outlive their clients
	settle          time.Duration // how long leak checks wait
	json            bool

	// corrupt, if set, alters every chunk the server echoes: tests use it
	// to show the verdict catches a broken server.
	corrupt func([]byte)
}

// allEngines are the engines -engine all runs, in order.
var allEngines = []ringpoll.Engine{ringpoll.EngineEpoll, ringpoll.EngineUring,
	ringpoll.EngineUringHybrid, ringpoll.EngineUringReactor, ringpoll.EngineUringSQPoll}

// Exit statuses.
const (
	exitPass    = 0
	exitFail    = 1
	exitBadFlag = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, soaks and prints the verdict; it returns the exit
// status.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitPass
	}
	if err != nil {
		fmt.Fprintln(stderr, "ringsoak:", err)
		return exitBadFlag
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	text := stdout
	if cfg.json {
		text = stderr
	}
	rep := soak(ctx, cfg, text)
	rep.writeSummary(text)
	if cfg.json {
		if err := rep.writeJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "ringsoak:", err)
			return exitFail
		}
	}
	if !rep.Passed {
		return exitFail
	}
	return exitPass
}

// parseFlags turns the command line into a config, rejecting what cannot
// run.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("ringsoak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := &config{}
	engines := fs.String("engine", "all", "engines: all, auto, epoll, uring, uring-hybrid, uring-reactor, uring-sqpoll, or a comma-separated list")
	api := fs.String("api", "both", "server API: handler (Server and the nocopy Reader/Writer), conn (net.Conn per goroutine) or both")
	fs.DurationVar(&cfg.duration, "duration", 30*time.Second, "total traffic time, split over the engine/API runs")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the client mix and the byte streams")
	fs.IntVar(&cfg.clients, "clients", 16, "concurrent client lanes of the mix (echo, ping-pong, closes, RSTs, half-closes, slow and never readers)")
	fs.IntVar(&cfg.slowloris, "slowloris", 300, "slowloris connections per run (0: none)")
	fs.IntVar(&cfg.burst, "burst", 1000, "largest connect burst; bursts open burst/5 to burst connections (0: none)")
	fs.IntVar(&cfg.maxMsg, "max-msg", 256<<10, "largest echo message, in bytes")
	fs.IntVar(&cfg.loops, "loops", 2, "server event loops (0: the library default)")
	fs.IntVar(&cfg.inputHW, "input-hw", 256<<10, "server WithInputHighWater, in bytes")
	fs.IntVar(&cfg.outputHW, "output-hw", 256<<10, "server WithOutputHighWater, in bytes")
	fs.IntVar(&cfg.ringCount, "ring-count", 1024, "server WithBufferRing count (io_uring engines)")
	fs.IntVar(&cfg.ringSize, "ring-size", 4096, "server WithBufferRing size, in bytes (io_uring engines)")
	fs.DurationVar(&cfg.idleTimeout, "idle-timeout", 30*time.Second, "server WithIdleTimeout (0: off); longer than a run, so it arms the idle timer of every connection without hiding one that hangs")
	fs.DurationVar(&cfg.ioTimeout, "io-timeout", 10*time.Second, "deadline of every client Read and Write")
	fs.DurationVar(&cfg.linger, "linger", 3*time.Second, "how long the server's connections may stay open after every client closed")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long the server's shutdown may take")
	fs.DurationVar(&cfg.settle, "settle", 5*time.Second, "how long the leak checks wait for descriptors, goroutines and buffers to come back")
	fs.BoolVar(&cfg.json, "json", false, "print the report as JSON on stdout (the text goes to stderr)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	var err error
	if cfg.engines, err = parseEngines(*engines); err != nil {
		return nil, err
	}
	switch *api {
	case "both":
		cfg.apis = []string{apiHandler, apiConn}
	case apiHandler, apiConn:
		cfg.apis = []string{*api}
	default:
		return nil, fmt.Errorf("-api %q: want handler, conn or both", *api)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// parseEngines parses -engine: all, or a comma-separated list of names.
func parseEngines(s string) ([]ringpoll.Engine, error) {
	if s == "all" {
		return allEngines, nil
	}
	var out []ringpoll.Engine
	for _, name := range strings.Split(s, ",") {
		e, err := ringpoll.ParseEngine(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("-engine: %w (or all)", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// validate checks the numeric flags and the descriptor budget.
func (cfg *config) validate() error {
	checks := []struct {
		bad bool
		msg string
	}{
		{cfg.duration <= 0, "-duration must be positive"},
		{cfg.clients < 0 || cfg.clients > 256, "-clients must be from 0 to 256"},
		{cfg.slowloris < 0 || cfg.slowloris > 2000, "-slowloris must be from 0 to 2000"},
		{cfg.burst < 0 || cfg.burst > 5000, "-burst must be from 0 to 5000"},
		{cfg.clients == 0 && cfg.slowloris == 0 && cfg.burst == 0, "no clients: -clients, -slowloris and -burst are all 0"},
		{cfg.maxMsg < 1 || cfg.maxMsg > 16<<20, "-max-msg must be from 1 to 16 MiB"},
		{cfg.loops < 0, "-loops must not be negative"},
		{cfg.idleTimeout < 0, "-idle-timeout must not be negative"},
		{cfg.ioTimeout <= 0, "-io-timeout must be positive"},
		{cfg.shutdownTimeout <= 0, "-shutdown-timeout must be positive"},
		{cfg.linger <= 0, "-linger must be positive"},
		{cfg.settle < 0, "-settle must not be negative"},
	}
	for _, c := range checks {
		if c.bad {
			return errors.New(c.msg)
		}
	}
	// The library checks its own options (high-water marks, the buffer
	// ring, loops, the idle timeout); NewServer reports the first bad one.
	opts := serverOptions(ringpoll.EngineAuto, cfg)[1:] // not the engine: it may be unavailable
	if _, err := ringpoll.NewServer(func(context.Context, *ringpoll.Conn) error { return nil }, opts...); err != nil {
		return err
	}
	// Both ends of every connection are in this process.
	need := uint64(2*(cfg.clients+cfg.slowloris+min(cfg.burst, burstWorkers)) + 256)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < need {
		return fmt.Errorf("the client mix needs about %d descriptors, RLIMIT_NOFILE is %d: lower -slowloris or raise ulimit -n", need, lim.Cur)
	}
	return nil
}
