//go:build linux

package main

import (
	"bytes"
	"cmp"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/internal/loopstats"
)

// The leak checks run after every client finished and the server was shut
// down. Closes complete asynchronously (a loop finalizes a socket after its
// last operation; an engine stops ~200 ms after its last listener or
// connection closed, closing its epoll or io_uring descriptors), so each
// check polls until its value is back or the settle time is over.

// pollEvery is how often the leak checks look again.
const pollEvery = 10 * time.Millisecond

// warmUp opens what the process keeps for good once used, so that it is in
// the baseline: Go's network poller (an epoll descriptor and an eventfd)
// and the io_uring probe, which runs once per process.
func warmUp() {
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	ringpoll.UringStatus()
}

// fdTable maps this process's open descriptors to what they are
// (readlink of /proc/self/fd/N: "socket:[123]", "anon_inode:[io_uring]").
type fdTable map[int]string

// openFDs lists the process's open descriptors, leaving out the one used
// to read the directory.
func openFDs() fdTable {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	t := make(fdTable, len(names))
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil || uintptr(fd) == d.Fd() {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + name)
		if err != nil {
			continue // closed meanwhile
		}
		t[fd] = target
	}
	return t
}

// extra describes the descriptors of t that base does not have (or had
// for something else), sorted: "17 socket:[4242]".
func (t fdTable) extra(base fdTable) []string {
	var out []string
	for fd, target := range t {
		if base[fd] != target {
			out = append(out, fmt.Sprintf("%d %s", fd, target))
		}
	}
	sort.Strings(out)
	return out
}

// baseline is what the process had before a run's server started.
type baseline struct {
	fds        fdTable
	goroutines int
}

// takeBaseline records the open descriptors and goroutines now.
func takeBaseline() baseline {
	return baseline{fds: openFDs(), goroutines: runtime.NumGoroutine()}
}

// FDCheck is the descriptor leak check of a run.
type FDCheck struct {
	Before int      `json:"before"`
	After  int      `json:"after"`
	Extra  []string `json:"extra,omitempty"` // descriptors left over, if any
	Waited string   `json:"waited"`          // how long it took to get back
	OK     bool     `json:"ok"`
}

// checkFDs polls until no more descriptors are open than at base, for up
// to limit.
func checkFDs(base fdTable, limit time.Duration) FDCheck {
	start := time.Now()
	for {
		now := openFDs()
		if len(now) <= len(base) || time.Since(start) >= limit {
			c := FDCheck{Before: len(base), After: len(now), Waited: roundDur(time.Since(start)), OK: len(now) <= len(base)}
			if !c.OK {
				c.Extra = now.extra(base)
			}
			return c
		}
		time.Sleep(pollEvery)
	}
}

// GoroutineCheck is the goroutine leak check of a run.
type GoroutineCheck struct {
	Before int    `json:"before"`
	After  int    `json:"after"`
	Waited string `json:"waited"`
	OK     bool   `json:"ok"`
	// Dump is the goroutine profile (debug=1, grouped by stack) when
	// goroutines were left over, truncated.
	Dump string `json:"dump,omitempty"`
}

// maxDump bounds a goroutine dump in the verdict.
const maxDump = 16 << 10

// checkGoroutines polls until no more goroutines run than base, for up to
// limit.
func checkGoroutines(base int, limit time.Duration) GoroutineCheck {
	start := time.Now()
	for {
		n := runtime.NumGoroutine()
		if n <= base || time.Since(start) >= limit {
			c := GoroutineCheck{Before: base, After: n, Waited: roundDur(time.Since(start)), OK: n <= base}
			if !c.OK {
				c.Dump = goroutineDump()
			}
			return c
		}
		time.Sleep(pollEvery)
	}
}

// goroutineDump returns the goroutine profile, grouped by stack, truncated
// to maxDump bytes.
func goroutineDump() string {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	if b.Len() > maxDump {
		b.Truncate(maxDump)
		b.WriteString("\n... (truncated)")
	}
	return b.String()
}

// StatsCheck is the check of the listener's loop counters after shutdown.
type StatsCheck struct {
	Loops int `json:"loops"`
	// BuffersOut sums Stats.BuffersOut: provided buffers still out of
	// the rings. Every one must be back.
	BuffersOut int64  `json:"buffers_out"`
	Waited     string `json:"waited"`
	OK         bool   `json:"ok"`
	// The engine's totals, for information.
	Accepts     uint64 `json:"accepts"`
	BytesIn     uint64 `json:"bytes_in"`
	BytesOut    uint64 `json:"bytes_out"`
	ENOBUFS     uint64 `json:"enobufs"`
	CQOverflows uint64 `json:"cq_overflows"`
	Rearms      uint64 `json:"rearms"`
	Enters      uint64 `json:"enters"`
	EpollWaits  uint64 `json:"epoll_waits"`
	Wakeups     uint64 `json:"wakeups"`
	// Problem explains a failed check.
	Problem string `json:"problem,omitempty"`
}

