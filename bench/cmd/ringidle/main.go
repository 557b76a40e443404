// Command ringidle measures what an idle connection costs a server: the
// growth of its resident memory (RSS), Go heap and goroutine stacks, and its
// goroutines, per connection, with thousands of connections open and
// silent. It compares every ringpoll engine, through the handler API
// (Server) and the net.Conn API (a goroutine per AcceptConn), with std net
// (a goroutine per connection), cloudwego/netpoll and gnet, in one run:
//
//	ringidle [-n 10000] [-repeats 3] [-servers LIST] [-out FILE.jsonl]
//
// Each server runs in a child process of its own (ringidle re-executes
// itself as "ringidle -child SERVER"), one at a time, so that no server's
// memory is counted against another. The parent:
//
//  1. raises RLIMIT_NOFILE (soft and hard) for itself and the child;
//  2. starts the child, which serves echo on 127.0.0.1:0 and prints its
//     address;
//  3. warms the server up with -warmup echo round trips on a few
//     connections, closes them and waits -settle: fixed costs that any server that has
//     seen traffic carries (an io_uring loop's provided-buffer arena is
//     touched page by page, Go's heap and stacks grow their first spans) are
//     then in the baseline, not in the per-connection figure;
//  4. measures the baseline: the child runs debug.FreeOSMemory (a GC that
//     also returns free pages to the kernel) and reports runtime.MemStats,
//     and the parent reads the child's VmRSS from /proc/PID/status;
//  5. opens -n client connections, each of which sends one small message
//     and checks its echo (so the server really accepted and served it),
//     then stays idle; with -talk=false they only connect, and the server
//     measured holds connections that never spoke (the check in step 7 is
//     then their first echo); either way, the listener's accept queue must
//     be empty (/proc/net/tcp) before the measurement;
//  6. waits -settle (2 s: longer than the 1 s for which ringpoll's Server
//     keeps an idle handler goroutine, so that the goroutines the burst of
//     first messages started have exited), then measures again, twice: after runtime.GC() (RSS as
//     the process holds it) and after debug.FreeOSMemory() (RSS with free
//     pages returned: what the live connections hold);
//  7. checks that every connection still echoes, stops the child and closes
//     the connections.
//
// The cost per connection is (after - baseline) / n. Each server is run
// -repeats times, the repeats interleaved (server A, B, C, A, B, C, ...), and
// the medians are printed as a markdown table, with each server's RSS
// figure as a fraction of std net's. -out writes every run, and the
// medians, as JSON lines.
//
// Servers (-servers, comma-separated; default: all of these, with the 16 KiB
// and 4 KiB buffers for std and every engine's conn API):
//
//	std                         net.Listen, a goroutine per connection reading
//	                            into a 16 KiB buffer it allocates when it
//	                            starts (as ringload -serve-std does)
//	std-4k                      the same with a 4 KiB buffer (any -Nk works)
//	ringpoll-ENGINE-handler     ringpoll.Listen + NewServer(echo handler):
//	                            Reader.Next, Writer.WriteBinary, Flush
//	ringpoll-ENGINE-conn        ringpoll.Listen + AcceptConn + a goroutine per
//	                            connection with std's read/write loop and
//	                            16 KiB buffer (-4k etc. for other sizes)
//	netpoll                     cloudwego/netpoll EventLoop, echo handler
//	gnet                        gnet/v2 multicore, echo in OnTraffic
//
// ENGINE is epoll, uring, uring-hybrid, uring-reactor or uring-sqpoll. A
// server that cannot start here (an io_uring engine without io_uring) is
// reported as unavailable and skipped.
//
// The kernel's memory (socket buffers, io_uring requests) is not in any
// process's RSS; the table's "slab" column is the growth of the system's
// slab memory (/proc/meminfo Slab) per connection, both ends of the
// connection and everything else on the machine included: a rough figure,
// meaningful only as a difference between servers.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// main runs ringidle with the process's arguments.
func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// cli runs ringidle and returns its exit code: 0, 1 for a failure, 2 for a
// bad command line.
func cli(args []string, stdout, stderr io.Writer) int {
	err := run(args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		if !errors.Is(err, errFlagReported) {
			fmt.Fprintln(stderr, "ringidle:", err)
		}
		return 2
	default:
		fmt.Fprintln(stderr, "ringidle:", err)
		return 1
	}
}

var (
	// errUsage marks a bad command line.
	errUsage = errors.New("usage")
	// errFlagReported marks a flag error the flag package already printed.
	errFlagReported = errors.New("flag error already reported")
)

// config is a parsed and validated command line.
type config struct {
	n        int           // client connections per run
	repeats  int           // runs per server
	servers  []serverSpec  // in the order given
	out      string        // JSON lines file; "" writes none
	settle   time.Duration // wait between opening the connections and measuring
	warmup   int           // echo round trips before the baseline
	talk     bool          // each connection echoes once before the measurement
	sources  int           // source addresses 127.0.0.1 .. 127.0.0.<sources>
	dialers  int           // connections opened concurrently
	runLimit time.Duration // bound on one run
	// profileDir, if set, gets heap profiles of each child at the baseline
	// and with the connections idle (every allocation sampled).
	profileDir string
}

