//go:build linux

// Command ringecho is an echo server for scripts and benchmarks.
//
//	ringecho -addr 127.0.0.1:7000 -engine auto -api handler
//
// With -api handler (the default) it echoes through a Server handler and the
// nocopy Reader/Writer; with -api conn it runs a goroutine per accepted
// net.Conn that copies back what it reads; -api inline is the handler run
// on the event loop itself (ringpoll.WithInlineHandler). TCP connections
// get TCP_NODELAY.
// With -proto rpc it serves ringbench's rpc scenario instead
// (netpoll-benchmark's RPC rules, internal/rpcframe): length-prefixed
// requests, each answered, on the handler's pooled goroutine (off the event
// loop), with a reply built in a buffer of its own.
//
// With -stats-file PATH it writes the event loops' summed counters to PATH
// as JSON whenever it gets SIGUSR1: ringload reads them to count the
// library's own syscalls where perf is missing.
//
// It logs the engine in use when it starts, and on SIGINT or SIGTERM shuts
// down gracefully, logs each event loop's counters (internal/loopstats:
// io_uring_enter calls by purpose, SQEs, CQEs, wake-ups, ...) and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/internal/benchfmt"
	"github.com/ringpoll/ringpoll/internal/connset"
	"github.com/ringpoll/ringpoll/internal/loopstats"
	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

func main() {
	if err := run(os.Args[1:], nil, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ringecho:", err)
		os.Exit(1)
	}
}

