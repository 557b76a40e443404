//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// The UDP scenario (-udp): datagrams one way, from cmd/ringload -proto udp
// (several sockets, sendmmsg, GSO) on the load CPUs to a server on the
// server CPUs that counts them. On loopback the sender's CPU would run the
// receive path's softirqs too; with -rps (the default) lo's receive
// packet steering sends that work to the server CPUs, as a NIC's interrupt
// would, so the server pays for the stack and the sender outruns it. The
// server CPUs' busy time (from /proc/stat, softirqs included) is the cost;
// drops are the kernel's UDP receive-buffer errors (/proc/net/snmp).
//
// With -udp-rate it is request/response instead (DNS-like): clients that
// each await their request's echo, from ringload -proto udp-rr (whose
// pacer sends the requests evenly spaced, from a thread of its own), or
// with -udp-client c from bench/c/udp_rr.c, one C thread without a
// language runtime, to check the Go client against (docs/bench/HISTORY.md,
// "UDP's DNS-like tail" and "ringload's pacer: the load as asked").

// udpServers are the UDP servers ringbench knows: argv builders given the
// binaries, port, stats file and whether to answer each datagram.
// "ringpoll" is a PacketServer with WithInlineHandler on the default
// engine; "ringpoll-pooled" is one without options, its handler on a
// pooled goroutine.
var udpServers = map[string]func(b bins, port int, stats string, reply bool, rcvbuf int) []string{
	"ringpoll":        ringechoUDP("-api", "inline"),
	"ringpoll-pooled": ringechoUDP("-api", "handler"),
	"ringpoll-gro":    ringechoUDP("-api", "inline", "-gro"),
	// The epoll engine's reader: recvmmsg(2) through ReadBatch, where the
	// default (uring) reads through a multishot RECVMSG.
	"ringpoll-epoll": ringechoUDP("-api", "inline", "-engine", "epoll"),
	// A PacketConn read and answered one datagram per call
	// (ReadFromAddrPort, WriteToAddrPort), as a std user's loop.
	"ringpoll-conn":       ringechoUDP("-api", "conn"),
	"ringpoll-conn-epoll": ringechoUDP("-api", "conn", "-engine", "epoll"),
	"std":                 ringechoUDP("-api", "std"),
	// std again: paired with std like every server, its ratios show how far
	// two identical servers land apart in the run, the floor under which
	// no difference can be told.
	"std-twin": ringechoUDP("-api", "std"),
	"xnet":     ringechoUDP("-api", "xnet"),
	"gnet": func(b bins, port int, stats string, reply bool, rcvbuf int) []string {
		proto := "udp"
		if reply {
			proto = "udp-reply"
		}
		return []string{b.peerecho, "-impl", "gnet", "-proto", proto, "-addr", fmt.Sprint("127.0.0.1:", port), "-stats-file", stats, "-rcvbuf", fmt.Sprint(rcvbuf)}
	},
	"c-recvmmsg": func(b bins, port int, stats string, reply bool, rcvbuf int) []string {
		argv := []string{b.cUDP, "-b", fmt.Sprint(rcvbuf)}
		if reply {
			argv = append(argv, "-r")
		}
		return append(argv, fmt.Sprint(port), stats)
	},
}

func ringechoUDP(args ...string) func(b bins, port int, stats string, reply bool, rcvbuf int) []string {
	return func(b bins, port int, stats string, reply bool, rcvbuf int) []string {
		argv := append([]string{b.ringecho, "-network", "udp4", "-addr", fmt.Sprint("127.0.0.1:", port), "-stats-file", stats, "-rcvbuf", fmt.Sprint(rcvbuf)}, args...)
		if reply {
			argv = append(argv, "-reply")
		}
		return argv
	}
}

const (
	defaultUDPOffered = "600000,1200000"
	defaultUDPServers = "ringpoll,ringpoll-epoll,ringpoll-gro,std,xnet,gnet,c-recvmmsg"
	defaultUDPSizes   = "32,1200"
)

type udpConfig struct {
	servers               []string
	sizes                 []int
	flows, repeats        int
	warmup, duration      time.Duration
	serverCPUs, loadCPUs  cpuSet
	rps                   bool
	rpsCPUs               cpuSet    // where RPS sends lo's receive work
	offered               []float64 // one way: offered datagrams/s; 0: unpaced
	rcvbuf                int       // each server socket's SO_RCVBUF
	rr                    bool      // request/response instead of one way
	rate                  float64   // with rr: offered requests/s
	cClient               bool      // with rr: bench/c/udp_rr.c, not ringload, is the client
	noCharts              bool      // -charts=false: the report only
	src, out, commandLine string
	stdout, stderr        io.Writer
	bins                  bins
}

