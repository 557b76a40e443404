//go:build linux

package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

// config is what one load run does.
type config struct {
	addr        string
	conns       int
	size        int    // payload bytes per message
	proto       string // "echo" or "rpc"
	depth       int    // messages in flight per connection (1: ping-pong)
	rate        float64
	requests    uint64        // end the window after this many requests (0: no limit)
	firstWait   time.Duration // a window with no request completed goes on until one does, for up to this (0: not)
	warmup      time.Duration
	duration    time.Duration
	serverPID   int           // 0: no server statistics
	dialTimeout time.Duration // per connection
	perf        string        // perf binary; "" looks it up in PATH
	serverStats string        // ringecho's -stats-file; "": none
	slowloris   int           // extra connections dribbling a byte every 1-2 s, not measured
	// prime: each connection echoes one message as it connects, before
	// the warm-up (echo and rpc).
	prime bool
	// closeReset: the connections end with a reset (SO_LINGER 0), not a
	// FIN, and leave no TIME_WAIT behind.
	closeReset bool
	// sources spreads the connections over the source addresses
	// 127.0.0.1 to 127.0.0.sources (1: the kernel picks, as usual).
	sources int
	// slowlorisFirst spreads the slowloris connections' first bytes over
	// that long (the command line: 2 s). 0, for tests: each sends its
	// first byte at once and the load starts after every echo came back
	// (or the connection failed).
	slowlorisFirst time.Duration
	// statsWait bounds the wait for each -server-stats dump (0:
	// benchfmt.DefaultStatsWait).
	statsWait time.Duration
	// -proto kv: records in the server's file, percent of puts, and the
	// cap on requests in flight over all connections (0: none).
	kvRecords   int64
	kvWrites    int
	outstanding int
	// rates, if any, are loads run one after another on the same
	// connections (-rates), in place of rate.
	rates []float64
}

// headerLen is the connection id and sequence number at the start of every
// message's payload.
const headerLen = 16

// wireLen is the bytes one message takes on the wire.
func (c config) wireLen() int {
	if c.proto == "rpc" {
		return rpcframe.HeaderLen + c.size
	}
	return c.size
}

func (c config) check() error {
	switch {
	case c.addr == "":
		return errors.New("-addr is empty")
	case c.conns < 1:
		return fmt.Errorf("-conns %d: want at least 1", c.conns)
	case c.size < headerLen:
		return fmt.Errorf("-size %d: want at least %d (the id and sequence header)", c.size, headerLen)
	case c.size > 64<<20:
		return fmt.Errorf("-size %d: want at most 64 MiB", c.size)
	case c.proto != "echo" && c.proto != "rpc" && c.proto != "kv":
		return fmt.Errorf("-proto %q: want echo, rpc or kv", c.proto)
	case c.proto == "kv" && c.kvRecords < 1:
		return fmt.Errorf("-kv-records %d: -proto kv needs the server file's record count", c.kvRecords)
	case c.kvWrites < 0 || c.kvWrites > 100:
		return fmt.Errorf("-kv-writes %d: want a percentage, 0 to 100", c.kvWrites)
	case c.proto == "kv" && (c.depth != 1 || c.rate != 0):
		return errors.New("-proto kv sends one request at a time per connection, as fast as replies come: no -depth or -rate")
	case c.prime && c.proto == "kv":
		return errors.New("-prime sends an echo: -proto echo or rpc")
	case len(c.rates) > 0 && c.proto == "kv":
		return errors.New("-rates runs loads one after another: -proto echo or rpc")
	case c.sources < 1 || c.sources > maxSources:
		return fmt.Errorf("-sources %d: want 1 to %d", c.sources, maxSources)
	case c.sources > 1 && !loopback(c.addr):
		return fmt.Errorf("-sources %d: the sources are loopback addresses, and -addr %s is not one", c.sources, c.addr)
	case c.outstanding < 0:
		return fmt.Errorf("-outstanding %d: want 0 (no cap) or more", c.outstanding)
	case c.outstanding > 0 && c.proto != "kv":
		return errors.New("-outstanding needs -proto kv")
	case c.proto == "rpc" && c.size > rpcframe.MaxPayload:
		return fmt.Errorf("-size %d: the rpc payload is at most %d", c.size, rpcframe.MaxPayload)
	case c.depth < 1 || c.depth > 1024:
		return fmt.Errorf("-depth %d: want 1 to 1024", c.depth)
	case c.depth*c.wireLen() > 64<<20:
		return fmt.Errorf("-depth %d x %d B: want at most 64 MiB in flight per connection", c.depth, c.wireLen())
	case c.rate < 0 || math.IsNaN(c.rate) || math.IsInf(c.rate, 0):
		return fmt.Errorf("-rate %v: want 0 (no cap) or a request rate", c.rate)
	case c.warmup < 0:
		return fmt.Errorf("-warmup %v: want 0 or more", c.warmup)
	case c.duration <= 0:
		return fmt.Errorf("-duration %v: want more than 0", c.duration)
	case c.serverPID < 0:
		return fmt.Errorf("-server-pid %d: want a PID", c.serverPID)
	case c.slowloris < 0 || c.slowloris > 100000:
		return fmt.Errorf("-slowloris %d: want 0 to 100000", c.slowloris)
	case c.serverStats != "" && c.serverPID == 0:
		return errors.New("-server-stats needs -server-pid (the server to signal)")
	}
	return nil
}

// loopback reports whether addr's host is an IPv4 loopback address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.To4() != nil && ip.IsLoopback()
}

// parseRateList reads -rates: offered rates per second, comma-separated,
// 0 for as fast as replies come.
func parseRateList(s string) ([]float64, error) {
	var rs []float64
	for _, f := range strings.Split(s, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("-rates %q: want rates per second (0: as fast as replies come), comma-separated", s)
		}
		rs = append(rs, r)
	}
	return rs, nil
}
