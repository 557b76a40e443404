// Command peerecho runs the peer echo servers that ringbench measures ringpoll
// against. Each run serves one protocol with one third-party Go network
// library, in its own process, on one TCP address:
//
//	peerecho -impl netpoll|gnet -proto echo|rpc -addr 127.0.0.1:7000 [-loops N]
//
// With -impl gnet, -proto udp serves datagrams on a UDP address instead,
// counting them (udp-reply: and sending each back), with the count in
// -stats-file, for ringbench -udp.
//
// -impl picks the library: netpoll is github.com/cloudwego/netpoll (a
// netpoll.EventLoop whose OnRequest handler runs on netpoll's goroutine pool),
// gnet is github.com/panjf2000/gnet/v2 (gnet.Run in multicore mode). Both
// servers set TCP_NODELAY on accepted connections. -loops, when above zero,
// sets the number of netpoll pollers (netpoll.SetNumLoops) or of gnet event
// loops (gnet.WithNumEventLoop); 0 keeps the library's default.
//
// The two protocols are:
//
//   - echo: raw echo. Whatever bytes arrive on a connection are written back
//     on it, in order, with no framing. The handlers are written the way each
//     library's own echo example is: netpoll reads everything buffered with
//     Reader.Next and writes it with Writer.WriteBinary and Flush; gnet takes
//     everything with Conn.Next(-1) and writes it with Conn.Write on the event
//     loop.
//   - rpc: the "RPC rules" of cloudwego/netpoll-benchmark. A message is a frame:
//     a 4-byte big-endian length L (0 to 16 MiB) followed by L bytes of payload.
//     For every complete request frame the server sends back a frame of the
//     same length whose payload is a copy of the request's, built in a buffer
//     distinct from the request's. Replies on a connection keep request order,
//     and requests may be pipelined. The handler runs off the event loop: on
//     netpoll's handler goroutine, or for gnet on an ants goroutine pool (see
//     gnet.go for how reply order is kept). A frame announcing more than
//     16 MiB closes that connection at once; the server keeps running.
//
// Once listening, peerecho prints exactly one line to stderr,
//
//	peerecho: <impl> <proto> listening on <addr>
//
// with the address actually bound (so -addr 127.0.0.1:0 can be used), then
// serves until SIGINT or SIGTERM, stops the server (bounded: at most 2 s, then
// remaining connections are dropped) and exits 0. Bad flags exit 2 with a
// message naming the flag; failing to listen exits 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/bench/internal/cmdline"
)

// Values accepted by -impl and -proto.
const (
	implNetpoll = "netpoll"
	implGnet    = "gnet"
	protoEcho   = "echo"
	protoRPC    = "rpc"
	// UDP, gnet only: datagrams counted, or counted and sent back.
	protoUDP      = "udp"
	protoUDPReply = "udp-reply"
)

// stopTimeout bounds how long peerecho spends stopping its server after a
// signal before it exits anyway.
const stopTimeout = 2 * time.Second

// config is a parsed and validated command line.
type config struct {
	impl  string // implNetpoll or implGnet
	proto string // protoEcho or protoRPC
	addr  string // host:port to listen on; port 0 picks a free port
	loops int    // pollers / event loops; 0 keeps the library default
	// statsFile, for the UDP protocols, gets the datagrams counted.
	statsFile string
	// rcvbuf, for the UDP protocols, is the socket's receive buffer.
	rcvbuf int
}

// main runs peerecho with the process's arguments and exits with run's code.
func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is peerecho's whole life: parse args, listen, serve until SIGINT or
// SIGTERM, stop. It returns the process exit code: 0 after a signal-driven
// stop (or -h), 1 if the server cannot listen or dies on its own, 2 for bad
// flags. Messages go to stderr.
func run(args []string, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return cmdline.Exit(stderr, "peerecho", err, "usage: peerecho -impl netpoll|gnet -proto echo|rpc -addr host:port [-loops N]")
	}

	// Catch the signals before announcing the address, so that a harness
	// which signals as soon as it reads the line always gets a clean stop.
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()

	srv, err := startServer(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "peerecho: %s %s: listen on %s: %v\n", cfg.impl, cfg.proto, cfg.addr, err)
		return 1
	}
	fmt.Fprintf(stderr, "peerecho: %s %s listening on %s\n", cfg.impl, cfg.proto, srv.Addr())

	code := 0
	select {
	case <-sigCtx.Done():
	case <-srv.Done():
		fmt.Fprintf(stderr, "peerecho: %s %s: server stopped on its own: %v\n", cfg.impl, cfg.proto, srv.Err())
		code = 1
	}
	// From here a second signal kills the process the default way.
	stopSignals()

	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		fmt.Fprintf(stderr, "peerecho: %s %s: stop: %v\n", cfg.impl, cfg.proto, err)
	}
	return code
}

// parseFlags parses and validates peerecho's command line. Errors from
// validation name the flag and say what is wanted; errors the flag package
// has already printed come back wrapped around cmdline.ErrReported (or as
// flag.ErrHelp for -h).
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := cmdline.FlagSet("peerecho", stderr)
	fs.StringVar(&cfg.impl, "impl", "", "server library: netpoll or gnet (required)")
	fs.StringVar(&cfg.proto, "proto", "", "protocol: echo (raw echo) or rpc (length-prefixed frames) (required)")
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:7000", "TCP `host:port` to listen on (port 0 picks a free port)")
	fs.IntVar(&cfg.loops, "loops", 0, "netpoll pollers or gnet event loops; 0 keeps the library default")
	fs.IntVar(&cfg.rcvbuf, "rcvbuf", 0, "with -proto udp or udp-reply: the socket's receive buffer in bytes (0: the kernel's default)")
	fs.StringVar(&cfg.statsFile, "stats-file", "", "with -proto udp or udp-reply: write {\"seq\":N,\"packets\":P} here at start and on SIGUSR1")
	if err := cmdline.Parse(fs, args); err != nil {
		return cfg, err
	}
	switch cfg.impl {
	case implNetpoll, implGnet:
	case "":
		return cfg, errors.New("-impl is required: want netpoll or gnet")
	default:
		return cfg, fmt.Errorf("-impl %q: want netpoll or gnet", cfg.impl)
	}
	switch cfg.proto {
	case protoEcho, protoRPC:
	case protoUDP, protoUDPReply:
		if cfg.impl != implGnet {
			return cfg, fmt.Errorf("-proto %s: only with -impl gnet (netpoll has no UDP)", cfg.proto)
		}
	case "":
		return cfg, errors.New("-proto is required: want echo or rpc")
	default:
		return cfg, fmt.Errorf("-proto %q: want echo, rpc, or with gnet udp or udp-reply", cfg.proto)
	}
	if _, _, err := net.SplitHostPort(cfg.addr); err != nil {
		return cfg, fmt.Errorf("-addr %q: want host:port, e.g. 127.0.0.1:7000 (%v)", cfg.addr, err)
	}
	if cfg.loops < 0 {
		return cfg, fmt.Errorf("-loops %d: want a count >= 0 (0 keeps the library default)", cfg.loops)
	}
	return cfg, nil
}