// udpRun is one measured run.
type udpRun struct {
	Server  string  `json:"server"`
	Size    int     `json:"size"`
	Offered float64 `json:"offered_rate"`
	Repeat  int     `json:"repeat"`
	Window  float64 `json:"window_s"`
	RecvPPS float64 `json:"recv_pps"`
	SentPPS float64 `json:"sent_pps"`
	// Busy is the server CPUs' busy fraction (1 per CPU), softirqs
	// included; PerCPU is datagrams received per busy CPU-second.
	Busy   float64 `json:"server_cpu_busy"`
	PerCPU float64 `json:"recv_per_cpu_s"`
	// UserBusy and KernelBusy split Busy by the share of user ticks
	// (user, nice) and kernel ticks (system, irq, softirq) the server
	// CPUs counted; both -1 when they counted none.
	UserBusy   float64 `json:"server_cpu_user"`
	KernelBusy float64 `json:"server_cpu_kernel"`
	DropPPS    float64 `json:"drops_per_s"`
	// Request/response runs: requests answered per second, their latency,
	// requests lost, and busy server-CPU µs per request.
	Mode     string  `json:"mode"`
	ReqPerS  float64 `json:"req_per_s,omitempty"`
	P99us    float64 `json:"p99_us,omitempty"`
	P999us   float64 `json:"p999_us,omitempty"`
	Lost     uint64  `json:"lost,omitempty"`
	CPUusReq float64 `json:"cpu_us_per_req,omitempty"`
	Err      string  `json:"error,omitempty"`
}

func parseUDP(servers, sizes string) ([]string, []int, error) {
	var ss []string
	for _, s := range splitList(servers) {
		if _, ok := udpServers[s]; !ok {
			return nil, nil, fmt.Errorf("-udp-servers: unknown server %q (want some of %s)", s, strings.Join(slices.Sorted(maps.Keys(udpServers)), ","))
		}
		ss = append(ss, s)
	}
	var zs []int
	for _, s := range splitList(sizes) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 16 || n > 1472 {
			return nil, nil, fmt.Errorf("-udp-sizes: %q: want 16 to 1472 bytes (one datagram per 1500-byte frame)", s)
		}
		zs = append(zs, n)
	}
	if len(ss) == 0 || len(zs) == 0 {
		return nil, nil, errors.New("-udp-servers and -udp-sizes must name at least one each")
	}
	return ss, zs, nil
}

