// Command frameserve runs the framework servers that ringbench -frameworks
// measures with clients the project did not write (wrk, h2load,
// grpc-go's benchmark client and dnsperf) and, for QUIC, with
// bench/cmd/quicload. Each
// run serves one server kind, in its own process, on one TCP address (a
// UDP one for quic-* and dns-*):
//
//	frameserve -server KIND -addr 127.0.0.1:8080 [-file PATH] [-h2c]
//
// The kinds:
//
//   - hertz-ringpoll, hertz-netpoll, hertz-std: CloudWeGo Hertz
//     (server.New, no middleware) on ringpoll's default engine through
//     adapters/hertz (server.WithTransport(hertz.NewTransporter)), on
//     netpoll (Hertz's default transport) and on its standard transport
//     (net). They answer GET /hello with "Hello, World!" and GET /json with
//     a 4 KiB JSON document, marshalled for each request (c.JSON).
//   - http-ringpoll, http-ringpoll-epoll, http-std: net/http's http.Server
//     serving a ringpoll.Listen listener (the default engine, or epoll) or
//     std net.Listen. They answer /hello and /json as Hertz does (json with
//     encoding/json), and with -file PATH they serve that file at /file
//     with http.ServeFile. -h2c lets clients speak HTTP/2 without TLS
//     (prior knowledge; http.Server's Protocols) as well as HTTP/1.1.
//   - grpc-ringpoll, grpc-ringpoll-epoll, grpc-std: grpc-go's benchmark
//     service (google.golang.org/grpc/benchmark.StartServer, protobuf
//     codec) on a ringpoll.Listen listener (the default engine, or epoll)
//     or on net.Listen.
//   - quic-ringpoll, quic-std: quic-go (quic.Transport.Listen, TLS 1.3
//     with a self-signed certificate made at start, ALPN "ringbench") on
//     the MessageConn of a ringpoll.ListenPacket socket (the default
//     engine; quic-go reads through its ReadBatch and writes with
//     WriteMsgUDP, GSO included) or on a std *net.UDPConn from
//     net.ListenUDP. Each stream the client opens asks for a number of
//     bytes (8 bytes big-endian, then the client's FIN); the server answers
//     with that many bytes of a seeded pattern and closes the stream
//     (bench/internal/quicbench).
//   - dns-ringpoll, dns-ringpoll-epoll, dns-std: miekg/dns's dns.Server
//     on a ringpoll.ListenPacket socket (the default engine, or epoll) or
//     on net.ListenPacket, answering every A query with 192.0.2.1 (TTL 60)
//     and anything else with an empty answer.
//
// Once listening it prints one line to stderr,
//
//	frameserve: <kind> listening on <addr> (GOMAXPROCS <n>)
//
// then serves until SIGINT or SIGTERM, stops the server (at most 2 s) and
// exits 0. Bad flags exit 2; failing to listen exits 1.
//
// With -check WHAT it is instead a client that makes one request to the
// server at -addr and checks the answer: hello, json, h2c-hello (GET
// /hello over HTTP/2 with prior knowledge), file (GET /file, compared with
// -file byte for byte), grpc-unary or grpc-stream (one call of the
// benchmark service, the response's payload size checked), quic-bulk or
// quic-small (one stream asking for 4 MiB or 64 B, every byte checked
// against the pattern), dns (an A query over UDP, the address checked).
// It prints what it got and exits 0 if the answer is
// right, 1 if not. ringbench runs it before every measured run.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/bench/internal/cmdline"
)

// stopTimeout bounds how long frameserve spends stopping its server after
// a signal.
const stopTimeout = 2 * time.Second

// kinds are the values -server takes, in the order usage lists them.
var kinds = []string{
	"hertz-ringpoll", "hertz-netpoll", "hertz-std",
	"http-ringpoll", "http-ringpoll-epoll", "http-std",
	"grpc-ringpoll", "grpc-ringpoll-epoll", "grpc-std",
	"quic-ringpoll", "quic-std",
	"dns-ringpoll", "dns-ringpoll-epoll", "dns-std",
}

// checks are the values -check takes.
var checks = []string{"hello", "json", "h2c-hello", "file", "grpc-unary", "grpc-stream", "quic-bulk", "quic-small", "dns"}