// defaultServers is the -servers default.
func defaultServers() string {
	names := []string{"std", "std-4k"}
	for _, e := range engines {
		names = append(names, "ringpoll-"+e+"-handler")
	}
	for _, e := range engines {
		names = append(names, "ringpoll-"+e+"-conn")
	}
	for _, e := range engines {
		names = append(names, "ringpoll-"+e+"-conn-4k")
	}
	return strings.Join(append(names, "netpoll", "gnet"), ",")
}

// parseFlags parses args into a config. With -child it returns the child's
// server name instead.
func parseFlags(args []string, stderr io.Writer) (cfg config, child string, err error) {
	fs := flag.NewFlagSet("ringidle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.n, "n", 10000, "idle client connections per run")
	fs.IntVar(&cfg.repeats, "repeats", 3, "runs per server (medians are reported)")
	servers := fs.String("servers", defaultServers(), "comma-separated servers to measure (see the package doc)")
	fs.StringVar(&cfg.out, "out", "", "write every run and the medians to this file as JSON lines")
	fs.DurationVar(&cfg.settle, "settle", 2*time.Second, "wait after the warm-up and after opening the connections before measuring (over ringpoll's 1 s handler-pool idle time)")
	fs.IntVar(&cfg.warmup, "warmup", 8192, "echo round trips before the baseline (0: measure from a cold server)")
	fs.BoolVar(&cfg.talk, "talk", true, "each connection echoes once before the measurement (false: connections only connect, and echo after it)")
	fs.IntVar(&cfg.sources, "sources", 1, "client source addresses 127.0.0.1..127.0.0.N (more ephemeral ports)")
	fs.IntVar(&cfg.dialers, "dialers", 64, "connections opened concurrently")
	fs.DurationVar(&cfg.runLimit, "run-timeout", 3*time.Minute, "bound on one server's run")
	fs.StringVar(&cfg.profileDir, "heap-profiles", "", "write each child's heap profiles (baseline and idle, every allocation sampled) into this directory")
	fs.StringVar(&child, "child", "", "internal: serve SERVER and answer measurement requests on stdin")
	if err := fs.Parse(args); err != nil {
		return cfg, "", fmt.Errorf("%w: %w", errUsage, errFlagReported)
	}
	if fs.NArg() > 0 {
		return cfg, "", fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if child != "" {
		if _, err := parseServer(child); err != nil {
			return cfg, "", fmt.Errorf("%w: -child: %w", errUsage, err)
		}
		return cfg, child, nil
	}
	switch {
	case cfg.n < 1 || cfg.n > 200_000:
		return cfg, "", fmt.Errorf("%w: -n %d: want 1 to 200000", errUsage, cfg.n)
	case cfg.repeats < 1 || cfg.repeats > 100:
		return cfg, "", fmt.Errorf("%w: -repeats %d: want 1 to 100", errUsage, cfg.repeats)
	case cfg.settle < 0 || cfg.settle > time.Minute:
		return cfg, "", fmt.Errorf("%w: -settle %v: want 0 to 1m", errUsage, cfg.settle)
	case cfg.warmup < 0 || cfg.warmup > 1_000_000:
		return cfg, "", fmt.Errorf("%w: -warmup %d: want 0 to 1000000", errUsage, cfg.warmup)
	case cfg.sources < 1 || cfg.sources > 250:
		return cfg, "", fmt.Errorf("%w: -sources %d: want 1 to 250", errUsage, cfg.sources)
	case cfg.dialers < 1 || cfg.dialers > 1024:
		return cfg, "", fmt.Errorf("%w: -dialers %d: want 1 to 1024", errUsage, cfg.dialers)
	case cfg.runLimit < time.Second:
		return cfg, "", fmt.Errorf("%w: -run-timeout %v: want at least 1s", errUsage, cfg.runLimit)
	}
	seen := map[string]bool{}
	for _, name := range strings.Split(*servers, ",") {
		name = strings.TrimSpace(name)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		s, err := parseServer(name)
		if err != nil {
			return cfg, "", fmt.Errorf("%w: -servers: %w", errUsage, err)
		}
		cfg.servers = append(cfg.servers, s)
	}
	if len(cfg.servers) == 0 {
		return cfg, "", fmt.Errorf("%w: -servers names no server", errUsage)
	}
	if cfg.profileDir != "" {
		if st, err := os.Stat(cfg.profileDir); err != nil || !st.IsDir() {
			return cfg, "", fmt.Errorf("%w: -heap-profiles %q: not a directory", errUsage, cfg.profileDir)
		}
	}
	return cfg, "", nil
}

// run parses args and either serves as a child or runs the measurement.
func run(args []string, stdout, stderr io.Writer) error {
	cfg, child, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if child != "" {
		return runChild(child, os.Stdin, stdout)
	}
	return measureAll(cfg, stdout, stderr)
}