// benchUDP runs the UDP scenario and writes udp.jsonl and udp.md (for
// request/response udp-rr.jsonl and udp-rr.md) in out.
func benchUDP(ctx context.Context, cfg udpConfig) (int, error) {
	logs := filepath.Join(cfg.out, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return 1, err
	}
	binDir := filepath.Join(cfg.out, "bin")
	if err := goBuild(ctx, cfg.src, binDir, "./cmd/ringecho", "./cmd/ringload"); err != nil {
		return 1, err
	}
	cfg.bins = bins{ringecho: filepath.Join(binDir, "ringecho"), ringload: filepath.Join(binDir, "ringload"),
		peerecho: filepath.Join(binDir, "peerecho"), cUDP: filepath.Join(binDir, "udp_recv"), cUDPRR: filepath.Join(binDir, "udp_rr")}
	if cfg.cClient {
		if err := cCompile(ctx, filepath.Join(cfg.src, "bench", "c", "udp_rr.c"), cfg.bins.cUDPRR); err != nil {
			return 1, fmt.Errorf("-udp-client c: %w", err)
		}
	}
	if slices.Contains(cfg.servers, "gnet") {
		if err := goBuild(ctx, filepath.Join(cfg.src, "bench"), binDir, "./cmd/peerecho"); err != nil {
			fmt.Fprintf(cfg.stderr, "ringbench: leaving gnet out: %v\n", err)
			cfg.servers = slices.DeleteFunc(cfg.servers, func(s string) bool { return s == "gnet" })
		}
	}
	if slices.Contains(cfg.servers, "c-recvmmsg") {
		if err := cCompile(ctx, filepath.Join(cfg.src, "bench", "c", "udp_recv.c"), cfg.bins.cUDP); err != nil {
			fmt.Fprintf(cfg.stderr, "ringbench: leaving c-recvmmsg out: %v\n", err)
			cfg.servers = slices.DeleteFunc(cfg.servers, func(s string) bool { return s == "c-recvmmsg" })
		}
	}
	if cfg.rps && !cfg.rr {
		restore, err := steerLoopback(cfg.rpsCPUs)
		if err != nil {
			return 1, fmt.Errorf("-rps: %w (run as root, or give -rps=false)", err)
		}
		defer restore()
	}
	name := "udp"
	if cfg.rr {
		name = "udp-rr"
	}
	jf, err := os.Create(filepath.Join(cfg.out, name+".jsonl"))
	if err != nil {
		return 1, err
	}
	defer jf.Close()
	var runs []udpRun
	failed := false
	offered := cfg.offered
	if cfg.rr || len(offered) == 0 {
		offered = []float64{cfg.rate}
	}
	for rep := range cfg.repeats {
		for _, size := range cfg.sizes {
			for _, rate := range offered {
				order := slices.Clone(cfg.servers)
				k := rep % len(order)
				order = append(order[k:], order[:k]...)
				for _, srv := range order {
					if ctx.Err() != nil {
						return 1, ctx.Err()
					}
					r := udpOnce(ctx, cfg, srv, size, rate, rep, filepath.Join(logs, fmt.Sprintf("udp-%s-%d-%.0f-%d", srv, size, rate, rep)))
					if r.Err != "" {
						failed = true
						fmt.Fprintf(cfg.stderr, "ringbench: udp %s %d B repeat %d: %s\n", srv, size, rep, r.Err)
					}
					if cfg.rr {
						fmt.Fprintf(cfg.stderr, "udp-rr %-13s %5d B rep %d: %8.0f req/s p99 %6.0fµs busy %.2f %.2f CPU-µs/req (user / kernel %s) lost %d\n",
							srv, size, rep, r.ReqPerS, r.P99us, r.Busy, r.CPUusReq, udpSplit([]udpRun{r}, 1e6, func(r udpRun) float64 { return r.ReqPerS }), r.Lost)
					} else {
						fmt.Fprintf(cfg.stderr, "udp %-13s %5d B offered %8.0f rep %d: %9.0f recv/s %9.0f sent/s busy %.2f %9.0f per CPU-s drops %.0f/s\n",
							srv, size, rate, rep, r.RecvPPS, r.SentPPS, r.Busy, r.PerCPU, r.DropPPS)
					}
					runs = append(runs, r)
					if err := writeJSONLine(jf, r); err != nil {
						return 1, err
					}
				}
			}
		}
	}
	if err := writeUDPOutputs(cfg, runs, name, offered); err != nil {
		return 1, err
	}
	if failed {
		return 1, nil
	}
	return 0, nil
}

// cCompile builds a C program without libraries.
// cUDPRRArgs are bench/c/udp_rr.c's arguments for clients clients at
// rate requests/s of size bytes to 127.0.0.1:port.
func cUDPRRArgs(port, clients int, rate float64, size int, warmup, duration time.Duration) []string {
	return []string{"127.0.0.1", fmt.Sprint(port), fmt.Sprint(clients), fmt.Sprint(rate), fmt.Sprint(size),
		fmt.Sprint(warmup.Milliseconds()), fmt.Sprint(duration.Milliseconds())}
}

