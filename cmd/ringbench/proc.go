//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cpuSet is a list of CPU numbers; empty means "wherever the kernel
// likes".
type cpuSet []int

func (s cpuSet) String() string {
	if len(s) == 0 {
		return "any"
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c))
	}
	return b.String()
}

// parseCPUs reads "0", "0,2" or "2-3".
func parseCPUs(s string) (cpuSet, error) {
	var set cpuSet
	for _, f := range splitList(s) {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= 1024 {
			return nil, fmt.Errorf("CPU list %q: want numbers or ranges like 0,2 or 1-3", s)
		}
		for c := a; c <= b; c++ {
			set = append(set, c)
		}
	}
	return set, nil
}

// defaultPlacement splits the CPUs this process may use in two: the
// server gets the first half, the load generator the rest. With one CPU
// nothing is pinned.
func defaultPlacement() (srv, ld cpuSet) {
	cpus := allowedCPUs()
	if len(cpus) < 2 {
		return nil, nil
	}
	half := len(cpus) / 2
	return cpus[:half], cpus[half:]
}

// allowedCPUs lists the CPUs this process may run on, nil if it cannot
// tell.
func allowedCPUs() cpuSet {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus cpuSet
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// coresPlacement is -cores k over cpus, the CPUs this process may use:
// the server on the first k, the load generator on the rest, which must
// keep at least one.
func coresPlacement(k int, cpus cpuSet) (srv, ld cpuSet, err error) {
	if k < 1 || k > len(cpus)-1 {
		return nil, nil, fmt.Errorf("-cores %d: this process may use %d CPUs (%s), and the load generator needs one: want 1 to %d", k, len(cpus), cpus, len(cpus)-1)
	}
	return cpus[:k], cpus[k:], nil
}

// startPinned starts cmd with its CPU affinity set to cpus. The child
// inherits the affinity of the thread that forks it, so a goroutine of its
// own locks itself to a thread, narrows that thread's affinity, starts the
// command and restores the affinity. Should the restore fail, the
// goroutine exits still locked, and the runtime ends the thread rather than
// reuse it.
func startPinned(cmd *exec.Cmd, cpus cpuSet) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var old, set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("sched_getaffinity: %w", err)
			return
		}
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- fmt.Errorf("pinning to CPUs %s: %w", cpus, err)
			return
		}
		err := cmd.Start()
		if rerr := unix.SchedSetaffinity(0, &old); rerr != nil {
			errc <- err // the child started (or not) all the same
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// freePort returns a loopback address with a port that was free a moment
// ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// process is a running server.
type process struct {
	cmd  *exec.Cmd
	addr string
	log  *os.File
	done chan error // gets Wait's result
	// statsFile is where a ringpoll server dumps its loop counters on
	// SIGUSR1; "" for other servers.
	statsFile string
}

// startServer starts a server command pinned to cpus, logging to logPath,
// and waits until it accepts TCP connections on addr (at most 15 s).
func startServer(ctx context.Context, argv []string, addr string, cpus cpuSet, logPath string) (*process, error) {
	return startServerOn(ctx, "tcp", argv, addr, cpus, logPath)
}

// startServerOn is startServer for a server on network "tcp" or "udp"; a
// UDP server is ready once it holds a socket bound to addr's port (UDP
// has no connection to try).
func startServerOn(ctx context.Context, network string, argv []string, addr string, cpus cpuSet, logPath string) (*process, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startPinned(cmd, cpus); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	p := &process{cmd: cmd, addr: addr, log: lf, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if network == "udp" {
			if bindsUDP(cmd.Process.Pid, addr) {
				return p, nil
			}
		} else if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			// The port was free when freePort looked; another program
			// (a test beside this one) may have bound it since, and then
			// the dial reached that one while the server fails to bind.
			if listensOn(cmd.Process.Pid, addr) {
				return p, nil
			}
		}
		select {
		case werr := <-p.done:
			p.done <- werr
			p.log.Close()
			return nil, fmt.Errorf("%s exited before listening (%v); its log: %s: %w", argv[0], werr, tail(logPath), errExitedEarly)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s did not listen on %s within 15 s; its log: %s", argv[0], addr, tail(logPath))
		}
	}
}

// errExitedEarly marks a server that exited before it listened: most
// often because its port was taken meanwhile, so the caller may try
// another.
var errExitedEarly = errors.New("the server exited before it listened")

// listensOn reports whether process pid holds a listening TCP socket on
// addr's port (any local address, IPv4 or IPv6), by the socket inodes of
// /proc/net/tcp{,6} and the process's descriptors.
func listensOn(pid int, addr string) bool {
	return holdsSocket(pid, addr, "0A", "/proc/net/tcp", "/proc/net/tcp6") // TCP_LISTEN
}

// bindsUDP reports whether process pid holds an unconnected UDP socket
// bound to addr's port, by /proc/net/udp{,6} as listensOn does.
func bindsUDP(pid int, addr string) bool {
	return holdsSocket(pid, addr, "07", "/proc/net/udp", "/proc/net/udp6") // TCP_CLOSE: not connected
}

// holdsSocket reports whether process pid holds a socket in state (the
// st column, hex) on addr's port listed in one of the tables.
func holdsSocket(pid int, addr, state string, tables ...string) bool {
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return false
	}
	want := map[string]bool{}
	for _, table := range tables {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st ... uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != state {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
				want["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(want) == 0 {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(dir + "/" + fd.Name()); err == nil && want[link] {
			return true
		}
	}
	return false
}

// stop asks the server to exit (SIGTERM), kills it after 5 s, and waits.
// It returns the exit error of a server that did not exit cleanly.
func (p *process) stop() error {
	defer p.log.Close()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		return err
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		return errors.New("did not exit within 5 s of SIGTERM; killed")
	}
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "..." + s[len(s)-600:]
	}
	if s == "" {
		return "(empty)"
	}
	return s
}