// config is a parsed and validated command line.
type config struct {
	kind  string // -server
	addr  string
	file  string // served at /file (http-*), or compared (-check file)
	h2c   bool
	check string // -check: run one request instead of serving
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is frameserve's whole life; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return cmdline.Exit(stderr, "frameserve", err, "")
	}
	if cfg.check != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got, err := check(ctx, cfg.check, cfg.addr, cfg.file)
		if err != nil {
			fmt.Fprintf(stderr, "frameserve: check %s at %s: %v\n", cfg.check, cfg.addr, err)
			return 1
		}
		fmt.Fprintf(stdout, "ok: %s\n", got)
		return 0
	}

	// Catch the signals before announcing the address, so a harness that
	// signals as soon as it can connect gets a clean stop.
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	srv, err := start(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "frameserve: %s: listen on %s: %v\n", cfg.kind, cfg.addr, err)
		return 1
	}
	fmt.Fprintf(stderr, "frameserve: %s listening on %s (GOMAXPROCS %d)\n", cfg.kind, srv.addr, runtime.GOMAXPROCS(0))
	code := 0
	select {
	case <-sigCtx.Done():
	case err := <-srv.done:
		fmt.Fprintf(stderr, "frameserve: %s stopped on its own: %v\n", cfg.kind, err)
		code = 1
	}
	stopSignals()
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := srv.stop(ctx); err != nil {
		fmt.Fprintf(stderr, "frameserve: %s: stop: %v\n", cfg.kind, err)
	}
	return code
}

// parseFlags parses and validates the command line; errors name the flag
// and say what is wanted.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := cmdline.FlagSet("frameserve", stderr)
	fs.StringVar(&cfg.kind, "server", "", "server kind: "+fmt.Sprint(kinds))
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "TCP (UDP for quic-* and dns-*) `host:port` to listen on (port 0 picks one), or with -check to ask")
	fs.StringVar(&cfg.file, "file", "", "http-* servers: serve this file at /file; -check file: the file to compare with")
	fs.BoolVar(&cfg.h2c, "h2c", false, "http-* servers: also speak HTTP/2 without TLS, with prior knowledge (http.Protocols)")
	fs.StringVar(&cfg.check, "check", "", "make one request to -addr and check the answer: "+fmt.Sprint(checks))
	if err := cmdline.Parse(fs, args); err != nil {
		return cfg, err
	}
	if _, _, err := net.SplitHostPort(cfg.addr); err != nil {
		return cfg, fmt.Errorf("-addr %q: want host:port, e.g. 127.0.0.1:8080 (%v)", cfg.addr, err)
	}
	if cfg.check != "" {
		switch {
		case cfg.kind != "":
			return cfg, errors.New("-check and -server exclude each other: -check is a client")
		case !slices.Contains(checks, cfg.check):
			return cfg, fmt.Errorf("-check %q: want one of %v", cfg.check, checks)
		case cfg.check == "file" && cfg.file == "":
			return cfg, errors.New("-check file needs -file, the file the answer must equal")
		}
		return cfg, nil
	}
	switch {
	case cfg.kind == "":
		return cfg, fmt.Errorf("-server is required: want one of %v (or -check)", kinds)
	case !slices.Contains(kinds, cfg.kind):
		return cfg, fmt.Errorf("-server %q: want one of %v", cfg.kind, kinds)
	case cfg.h2c && !isHTTP(cfg.kind):
		return cfg, fmt.Errorf("-h2c: only for the http-* servers, not %s", cfg.kind)
	case cfg.file != "" && !isHTTP(cfg.kind):
		return cfg, fmt.Errorf("-file: only the http-* servers serve a file, not %s", cfg.kind)
	}
	if cfg.file != "" {
		if _, err := os.Stat(cfg.file); err != nil {
			return cfg, fmt.Errorf("-file: %v", err)
		}
	}
	return cfg, nil
}

// running is a started server.
type running struct {
	addr string
	done chan error // gets the serve loop's error if it ends on its own
	stop func(context.Context) error
}

// start listens and serves cfg.kind in the background.
func start(cfg config) (*running, error) {
	switch cfg.kind {
	case "hertz-ringpoll", "hertz-netpoll", "hertz-std":
		return startHertz(cfg)
	case "grpc-ringpoll", "grpc-ringpoll-epoll", "grpc-std":
		return startGRPC(cfg)
	case "quic-ringpoll", "quic-std":
		return startQUIC(cfg)
	case "dns-ringpoll", "dns-ringpoll-epoll", "dns-std":
		return startDNS(cfg)
	default:
		return startHTTP(cfg)
	}
}

func isHTTP(kind string) bool {
	return kind == "http-ringpoll" || kind == "http-ringpoll-epoll" || kind == "http-std"
}