func cCompile(ctx context.Context, src, out string) error {
	cmd := exec.CommandContext(ctx, "cc", "-O2", "-o", out, src)
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cc %s: %v: %s", filepath.Base(src), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// udpOnce runs one server under the load and measures it.
func udpOnce(ctx context.Context, cfg udpConfig, srv string, size int, rate float64, rep int, logBase string) udpRun {
	r := udpRun{Server: srv, Size: size, Offered: rate, Repeat: rep, Mode: "oneway"}
	if cfg.rr {
		r.Mode = "rr"
	}
	fail := func(err error) udpRun {
		r.Err = err.Error()
		return r
	}
	port, err := freeUDPPort()
	if err != nil {
		return fail(err)
	}
	stats := logBase + ".stats"
	os.Remove(stats)
	argv := udpServers[srv](cfg.bins, port, stats, cfg.rr, cfg.rcvbuf)
	lf, err := os.Create(logBase + ".log")
	if err != nil {
		return fail(err)
	}
	defer lf.Close()
	server := exec.Command(argv[0], argv[1:]...)
	server.Stdout, server.Stderr = lf, lf
	server.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startPinned(server, cfg.serverCPUs); err != nil {
		return fail(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- server.Wait() }()
	defer func() {
		server.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			server.Process.Kill()
			<-exited
		}
	}()
	if err := waitFile(ctx, stats, exited, 15*time.Second); err != nil {
		return fail(fmt.Errorf("%s did not start: %v; its log: %s", srv, err, tail(logBase+".log")))
	}
	var out bytes.Buffer
	largv := []string{"-proto", "udp", "-addr", fmt.Sprint("127.0.0.1:", port),
		"-conns", fmt.Sprint(cfg.flows), "-size", fmt.Sprint(size),
		"-warmup", cfg.warmup.String(), "-duration", cfg.duration.String(), "-json"}
	largv = append(largv, "-rate", fmt.Sprint(rate))
	if cfg.rr {
		largv[1] = "udp-rr"
	}
	load := exec.Command(cfg.bins.ringload, largv...)
	if cfg.rr && cfg.cClient {
		load = exec.Command(cfg.bins.cUDPRR, cUDPRRArgs(port, cfg.flows, rate, size, cfg.warmup, cfg.duration)...)
	}
	load.Stdout, load.Stderr = &out, lf
	load.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startPinned(load, cfg.loadCPUs); err != nil {
		return fail(err)
	}
	loadDone := make(chan error, 1)
	go func() { loadDone <- load.Wait() }()
	sample := func() (benchfmt.LoopTotals, cpuTicks, uint64, time.Time, error) {
		t, err := benchfmt.AskLoopTotals(server.Process.Pid, stats, 0, 0)
		if err != nil {
			return t, cpuTicks{}, 0, time.Time{}, err
		}
		now := time.Now()
		c, err := readCPUTicks(cfg.serverCPUs)
		if err != nil {
			return t, c, 0, now, err
		}
		d, err := udpDrops()
		return t, c, d, now, err
	}
	time.Sleep(cfg.warmup + 50*time.Millisecond)
	t1, c1, d1, at1, err1 := sample()
	time.Sleep(cfg.duration - 100*time.Millisecond)
	t2, c2, d2, at2, err2 := sample()
	lerr := <-loadDone
	if err := errors.Join(err1, err2); err != nil {
		return fail(err)
	}
	client := "ringload"
	if cfg.rr && cfg.cClient {
		client = "udp_rr"
	}
	if lerr != nil {
		return fail(fmt.Errorf("%s: %v", client, lerr))
	}
	var lr struct {
		SentPPS float64 `json:"sent_pps"`
		Errors  uint64  `json:"errors"`
		First   string  `json:"first_error"`
		ReqPerS float64 `json:"req_per_s"`
		P99us   float64 `json:"p99_us"`
		P999us  float64 `json:"p999_us"`
		Lost    uint64  `json:"lost"`
	}
	if err := json.Unmarshal(out.Bytes(), &lr); err != nil {
		return fail(fmt.Errorf("%s's output %q: %v", client, out.String(), err))
	}
	if lr.Errors > 0 {
		return fail(fmt.Errorf("%s: %d errors, first: %s", client, lr.Errors, lr.First))
	}
	r.Window = at2.Sub(at1).Seconds()
	r.RecvPPS = float64(t2.Packets-t1.Packets) / r.Window
	r.SentPPS = lr.SentPPS
	r.DropPPS = float64(d2-d1) / r.Window
	r.Busy = c2.busySince(c1)
	r.UserBusy, r.KernelBusy = -1, -1
	if u := c2.userShareSince(c1); u >= 0 {
		r.UserBusy, r.KernelBusy = r.Busy*u, r.Busy*(1-u)
	}
	if r.Busy > 0 {
		r.PerCPU = r.RecvPPS / r.Busy
	}
	if cfg.rr {
		r.ReqPerS, r.P99us, r.P999us, r.Lost = lr.ReqPerS, lr.P99us, lr.P999us, lr.Lost
		if r.ReqPerS > 0 {
			r.CPUusReq = r.Busy * 1e6 / r.ReqPerS
		}
	}
	return r
}

// waitFile waits until path exists, the process exits, or limit passes.
func waitFile(ctx context.Context, path string, exited chan error, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("exited (%v)", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %v", path, limit)
		}
	}
}