// run runs the server until a signal, logging to logw; ready, if set, is
// told the address once it listens (tests use it).
func run(args []string, ready func(net.Addr), logw io.Writer) error {
	fs := flag.NewFlagSet("ringecho", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7000", "address to listen on (host:port, or a path with -network unix)")
	network := fs.String("network", "tcp", "tcp, tcp4, tcp6, unix, or udp, udp4, udp6 (datagrams counted, and echoed with -reply)")
	engineName := fs.String("engine", "auto", "engine: auto, epoll, uring, uring-hybrid, uring-reactor, uring-sqpoll")
	api := fs.String("api", "handler", "handler (Server + nocopy Reader/Writer), inline (the handler on the event loop) or conn (goroutine per net.Conn); for UDP: inline, handler (a PacketServer), conn (a ringpoll PacketConn, one datagram per call), std or xnet")
	proto := fs.String("proto", "echo", "echo (bytes back as they come) or rpc (length-prefixed requests and replies)")
	loops := fs.Int("loops", 0, "event loops (0: the library default)")
	bufRing := fs.String("buffer-ring", "", "io_uring: the loops' provided buffers as count,size, e.g. 64,16384 (ringpoll.WithBufferRing; empty: the library default)")
	busyPoll := fs.Duration("busy-poll", 0, "io_uring loops poll this long for work before they sleep (ringpoll.WithBusyPoll; 0: off)")
	grace := fs.Duration("grace", 5*time.Second, "how long shutdown waits for connections to finish")
	statsFile := fs.String("stats-file", "", "on SIGUSR1, write the loops' summed counters to this file as JSON (for ringload -server-stats); for UDP, the datagrams received (also at start)")
	reply := fs.Bool("reply", false, "UDP: send each datagram back to its sender (else only count them)")
	gro := fs.Bool("gro", false, "UDP: let the kernel coalesce datagrams (ringpoll.WithGRO)")
	sockets := fs.Int("sockets", 1, "UDP: SO_REUSEPORT sockets on the address, each read by its own goroutine")
	rcvbuf := fs.Int("rcvbuf", 0, "UDP: each socket's receive buffer in bytes (SO_RCVBUF, capped by net.core.rmem_max; 0: the kernel's default)")
	loopCPUs := fs.String("loop-cpus", "", "pin the loops' threads (io_uring) or the UDP readers to these CPUs, e.g. 0,1 (ringpoll.WithLoopCPUs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	engine, err := ringpoll.ParseEngine(*engineName)
	if err != nil {
		return err
	}
	var placement []ringpoll.Option
	if *loopCPUs != "" {
		var cpus []int
		for _, f := range strings.Split(*loopCPUs, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("-loop-cpus %q: want CPU numbers separated by commas", *loopCPUs)
			}
			cpus = append(cpus, n)
		}
		placement = append(placement, ringpoll.WithLoopCPUs(cpus...))
	}
	if strings.HasPrefix(*network, "udp") {
		s := &udpServer{network: *network, addr: *addr, api: *api, engine: engine, reply: *reply, gro: *gro,
			sockets: *sockets, statsFile: *statsFile, log: slog.New(slog.NewTextHandler(logw, nil)), placement: placement, rcvbuf: *rcvbuf}
		return s.run(ready)
	}
	if *api != "handler" && *api != "inline" && *api != "conn" {
		return fmt.Errorf("-api %q: want handler, inline or conn", *api)
	}
	if *proto != "echo" && *proto != "rpc" {
		return fmt.Errorf("-proto %q: want echo or rpc", *proto)
	}
	log := slog.New(slog.NewTextHandler(logw, nil))
	opts := append([]ringpoll.Option{ringpoll.WithEngine(engine), ringpoll.WithLogger(log)}, placement...)
	if *loops != 0 {
		opts = append(opts, ringpoll.WithLoops(*loops))
	}
	if *bufRing != "" {
		var count, size int
		if _, err := fmt.Sscanf(*bufRing, "%d,%d", &count, &size); err != nil {
			return fmt.Errorf("-buffer-ring %q: want count,size, e.g. 64,16384", *bufRing)
		}
		opts = append(opts, ringpoll.WithBufferRing(count, size))
	}
	if *busyPoll != 0 {
		opts = append(opts, ringpoll.WithBusyPoll(*busyPoll))
	}
	ln, err := ringpoll.Listen(*network, *addr, opts...)
	if err != nil {
		return err
	}
	running := ln.Stats().Engine
	log.Info("ringecho listening", "addr", ln.Addr().String(), "engine", running.String(), "api", *api, "proto", *proto, "gomaxprocs", runtime.GOMAXPROCS(0))
	if engine == ringpoll.EngineAuto && running == ringpoll.EngineEpoll {
		log.Info("ringecho: io_uring unavailable", "reason", ringpoll.UringStatus())
	}
	// The loops' counters, when the server exits.
	defer func() {
		for _, s := range loopstats.Of(ln) {
			log.Info("ringecho loop stats", "stats", s.String())
		}
	}()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *statsFile != "" {
		stopStats := dumpStatsOnSignal(ln, *statsFile, log)
		defer stopStats()
	}
	if ready != nil {
		ready(ln.Addr())
	}
	if *api != "conn" {
		h := echo
		if *proto == "rpc" {
			h = rpc
		}
		var sopts []ringpoll.Option
		if *api == "inline" {
			sopts = append(sopts, ringpoll.WithInlineHandler())
		}
		return serveHandler(ctx, ln, h, sopts, *grace, log)
	}
	serve := func(c net.Conn) { io.Copy(c, c) }
	if *proto == "rpc" {
		serve = func(c net.Conn) { rpcframe.Serve(c, c, 16<<10) }
	}
	return serveConns(ctx, ln, serve, *grace, log)
}

// dumpStatsOnSignal writes the listener's loop counters to path on every
// SIGUSR1 (written to a temporary file and renamed, so a reader never sees
// half of it). It returns a function that stops it.
func dumpStatsOnSignal(ln *ringpoll.Listener, path string, log *slog.Logger) func() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		var seq uint64
		for {
			select {
			case <-done:
				return
			case <-sig:
			}
			seq++
			t := benchfmt.LoopTotals{Seq: seq}
			for _, s := range loopstats.Of(ln) {
				t.Enters += s.Enters()
				t.EpollWaits += s.EpollWaits
				t.SQEs += s.SQEs
				t.CQEs += s.CQEs
				t.BytesIn += s.BytesIn
				t.BytesOut += s.BytesOut
				t.ENOBUFS += s.ENOBUFS
				t.Rearms += s.Rearms
			}
			t.Syscalls = t.Enters + t.EpollWaits
			if err := benchfmt.WriteLoopTotals(path, t); err != nil {
				log.Warn("ringecho: writing stats", "err", err)
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}

// echo is the canonical netpoll echo: the bytes go back out without a copy
// when the socket takes them at once.
func echo(ctx context.Context, c *ringpoll.Conn) error {
	r, w := c.Reader(), c.Writer()
	b, err := r.Next(r.Len())
	if err != nil {
		return err
	}
	if _, err := w.WriteBinary(b); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return r.Release()
}

// rpc answers every whole request frame in the input with a copy of its
// payload, built in memory from the Writer (never the request's own
// bytes). A partial frame stays in the input until the rest arrives.
func rpc(ctx context.Context, c *ringpoll.Conn) error {
	r, w := c.Reader(), c.Writer()
	answered := false
	for r.Len() >= rpcframe.HeaderLen {
		h, err := r.Peek(rpcframe.HeaderLen)
		if err != nil {
			return err
		}
		n, err := rpcframe.PayloadLen(h)
		if err != nil {
			return err // the peer is out of step: close the connection
		}
		if r.Len() < rpcframe.HeaderLen+n {
			break
		}
		req, err := r.Next(rpcframe.HeaderLen + n)
		if err != nil {
			return err
		}
		out, err := w.Malloc(rpcframe.HeaderLen + n)
		if err != nil {
			return err
		}
		copy(out, req)
		answered = true
	}
	if !answered {
		return nil
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return r.Release()
}

func serveHandler(ctx context.Context, ln *ringpoll.Listener, h ringpoll.Handler, opts []ringpoll.Option, grace time.Duration, log *slog.Logger) error {
	srv, err := ringpoll.NewServer(h, opts...)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	// Listen sets TCP_NODELAY on every accepted TCP connection.
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Info("ringecho shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("ringecho: shutdown forced", "err", err)
	}
	if err := <-done; !errors.Is(err, ringpoll.ErrServerClosed) {
		return err
	}
	return nil
}

func serveConns(ctx context.Context, ln *ringpoll.Listener, serve func(net.Conn), grace time.Duration, log *slog.Logger) error {
	var conns connset.Set
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.AcceptConn()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		if ln.Addr().Network() != "unix" {
			c.SetNoDelay(true)
		}
		conns.Serve(c, serve)
	}
	log.Info("ringecho shutting down")
	// Copiers end when their peers hang up; after the grace period they
	// are cut off.
	conns.Wait(grace)
	return nil
}
