package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/cloudwego/netpoll"

	"github.com/ringpoll/ringpoll"
)

// The child's protocol. Once its server listens, the child writes one
// helloMsg line to stdout. Then, for each line read from stdin, it writes
// one memStats line: "gc" runs runtime.GC() first, "free" runs
// debug.FreeOSMemory() (a GC that also returns free pages to the kernel),
// "profile PATH" runs runtime.GC() and writes a heap profile to PATH.
// It exits when stdin ends. With RINGIDLE_MEMPROFILE=1 in its environment
// it samples every allocation (runtime.MemProfileRate = 1) for the heap
// profiles.

// helloMsg is the child's first line: the address its server listens on, or
// why it could not start.
type helloMsg struct {
	Addr  string `json:"addr,omitempty"`
	Error string `json:"error,omitempty"`
}

// memStats is what the child reports of its runtime.MemStats.
type memStats struct {
	HeapInuse  uint64 `json:"heap_inuse"`
	HeapAlloc  uint64 `json:"heap_alloc"`
	StackInuse uint64 `json:"stack_inuse"`
	Sys        uint64 `json:"sys"`
	// Where RSS beyond the heap in use can be: free heap pages not yet
	// returned (HeapIdle less HeapReleased), span records, GC metadata.
	HeapIdle     uint64 `json:"heap_idle"`
	HeapReleased uint64 `json:"heap_released"`
	MSpanInuse   uint64 `json:"mspan_inuse"`
	GCSys        uint64 `json:"gc_sys"`
	OtherSys     uint64 `json:"other_sys"`
	NumGoroutine int    `json:"goroutines"`
	Error        string `json:"error,omitempty"`
}

// runChild serves spec's echo server and answers measurement requests from
// in on out until in ends.
func runChild(name string, in io.Reader, out io.Writer) error {
	spec, err := parseServer(name)
	if err != nil {
		return err
	}
	if os.Getenv(memProfileEnv) == "1" {
		runtime.MemProfileRate = 1
	}
	enc := json.NewEncoder(out)
	if err := raiseNofile(0); err != nil {
		return enc.Encode(helloMsg{Error: err.Error()})
	}
	addr, err := startServer(spec)
	if err != nil {
		return enc.Encode(helloMsg{Error: err.Error()})
	}
	if err := enc.Encode(helloMsg{Addr: addr}); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var m memStats
		req, arg, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch req {
		case "gc":
			runtime.GC()
		case "free":
			debug.FreeOSMemory()
		case "profile":
			if err := writeHeapProfile(arg); err != nil {
				m.Error = err.Error()
			}
		default:
			m.Error = fmt.Sprintf("unknown request %q", sc.Text())
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		m.HeapInuse, m.HeapAlloc, m.StackInuse, m.Sys = ms.HeapInuse, ms.HeapAlloc, ms.StackInuse, ms.Sys
		m.HeapIdle, m.HeapReleased, m.MSpanInuse, m.GCSys, m.OtherSys = ms.HeapIdle, ms.HeapReleased, ms.MSpanInuse, ms.GCSys, ms.OtherSys
		m.NumGoroutine = runtime.NumGoroutine()
		if err := enc.Encode(m); err != nil {
			return err
		}
	}
	// stdin ended: the parent is done with us. Exiting closes every
	// connection; nothing is shut down gracefully, nothing needs to be.
	return sc.Err()
}

// memProfileEnv, set to 1 in a child's environment, makes it record every
// allocation for its heap profiles.
const memProfileEnv = "RINGIDLE_MEMPROFILE"

// writeHeapProfile runs a GC, so that the profile is up to date, and writes
// the heap profile to path.
func writeHeapProfile(path string) error {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// startServer starts spec's echo server on 127.0.0.1:0 and returns its
// address. The server runs until the process exits.
func startServer(spec serverSpec) (string, error) {
	switch spec.kind {
	case kindStd:
		return startStd(spec.bufSize)
	case kindHandler, kindConn:
		return startRingpoll(spec)
	case kindNetpoll:
		return startNetpoll()
	case kindGnet:
		return startGnet()
	}
	return "", fmt.Errorf("server %q: unknown kind %q", spec.name, spec.kind)
}

// startStd starts std net's goroutine-per-connection echo server.
func startStd(bufSize int) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go acceptLoop(func() (net.Conn, error) { return ln.Accept() }, bufSize)
	return ln.Addr().String(), nil
}

// acceptLoop accepts connections until accept fails for good and serves
// each with echoConn on a goroutine of its own.
func acceptLoop(accept func() (net.Conn, error), bufSize int) {
	for {
		c, err := accept()
		if err != nil {
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of descriptors: the parent's check will see the
				// connections that were not served.
				continue
			}
			return
		}
		go echoConn(c, bufSize)
	}
}

// echoConn writes back everything it reads until the peer hangs up or an
// error, through a buffer of bufSize bytes allocated when it starts, as
// ringload's std server does (not io.Copy, which could splice or pick its
// own buffer).
func echoConn(c net.Conn, bufSize int) {
	defer c.Close()
	buf := make([]byte, bufSize)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// startRingpoll starts a ringpoll echo server on spec's engine, through the
// handler API or a goroutine per accepted Conn.
func startRingpoll(spec serverSpec) (string, error) {
	engine, err := ringpoll.ParseEngine(spec.engine)
	if err != nil {
		return "", err
	}
	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0", ringpoll.WithEngine(engine))
	if err != nil {
		return "", err
	}
	if got := ln.Stats().Engine; got != engine {
		ln.Close()
		return "", fmt.Errorf("asked for engine %s, got %s", engine, got)
	}
	if spec.kind == kindConn {
		go acceptLoop(func() (net.Conn, error) { return ln.AcceptConn() }, spec.bufSize)
		return ln.Addr().String(), nil
	}
	srv, err := ringpoll.NewServer(ringpollEcho)
	if err != nil {
		ln.Close()
		return "", err
	}
	go srv.Serve(ln)
	return ln.Addr().String(), nil
}

// ringpollEcho is the canonical nocopy echo handler (as cmd/ringecho's).
func ringpollEcho(_ context.Context, c *ringpoll.Conn) error {
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

// startNetpoll starts a cloudwego/netpoll echo server, with the handler
// peerecho uses (netpoll's own echo example).
func startNetpoll() (string, error) {
	ln, err := netpoll.CreateListener("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	evl, err := netpoll.NewEventLoop(netpollEcho)
	if err != nil {
		ln.Close()
		return "", err
	}
	go evl.Serve(ln)
	return ln.Addr().String(), nil
}

// netpollEcho writes back everything buffered, then releases it.
func netpollEcho(_ context.Context, conn netpoll.Connection) error {
	r, w := conn.Reader(), conn.Writer()
	defer r.Release()
	msg, err := r.Next(r.Len())
	if err != nil {
		return err
	}
	if _, err := w.WriteBinary(msg); err != nil {
		return err
	}
	return w.Flush()
}