func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// cpuTicks is the idle time (idle and iowait) of some CPUs, read at a
// moment, and the user and kernel time they counted: busySince makes their
// busy time of two readings, userShareSince splits it.
type cpuTicks struct {
	idle uint64 // idle and iowait, in clock ticks
	user uint64 // user and nice
	kern uint64 // system, irq and softirq
	at   time.Time
	n    int // CPUs summed
}

// userHZ is the unit of /proc/stat's times (USER_HZ, 100 on every
// architecture Linux exports it for).
const userHZ = 100

// busySince is how many of c's CPUs were busy, on average, since p: the
// time between the two readings less the idle time that passed. With
// NO_HZ the kernel measures idle time exactly, while user, system and
// softirq time are sampled at the tick; at a fifth busy, 6 s of 250 Hz
// ticks count busy time to ±6%, the idle time to 0.2%.
func (c cpuTicks) busySince(p cpuTicks) float64 {
	wall := c.at.Sub(p.at).Seconds() * userHZ
	if wall <= 0 {
		return 0
	}
	idle := float64(c.idle-p.idle) / wall
	return min(max(float64(c.n)-idle, 0), float64(c.n))
}

// userShareSince is the share of user ticks in the user and kernel ticks
// c's CPUs counted since p, or -1 if they counted none. Both are sampled
// at the tick (steal time is in neither), so the share is what splits the
// exactly measured busy time.
func (c cpuTicks) userShareSince(p cpuTicks) float64 {
	u, k := c.user-p.user, c.kern-p.kern
	if c.user < p.user || c.kern < p.kern || u+k == 0 {
		return -1
	}
	return float64(u) / float64(u+k)
}

// readCPUTicks sums the idle and iowait, user and nice, and system, irq
// and softirq times of /proc/stat's lines of the given CPUs.
func readCPUTicks(cpus cpuSet) (cpuTicks, error) {
	now := time.Now()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}, err
	}
	t, err := parseCPUTicks(string(b), cpus)
	t.at = now
	return t, err
}

// parseCPUTicks sums the times readCPUTicks reads from /proc/stat's text.
func parseCPUTicks(stat string, cpus cpuSet) (cpuTicks, error) {
	var t cpuTicks
	found := 0
	for line := range strings.Lines(stat) {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil || !slices.Contains(cpus, n) {
			continue
		}
		found++
		// cpuN user nice system idle iowait irq softirq steal ...
		for i, sum := range []*uint64{1: &t.user, 2: &t.user, 3: &t.kern, 4: &t.idle, 5: &t.idle, 6: &t.kern, 7: &t.kern} {
			if sum == nil {
				continue
			}
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return cpuTicks{}, fmt.Errorf("/proc/stat: %w", err)
			}
			*sum += v
		}
	}
	if found != len(cpus) {
		return t, fmt.Errorf("/proc/stat: found %d of CPUs %s", found, cpus)
	}
	t.n = found
	return t, nil
}

// udpDrops reads the kernel's count of datagrams dropped for full receive
// buffers (Udp RcvbufErrors in /proc/net/snmp).
func udpDrops() (uint64, error) {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0, err
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "RcvbufErrors" && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
	}
	return 0, errors.New("/proc/net/snmp: no Udp RcvbufErrors")
}

// steerLoopback sets lo's receive packet steering to cpus and returns a
// function that restores what was there.
func steerLoopback(cpus cpuSet) (func(), error) {
	const path = "/sys/class/net/lo/queues/rx-0/rps_cpus"
	old, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var mask uint64
	for _, c := range cpus {
		if c >= 64 {
			return nil, fmt.Errorf("CPU %d: only CPUs 0-63 are steered", c)
		}
		mask |= 1 << c
	}
	if err := os.WriteFile(path, []byte(strconv.FormatUint(mask, 16)), 0); err != nil {
		return nil, err
	}
	return func() { os.WriteFile(path, bytes.TrimSpace(old), 0) }, nil
}