// checkStats polls the listener's loop counters until every provided
// buffer is back in its ring, for up to limit. Counters that only grow are
// reported, not checked, except that a listener must have loops and they
// must run its engine.
func checkStats(ln *ringpoll.Listener, limit time.Duration) StatsCheck {
	start := time.Now()
	for {
		stats := loopstats.Of(ln)
		c := StatsCheck{Loops: len(stats), Waited: roundDur(time.Since(start))}
		running := ln.Stats().Engine.String()
		for _, s := range stats {
			c.BuffersOut += s.BuffersOut
			c.Accepts += s.Accepts
			c.BytesIn += s.BytesIn
			c.BytesOut += s.BytesOut
			c.ENOBUFS += s.ENOBUFS
			c.CQOverflows += s.CQOverflows
			c.Rearms += s.Rearms
			c.Enters += s.Enters()
			c.EpollWaits += s.EpollWaits
			c.Wakeups += s.Wakeups
			if s.Engine != running && c.Problem == "" {
				c.Problem = fmt.Sprintf("loop %d reports engine %s, the listener runs %s", s.Loop, s.Engine, running)
			}
		}
		switch {
		case len(stats) == 0:
			c.Problem = "the listener's engine reported no loops"
		case c.BuffersOut != 0 && c.Problem == "":
			c.Problem = fmt.Sprintf("%d provided buffers still out of the rings", c.BuffersOut)
		}
		c.OK = c.Problem == ""
		if c.OK || time.Since(start) >= limit {
			return c
		}
		time.Sleep(pollEvery)
	}
}

// roundDur formats d to milliseconds.
func roundDur(d time.Duration) string { return d.Round(time.Millisecond).String() }

// tcpStates names the st column of /proc/net/tcp.
var tcpStates = map[string]string{
	"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
	"05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
	"09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING",
}

// tcpSocket is a line of /proc/net/tcp.
type tcpSocket struct {
	LocalPort, RemotePort int
	State                 string
	TxQueue, RxQueue      int64 // bytes unsent or unacknowledged; bytes unread
}

// tcpSockets reads /proc/net/tcp and tcp6, by socket inode.
func tcpSockets() map[string]tcpSocket {
	m := map[string]tcpSocket{}
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 {
				continue
			}
			var s tcpSocket
			s.LocalPort = hexPort(f[1])
			s.RemotePort = hexPort(f[2])
			s.State = cmp.Or(tcpStates[f[3]], f[3])
			if tx, rx, ok := strings.Cut(f[4], ":"); ok {
				s.TxQueue, _ = strconv.ParseInt(tx, 16, 64)
				s.RxQueue, _ = strconv.ParseInt(rx, 16, 64)
			}
			m[f[9]] = s
		}
	}
	return m
}

// hexPort returns the port of an "ADDR:PORT" address of /proc/net/tcp.
func hexPort(addr string) int {
	_, p, _ := strings.Cut(addr, ":")
	n, _ := strconv.ParseInt(p, 16, 32)
	return int(n)
}

// LingerCheck is the check that the server closes its side of every
// connection soon after the client closed: once every client is done, the
// process must be back to the sockets it had before the first client.
type LingerCheck struct {
	Waited string `json:"waited"`
	OK     bool   `json:"ok"`
	// Open describes the server connections still open after the limit:
	// their TCP state, queues and the client that had the other end.
	Open []string `json:"open,omitempty"`
}

// checkLinger polls until the process has no socket that idle (the
// listening server's descriptors, before any client) did not have, for up
// to limit. describe adds what the server knows of a descriptor's
// connection.
func checkLinger(idle fdTable, limit time.Duration, describe func(fd int) string) LingerCheck {
	start := time.Now()
	for {
		var extra []int
		now := openFDs()
		for fd, target := range now {
			if strings.HasPrefix(target, "socket:") && idle[fd] != target {
				extra = append(extra, fd)
			}
		}
		if len(extra) == 0 || time.Since(start) >= limit {
			c := LingerCheck{Waited: roundDur(time.Since(start)), OK: len(extra) == 0}
			sort.Ints(extra)
			socks := tcpSockets()
			for _, fd := range extra {
				target := now[fd]
				inode := strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")
				desc := fmt.Sprintf("fd %d %s: ", fd, target)
				if s, ok := socks[inode]; ok {
					desc += fmt.Sprintf("%s, local port %d, remote port %d, tx queue %d, rx queue %d",
						s.State, s.LocalPort, s.RemotePort, s.TxQueue, s.RxQueue)
				} else {
					desc += socketState(fd)
				}
				if d := describe(fd); d != "" {
					desc += "; " + d
				}
				c.Open = append(c.Open, desc)
			}
			return c
		}
		time.Sleep(pollEvery)
	}
}

// portBook remembers which client dialed from which local port, so a
// server-side socket can be traced to its client. It is safe for
// concurrent use.
type portBook struct {
	mu    sync.Mutex
	ports map[int]string
}

func newPortBook() *portBook { return &portBook{ports: map[int]string{}} }

// record notes that the client described by who uses local port port.
func (b *portBook) record(port int, who string) {
	b.mu.Lock()
	b.ports[port] = who
	b.mu.Unlock()
}

// lookup returns the last client that used port.
func (b *portBook) lookup(port int) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	who, ok := b.ports[port]
	return who, ok
}

// socketState describes a socket that /proc/net/tcp no longer lists: one
// the kernel already closed (after a RST, or both sides' FINs), whose
// descriptor the process still holds. It reads TCP_INFO, which changes
// nothing on the socket (unlike SO_ERROR, which would clear the error).
func socketState(fd int) string {
	info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return "not in /proc/net/tcp; TCP_INFO: " + err.Error()
	}
	state := fmt.Sprintf("%02X", info.State)
	return fmt.Sprintf("not in /proc/net/tcp (the kernel closed it), TCP_INFO state %s, %d bytes unacked",
		cmp.Or(tcpStates[state], state), info.Unacked)
}
