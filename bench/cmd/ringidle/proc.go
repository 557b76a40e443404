package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nofileTarget is the descriptor limit ringidle asks for, in the parent
// (its client connections) and the child (the server's).
const nofileTarget = 65536

// raiseNofile raises RLIMIT_NOFILE to at least need (and nofileTarget),
// hard limit included if it is lower (root may); with need 0 it raises the
// soft limit to the hard one. Setting the limit explicitly also stops Go
// from restoring the original soft limit in the children it starts.
func raiseNofile(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return os.NewSyscallError("getrlimit", err)
	}
	want := lim.Max
	if need > 0 {
		want = max(need, nofileTarget, lim.Cur)
	}
	if lim.Cur >= want {
		return nil
	}
	next := syscall.Rlimit{Cur: want, Max: max(lim.Max, want)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err == nil {
		return nil
	}
	// Not allowed to raise the hard limit: take what there is.
	next = syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &next); err != nil {
		return os.NewSyscallError("setrlimit", err)
	}
	if lim.Max < need {
		return fmt.Errorf("RLIMIT_NOFILE hard limit %d, need %d descriptors (run as root or raise it)", lim.Max, need)
	}
	return nil
}

// procMem is what /proc says about a process's memory, in bytes.
type procMem struct {
	RSS     int64 `json:"rss"`      // VmRSS
	RssAnon int64 `json:"rss_anon"` // RssAnon
}

// readProcMem reads VmRSS and RssAnon from /proc/PID/status.
func readProcMem(pid int) (procMem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMem{}, err
	}
	return parseProcStatus(b)
}

// parseProcStatus takes VmRSS and RssAnon out of a /proc/PID/status.
func parseProcStatus(b []byte) (procMem, error) {
	var m procMem
	var haveRSS bool
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := strings.Cut(string(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "VmRSS":
			n, err := parseKB(v)
			if err != nil {
				return m, fmt.Errorf("VmRSS: %w", err)
			}
			m.RSS, haveRSS = n, true
		case "RssAnon":
			n, err := parseKB(v)
			if err != nil {
				return m, fmt.Errorf("RssAnon: %w", err)
			}
			m.RssAnon = n
		}
	}
	if !haveRSS {
		return m, errors.New("no VmRSS in /proc/PID/status")
	}
	return m, nil
}

// readSlab returns the system's slab memory (Slab in /proc/meminfo) in
// bytes.
func readSlab() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Slab:"); ok {
			return parseKB(v)
		}
	}
	return 0, errors.New("no Slab in /proc/meminfo")
}

// parseKB parses "   1234 kB" into bytes.
func parseKB(v string) (int64, error) {
	f := strings.Fields(v)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("unexpected value %q", v)
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, err
	}
	return n << 10, nil
}

// acceptBacklog returns how many connections wait in the accept queues of
// the TCP listeners on addr's port (the rx_queue of LISTEN sockets in
// /proc/net/tcp, summed, as gnet may listen once per loop).
func acceptBacklog(addr string) (int, error) {
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	return parseAcceptBacklog(b, port)
}

// parseAcceptBacklog sums rx_queue over the LISTEN sockets on port in a
// /proc/net/tcp, and fails if there is none.
func parseAcceptBacklog(b []byte, port int) (int, error) {
	const stateListen = "0A"
	total, found := 0, false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// sl local_address rem_address st tx_queue:rx_queue ...
		if len(f) < 5 || f[3] != stateListen {
			continue
		}
		_, lport, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(lport, 16, 16); err != nil || int(p) != port {
			continue
		}
		_, rxq, ok := strings.Cut(f[4], ":")
		if !ok {
			return 0, fmt.Errorf("bad queue field %q", f[4])
		}
		q, err := strconv.ParseUint(rxq, 16, 32)
		if err != nil {
			return 0, fmt.Errorf("bad queue field %q: %w", f[4], err)
		}
		total += int(q)
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no listener on port %d in /proc/net/tcp", port)
	}
	return total, nil
}

// child is a running "ringidle -child SERVER" process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // the child's stdout, line by line; closed at EOF
	addr  string
}

// replyTimeout bounds the wait for any one line from the child.
const replyTimeout = 30 * time.Second

// startChild starts this executable as the child serving spec and waits
// for the address it listens on. With memProfile the child samples every
// allocation, for heap profiles.
func startChild(spec serverSpec, memProfile bool, stderr io.Writer) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-child", spec.name)
	cmd.Stderr = stderr
	if memProfile {
		cmd.Env = append(os.Environ(), memProfileEnv+"=1")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 4)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	var hello helloMsg
	if err := c.readJSON(&hello); err != nil {
		c.stop()
		return nil, fmt.Errorf("child %s: %w", spec.name, err)
	}
	if hello.Error != "" {
		c.stop()
		return nil, fmt.Errorf("child %s: %s", spec.name, hello.Error)
	}
	c.addr = hello.Addr
	return c, nil
}

// readJSON decodes the child's next line into v.
func (c *child) readJSON(v any) error {
	select {
	case line, ok := <-c.lines:
		if !ok {
			return errors.New("exited early")
		}
		if err := json.Unmarshal([]byte(line), v); err != nil {
			return fmt.Errorf("bad line %q: %w", line, err)
		}
		return nil
	case <-time.After(replyTimeout):
		return fmt.Errorf("no reply within %v", replyTimeout)
	}
}

// snapshot is one measurement of the child.
type snapshot struct {
	memStats
	procMem
	Slab int64 `json:"slab"` // system-wide
}

// measure asks the child to run req ("gc" or "free") and report its
// MemStats, then reads its RSS and the system's slab memory.
func (c *child) measure(req string) (snapshot, error) {
	var s snapshot
	if _, err := io.WriteString(c.stdin, req+"\n"); err != nil {
		return s, err
	}
	if err := c.readJSON(&s.memStats); err != nil {
		return s, err
	}
	if s.memStats.Error != "" {
		return s, errors.New(s.memStats.Error)
	}
	var err error
	if s.procMem, err = readProcMem(c.cmd.Process.Pid); err != nil {
		return s, err
	}
	s.Slab, err = readSlab()
	return s, err
}

// stop ends the child: its stdin is closed, which makes it exit; if it has
// not within a few seconds it is killed (by its PID, through its
// os.Process).
func (c *child) stop() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range c.lines {
		}
		c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}