// writeUDPReport writes the medians per server and size, with each
// server's ratio to std: on datagrams per busy CPU-second one way, on busy
// CPU per request for request/response.
func writeUDPReport(w io.Writer, cfg udpConfig, runs []udpRun) {
	if cfg.rr {
		fmt.Fprintf(w, "\n## UDP, request/response (%s)\n\n", cfg.commandLine)
		client := "ringload -proto udp-rr, paced from a thread of its own"
		if cfg.cClient {
			client = "bench/c/udp_rr.c, one C thread"
		}
		fmt.Fprintf(w, "%d clients (%s), each awaiting its echo, %.0f requests/s offered over all, on CPUs %s; servers on CPUs %s; lo's RPS: off (each side's softirqs run where its peer sends). %d repeats, medians, min-max in brackets.\n\n",
			cfg.flows, client, cfg.rate, cfg.loadCPUs, cfg.serverCPUs, cfg.repeats)
	} else {
		fmt.Fprintf(w, "\n## UDP, one way (%s)\n\n", cfg.commandLine)
		steer := "off (the receive softirqs run on the sender's CPUs)"
		if cfg.rps {
			steer = "to CPUs " + cfg.rpsCPUs.String()
		}
		fmt.Fprintf(w, "%d flows from ringload -proto udp (sendmmsg, GSO) on CPUs %s; servers on CPUs %s; lo's RPS %s; the busy figure counts the server CPUs only; server sockets' SO_RCVBUF %d. %d repeats, medians, min-max in brackets.\n\n",
			cfg.flows, cfg.loadCPUs, cfg.serverCPUs, steer, cfg.rcvbuf, cfg.repeats)
	}
	offered := cfg.offered
	if cfg.rr || len(offered) == 0 {
		offered = []float64{cfg.rate}
	}
	for _, size := range cfg.sizes {
		for _, rate := range offered {
			if cfg.rr {
				fmt.Fprintf(w, "### %d-byte datagrams\n\n", size)
			} else {
				fmt.Fprintf(w, "### %d-byte datagrams, %s\n\n", size, offeredText(rate))
			}
			tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
			per := func(srv string) []udpRun {
				var rs []udpRun
				for _, r := range runs {
					if r.Server == srv && r.Size == size && (cfg.rr || r.Offered == rate) && r.Err == "" {
						rs = append(rs, r)
					}
				}
				return rs
			}
			f := func(rs []udpRun, get func(udpRun) float64, prec int) string {
				xs := valuesOf(rs, get)
				return fmt.Sprintf("%.*f [%.*f-%.*f]", prec, benchfmt.Median(xs), prec, slices.Min(xs), prec, slices.Max(xs))
			}
			key := func(r udpRun) float64 { return r.PerCPU }
			if cfg.rr {
				key = func(r udpRun) float64 { return r.CPUusReq }
				fmt.Fprintln(tw, "| server\t requests/s\t p99 µs\t p99.9 µs\t server CPUs busy\t CPU-µs per request\t user / kernel µs\t vs std\t lost\t")
				fmt.Fprintln(tw, "|---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
			} else {
				fmt.Fprintln(tw, "| server\t received/s\t sent/s\t server CPUs busy\t received per busy CPU-s\t user / kernel ns per datagram\t vs std\t drops/s\t")
				fmt.Fprintln(tw, "|---\t---:\t---:\t---:\t---:\t---:\t---:\t---:\t")
			}
			stdKey := medianOf(per("std"), key)
			for _, srv := range cfg.servers {
				rs := per(srv)
				if len(rs) == 0 {
					fmt.Fprintf(tw, "| %s\t failed\t\t\t\t\t\t\t%s\n", srv, map[bool]string{true: "\t"}[cfg.rr])
					continue
				}
				vs := "-"
				if stdKey > 0 {
					vs = fmt.Sprintf("%.2f", medianOf(rs, key)/stdKey)
				}
				if cfg.rr {
					fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t\n", srv,
						f(rs, func(r udpRun) float64 { return r.ReqPerS }, 0), f(rs, func(r udpRun) float64 { return r.P99us }, 0),
						f(rs, func(r udpRun) float64 { return r.P999us }, 0), f(rs, func(r udpRun) float64 { return r.Busy }, 2),
						f(rs, key, 2), udpSplit(rs, 1e6, func(r udpRun) float64 { return r.ReqPerS }), vs,
						f(rs, func(r udpRun) float64 { return float64(r.Lost) }, 0))
					continue
				}
				fmt.Fprintf(tw, "| %s\t %s\t %s\t %s\t %s\t %s\t %s\t %s\t\n", srv,
					f(rs, func(r udpRun) float64 { return r.RecvPPS }, 0), f(rs, func(r udpRun) float64 { return r.SentPPS }, 0),
					f(rs, func(r udpRun) float64 { return r.Busy }, 2), f(rs, key, 0),
					udpSplit(rs, 1e9, func(r udpRun) float64 { return r.RecvPPS }), vs,
					f(rs, func(r udpRun) float64 { return r.DropPPS }, 0))
			}
			tw.Flush()
			fmt.Fprintln(w)
			writeUDPPaired(w, cfg, runs, size, rate)
		}
	}
}

// udpSplit is the median user and kernel CPU time per unit of work (per
// request, or per datagram received) of the runs that counted both, in
// the unit scale gives (1e6: µs, 1e9: ns), or "-" where none did.
func udpSplit(rs []udpRun, scale float64, per func(udpRun) float64) string {
	var us, ks []float64
	for _, r := range rs {
		if n := per(r); r.UserBusy >= 0 && r.KernelBusy >= 0 && n > 0 {
			us = append(us, r.UserBusy*scale/n)
			ks = append(ks, r.KernelBusy*scale/n)
		}
	}
	if len(us) == 0 {
		return "-"
	}
	prec := 2
	if scale > 1e6 {
		prec = 0
	}
	return fmt.Sprintf("%.*f / %.*f", prec, benchfmt.Median(us), prec, benchfmt.Median(ks))
}

// writeUDPOutputs writes the report (to cfg.stdout and name.md in cfg.out)
// and, unless cfg.noCharts, a chart per datagram size and offered rate.
func writeUDPOutputs(cfg udpConfig, runs []udpRun, name string, offered []float64) error {
	var md bytes.Buffer
	writeUDPReport(&md, cfg, runs)
	for _, size := range cfg.sizes {
		for _, rate := range offered {
			if cfg.noCharts {
				break
			}
			var svg bytes.Buffer
			writeUDPChart(&svg, cfg, runs, size, rate)
			chart := fmt.Sprintf("%s-%d-%.0f.svg", name, size, rate)
			if err := os.WriteFile(filepath.Join(cfg.out, chart), svg.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(&md, "![%s, %d-byte datagrams, %s](%s)\n\n", name, size, offeredText(rate), chart)
		}
	}
	io.Copy(cfg.stdout, bytes.NewReader(md.Bytes()))
	return os.WriteFile(filepath.Join(cfg.out, name+".md"), md.Bytes(), 0o644)
}

// udpPaired is one figure of the paired comparison with std: its name
// and its value in a run.
type udpPaired struct {
	name string
	get  func(udpRun) float64
}

// writeUDPPaired writes each server's figures over std's, paired within
// each repeat (a repeat runs every server on the same load, one after the
// other, so a ratio taken within it cancels the machine's drifts that the
// medians only dampen): the median of the per-repeat ratios and its 95%
// bootstrap interval. Request/response compares busy CPU per request,
// p99 and p99.9 (below 1: less than std's); one way, datagrams received
// per busy CPU-second (above 1: more). It writes nothing without std's
// runs.
func writeUDPPaired(w io.Writer, cfg udpConfig, runs []udpRun, size int, rate float64) {
	figures := []udpPaired{{"received per busy CPU-s", func(r udpRun) float64 { return r.PerCPU }}}
	how := "above 1: more datagrams per CPU-second than std"
	if cfg.rr {
		figures = []udpPaired{
			{"CPU-µs per request", func(r udpRun) float64 { return r.CPUusReq }},
			{"p99", func(r udpRun) float64 { return r.P99us }},
			{"p99.9", func(r udpRun) float64 { return r.P999us }},
		}
		how = "below 1: less CPU, or a shorter tail, than std's"
	}
	var rows []string
	for _, srv := range cfg.servers {
		if srv == "std" {
			continue
		}
		row := "| " + srv
		found := false
		for _, f := range figures {
			rs := udpPairedRatios(runs, cfg.rr, size, rate, srv, "std", f.get)
			if len(rs) == 0 {
				row += " | -"
				continue
			}
			found = true
			lo, hi := benchfmt.Bootstrap(rs)
			row += fmt.Sprintf(" | %.3f (%.3f-%.3f, n=%d)", benchfmt.Median(rs), lo, hi, len(rs))
		}
		if found {
			rows = append(rows, row+" |")
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "Each server paired with std within each repeat: the median of the per-repeat ratios over std's and its 95%% bootstrap interval (%s):\n\n| server", how)
	for _, f := range figures {
		fmt.Fprintf(w, " | %s", f.name)
	}
	fmt.Fprintf(w, " |\n|---%s\n", strings.Repeat("|---", len(figures))+"|")
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	fmt.Fprintln(w)
}

// udpPairedRatios returns, for each repeat in which both a and b ran
// size (at rate, one way) without error, get of a's run over get of b's,
// sorted.
func udpPairedRatios(runs []udpRun, rr bool, size int, rate float64, a, b string, get func(udpRun) float64) []float64 {
	perRepeat := map[int][2]float64{}
	for _, r := range runs {
		if r.Size != size || (!rr && r.Offered != rate) || r.Err != "" || (r.Server != a && r.Server != b) {
			continue
		}
		v := perRepeat[r.Repeat]
		if r.Server == a {
			v[0] = get(r)
		} else {
			v[1] = get(r)
		}
		perRepeat[r.Repeat] = v
	}
	return ratios(perRepeat)
}

// offeredText names an offered rate.
func offeredText(rate float64) string {
	if rate == 0 {
		return "unpaced"
	}
	return fmt.Sprintf("%.0f/s offered", rate)
}

func valuesOf(rs []udpRun, get func(udpRun) float64) []float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = get(r)
	}
	return xs
}

func medianOf(rs []udpRun, get func(udpRun) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	return benchfmt.Median(valuesOf(rs, get))
}

// writeUDPChart draws, as SVG, one bar per server: the median of the
// scenario's key figure (datagrams per busy CPU-second one way, busy
// CPU-µs per request for request/response) for one datagram size, with
// the repeats' range as a whisker.
func writeUDPChart(w io.Writer, cfg udpConfig, runs []udpRun, size int, rate float64) {
	type bar struct {
		name        string
		med, lo, hi float64
	}
	key, unit := func(r udpRun) float64 { return r.PerCPU }, "datagrams received per busy server CPU-second"
	if cfg.rr {
		key, unit = func(r udpRun) float64 { return r.CPUusReq }, "busy server CPU-µs per request (lower is better)"
	}
	var bars []bar
	top := 0.0
	for _, srv := range cfg.servers {
		var xs []float64
		for _, r := range runs {
			if r.Server == srv && r.Size == size && (cfg.rr || r.Offered == rate) && r.Err == "" {
				xs = append(xs, key(r))
			}
		}
		if len(xs) == 0 {
			continue
		}
		b := bar{srv, benchfmt.Median(xs), slices.Min(xs), slices.Max(xs)}
		bars = append(bars, b)
		top = max(top, b.hi)
	}
	const width, rowH, left, right = 720, 28, 120, 90
	height := 50 + rowH*len(bars)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	title := fmt.Sprintf("%d-byte datagrams, %s", size, offeredText(rate))
	if cfg.rr {
		title = fmt.Sprintf("%d-byte requests, %.0f/s", size, rate)
	}
	fmt.Fprintf(w, `<text x="10" y="18" font-size="13">%s: %s</text>`+"\n", title, unit)
	if top <= 0 {
		top = 1
	}
	scale := float64(width-left-right) / top
	for i, b := range bars {
		y := 32 + i*rowH
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-6, y+15, b.name)
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", left, y+3, b.med*scale, rowH-8, udpBarColor(b.name))
		fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="black"/>`+"\n", left+b.lo*scale, left+b.hi*scale, y+rowH/2, y+rowH/2)
		fmt.Fprintf(w, `<text x="%.1f" y="%d">%s</text>`+"\n", left+b.hi*scale+6, y+15, udpFigure(b.med))
	}
	fmt.Fprintln(w, "</svg>")
}

func udpBarColor(server string) string {
	if strings.HasPrefix(server, "ringpoll") {
		return "#2f6fb0"
	}
	return "#9a9a9a"
}

// udpFigure prints a bar's value to three significant figures.
func udpFigure(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}

// parseRates reads a comma-separated list of rates per second.
func parseRates(s string) ([]float64, error) {
	var rs []float64
	for _, f := range splitList(s) {
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || r < 0 {
			return nil, fmt.Errorf("%q: want a rate per second, 0 or more", f)
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return nil, errors.New("no rate")
	}
	return rs, nil
}
