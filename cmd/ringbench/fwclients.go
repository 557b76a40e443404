//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The clients of the -frameworks family, none of them ours but quicload:
// wrk (HTTP/1.1 keep-alive), h2load (HTTP/2 without TLS, prior
// knowledge), grpc-go's benchmark client
// (google.golang.org/grpc/benchmark/client), dnsperf (DNS queries over
// UDP) and, as there is no standard QUIC load tool to install, the bench
// module's quicload (quic-go on std UDP sockets). Each takes its duration in whole seconds; each prints a
// text report that the parsers below read.

// clientResult is what a client reported about one measured run.
type clientResult struct {
	Requests float64 // completed in the window
	Seconds  float64 // the client's window
	ReqPerS  float64
	Bytes    float64 // read by the client, -1 if it does not say
	// Latency percentiles in µs; -1 where the client does not give one.
	P50us, P99us, P999us float64
	// Errors counts failed requests: socket errors and non-2xx answers
	// (wrk), failed requests (h2load), any failed call (the gRPC client
	// exits at the first); ErrorText says what they were.
	Errors    int64
	ErrorText string
	// ClientCPUs is the client process's CPU-seconds over its whole run,
	// user and system (fwRunner.commandCPU); -1 if unknown.
	ClientCPUs float64
}

// wholeSeconds rounds d up to whole seconds, at least one: what the
// clients' duration flags take.
func wholeSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// wrkLua is the script wrk runs at the end of a run: wrk's own report has
// no p99.9 and rounds the bytes read.
const wrkLua = `done = function(summary, latency, requests)
  io.write(string.format("p99.9: %d\n", latency:percentile(99.9)))
  io.write(string.format("bytes: %d\n", summary.bytes))
end
`

// wrkArgv is wrk's command line: threads, connections, whole seconds,
// latency distribution, a request header if any, our script and the URL.
// The timeout is well above any answer's latency here, so a slow answer
// is measured, not dropped.
func wrkArgv(bin string, threads, conns, seconds int, header, script, url string) []string {
	argv := []string{bin, "-t", strconv.Itoa(min(threads, conns)), "-c", strconv.Itoa(conns),
		"-d", strconv.Itoa(seconds) + "s", "--timeout", "10s", "--latency"}
	if header != "" {
		argv = append(argv, "-H", header)
	}
	return append(argv, "-s", script, url)
}

// h2loadArgv is h2load's command line: threads, clients (connections),
// concurrent streams on each, the duration in seconds and a per-request
// log, from which the percentiles are taken (h2load prints none).
func h2loadArgv(bin string, threads, conns, streams, seconds int, logFile, url string) []string {
	return []string{bin, "-t", strconv.Itoa(min(threads, conns)), "-c", strconv.Itoa(conns),
		"-m", strconv.Itoa(streams), "-D", strconv.Itoa(seconds), "--log-file", logFile, url}
}

// grpcArgv is the gRPC benchmark client's command line: it dials
// localhost:port, opens conns connections and runs rpcs calls at a time
// on each, unary or on streams, with size-byte requests and responses.
// testName names the profiles it writes, /tmp/<testName>.cpu and .mem.
func grpcArgv(bin string, port string, conns, rpcs, size, seconds int, rpcType, testName string) []string {
	return []string{bin, "-port", port, "-c", strconv.Itoa(conns), "-r", strconv.Itoa(rpcs),
		"-w", "0", "-d", strconv.Itoa(seconds), "-req", strconv.Itoa(size), "-resp", strconv.Itoa(size),
		"-rpc_type", rpcType, "-test_name", testName}
}

var (
	wrkSummary = regexp.MustCompile(`(?m)^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h), ([\d.]+)([KMGTP]?B) read`)
	wrkSocket  = regexp.MustCompile(`(?m)^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkNon2xx  = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses: (\d+)`)
	wrkRate    = regexp.MustCompile(`(?m)^Requests/sec:\s+([\d.]+)`)
	wrkPct     = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([\d.]+)(us|ms|s|m|h)\s*$`)
	wrkP999    = regexp.MustCompile(`(?m)^p99\.9: (\d+)$`)
	wrkBytes   = regexp.MustCompile(`(?m)^bytes: (\d+)$`)
)

// parseWrk reads wrk's report (run with --latency and wrkLua).
func parseWrk(out string) (clientResult, error) {
	r := clientResult{Bytes: -1, P50us: -1, P99us: -1, P999us: -1, ClientCPUs: -1}
	m := wrkSummary.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("wrk: no \"N requests in T, B read\" line in its output: %s", tail0(out))
	}
	r.Requests, _ = strconv.ParseFloat(m[1], 64)
	r.Seconds = scaleTime(m[2], m[3]) / 1e6
	r.Bytes = scaleBytes(m[4], m[5])
	if m := wrkRate.FindStringSubmatch(out); m != nil {
		r.ReqPerS, _ = strconv.ParseFloat(m[1], 64)
	} else if r.Seconds > 0 {
		r.ReqPerS = r.Requests / r.Seconds
	}
	for _, m := range wrkPct.FindAllStringSubmatch(out, -1) {
		v := scaleTime(m[2], m[3])
		if m[1] == "50" {
			r.P50us = v
		} else {
			r.P99us = v
		}
	}
	if m := wrkP999.FindStringSubmatch(out); m != nil {
		r.P999us, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := wrkBytes.FindStringSubmatch(out); m != nil {
		r.Bytes, _ = strconv.ParseFloat(m[1], 64)
	}
	var what []string
	if m := wrkSocket.FindStringSubmatch(out); m != nil {
		for i, kind := range []string{"connect", "read", "write", "timeout"} {
			n, _ := strconv.ParseInt(m[i+1], 10, 64)
			if n > 0 {
				r.Errors += n
				what = append(what, fmt.Sprintf("%d %s", n, kind))
			}
		}
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.Errors += n
		what = append(what, fmt.Sprintf("%d non-2xx/3xx", n))
	}
	r.ErrorText = strings.Join(what, ", ")
	return r, nil
}

// scaleTime converts a wrk or h2load time to µs.
func scaleTime(v, unit string) float64 {
	f, _ := strconv.ParseFloat(v, 64)
	switch unit {
	case "ms":
		return f * 1e3
	case "s":
		return f * 1e6
	case "m":
		return f * 60e6
	case "h":
		return f * 3600e6
	}
	return f
}

// scaleBytes converts wrk's binary units (1 KB = 1024 B) to bytes.
func scaleBytes(v, unit string) float64 {
	f, _ := strconv.ParseFloat(v, 64)
	i := strings.Index("BKMGTP", unit[:1])
	return f * math.Pow(1024, float64(max(i, 0)))
}

var (
	h2Finished = regexp.MustCompile(`(?m)^finished in ([\d.]+)(us|ms|s|m|h), ([\d.]+) req/s`)
	h2Requests = regexp.MustCompile(`(?m)^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2Status   = regexp.MustCompile(`(?m)^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
	h2Traffic  = regexp.MustCompile(`(?m)^traffic: \S+ \((\d+)\) total`)
)

// parseH2load reads h2load's report. Requests are those done; failed
// ones (not 2xx or 3xx, or errored) and timeouts are errors. h2load
// prints no percentiles: they come from its log (parseH2loadLog).
func parseH2load(out string) (clientResult, error) {
	r := clientResult{Bytes: -1, P50us: -1, P99us: -1, P999us: -1, ClientCPUs: -1}
	f := h2Finished.FindStringSubmatch(out)
	q := h2Requests.FindStringSubmatch(out)
	if f == nil || q == nil {
		return r, fmt.Errorf("h2load: no \"finished in\" and \"requests:\" lines in its output: %s", tail0(out))
	}
	r.Seconds = scaleTime(f[1], f[2]) / 1e6
	r.ReqPerS, _ = strconv.ParseFloat(f[3], 64)
	n := make([]int64, 7)
	for i := range n {
		n[i], _ = strconv.ParseInt(q[i+1], 10, 64)
	}
	r.Requests = float64(n[2])
	failed, errored, timeout := n[4], n[5], n[6]
	r.Errors = failed + timeout
	if r.Errors > 0 {
		r.ErrorText = fmt.Sprintf("%d failed (%d errored), %d timed out", failed, errored, timeout)
		if s := h2Status.FindStringSubmatch(out); s != nil {
			r.ErrorText += fmt.Sprintf("; status codes: %s 2xx, %s 3xx, %s 4xx, %s 5xx", s[1], s[2], s[3], s[4])
		}
	}
	if t := h2Traffic.FindStringSubmatch(out); t != nil {
		r.Bytes, _ = strconv.ParseFloat(t[1], 64)
	}
	return r, nil
}

// parseH2loadLog reads h2load's per-request log (start µs, status, µs to
// the end of the response, tab-separated) and returns the p50, p99 and
// p99.9 of the durations.
func parseH2loadLog(r io.Reader) (p50, p99, p999 float64, err error) {
	var us []float64
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 3 {
			return 0, 0, 0, fmt.Errorf("h2load log line %d: %q: want start, status and duration", n, sc.Text())
		}
		d, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("h2load log line %d: %v", n, err)
		}
		us = append(us, d)
	}
	if err := sc.Err(); err != nil {
		return 0, 0, 0, err
	}
	if len(us) == 0 {
		return 0, 0, 0, errors.New("h2load log: no requests")
	}
	slices.Sort(us)
	return quantile(us, 0.5), quantile(us, 0.99), quantile(us, 0.999), nil
}

// quantile returns the q quantile of sorted xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

var (
	grpcQPS     = regexp.MustCompile(`(?m)^qps: ([\d.e+]+)`)
	grpcLatency = regexp.MustCompile(`(?m)^Latency: \(50/90/99 %ile\): (\S+)/(\S+)/(\S+)`)
)

// parseGRPC reads the gRPC benchmark client's report: qps over the
// window, and p50/p90/p99 as Go durations. It has no p99.9. The client
// exits at the first failed call, so a report means none failed.
func parseGRPC(out string, seconds int) (clientResult, error) {
	r := clientResult{Bytes: -1, P50us: -1, P99us: -1, P999us: -1, ClientCPUs: -1, Seconds: float64(seconds)}
	q := grpcQPS.FindStringSubmatch(out)
	l := grpcLatency.FindStringSubmatch(out)
	if q == nil || l == nil {
		return r, fmt.Errorf("gRPC client: no \"qps:\" and \"Latency:\" lines in its output: %s", tail0(out))
	}
	r.ReqPerS, _ = strconv.ParseFloat(q[1], 64)
	r.Requests = r.ReqPerS * r.Seconds
	for i, dst := range []*float64{&r.P50us, &r.P99us} {
		d, err := time.ParseDuration(l[1+2*i])
		if err != nil {
			return r, fmt.Errorf("gRPC client: latency %q: %v", l[1+2*i], err)
		}
		*dst = float64(d) / 1e3
	}
	return r, nil
}

// quicloadArgv is quicload's command line: the server's UDP address,
// connections, streams at a time on each, the bytes each stream asks
// for, whole seconds.
func quicloadArgv(bin, addr string, conns, streams, size, seconds int) []string {
	return []string{bin, "-addr", addr, "-conns", strconv.Itoa(conns), "-streams", strconv.Itoa(streams),
		"-size", strconv.Itoa(size), "-duration", strconv.Itoa(seconds) + "s"}
}

var quicloadLine = regexp.MustCompile(`(?m)^(requests|seconds|bytes|req_per_s|p50_us|p99_us|p999_us|errors|first_error): (.*)$`)

// parseQuicload reads quicload's report, "key: value" lines: requests
// answered in full, seconds, bytes, req_per_s, p50_us, p99_us, p999_us
// (-1 without any), errors and, with errors, first_error.
func parseQuicload(out string) (clientResult, error) {
	r := clientResult{Bytes: -1, P50us: -1, P99us: -1, P999us: -1, ClientCPUs: -1}
	kv := map[string]string{}
	for _, m := range quicloadLine.FindAllStringSubmatch(out, -1) {
		kv[m[1]] = strings.TrimSpace(m[2])
	}
	for _, f := range []struct {
		key string
		dst *float64
	}{{"requests", &r.Requests}, {"seconds", &r.Seconds}, {"bytes", &r.Bytes}, {"req_per_s", &r.ReqPerS},
		{"p50_us", &r.P50us}, {"p99_us", &r.P99us}, {"p999_us", &r.P999us}} {
		v, ok := kv[f.key]
		if !ok {
			return r, fmt.Errorf("quicload: no %q line in its output: %s", f.key, tail0(out))
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return r, fmt.Errorf("quicload: %s: %v", f.key, err)
		}
		*f.dst = x
	}
	n, err := strconv.ParseInt(kv["errors"], 10, 64)
	if err != nil {
		return r, fmt.Errorf("quicload: errors %q: %v", kv["errors"], err)
	}
	r.Errors, r.ErrorText = n, kv["first_error"]
	if n > 0 {
		r.ErrorText = "first: " + r.ErrorText
	}
	return r, nil
}

// dnsQueries is dnsperf's query file: A queries for names the dns-*
// servers answer (every A query gets an answer), run through in a loop.
func dnsQueries() string {
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "h%d.example. A\n", i)
	}
	return b.String()
}

// dnsperfArgv is dnsperf's command line: the server, its threads, clients
// (a UDP socket each), queries outstanding (depth per client), whole
// seconds, the query file, and a timeout well above any answer's latency
// here (a lost query is waited for that long at the end of the run).
func dnsperfArgv(bin, addr string, threads, clients, depth, seconds int, queries string) []string {
	host, port, _ := strings.Cut(addr, ":")
	return []string{bin, "-s", host, "-p", port, "-T", strconv.Itoa(min(threads, clients)), "-c", strconv.Itoa(clients),
		"-q", strconv.Itoa(clients * depth), "-l", strconv.Itoa(seconds), "-t", "2", "-d", queries}
}

var (
	dnsCompleted = regexp.MustCompile(`(?m)^\s*Queries completed:\s+(\d+)`)
	dnsLost      = regexp.MustCompile(`(?m)^\s*Queries lost:\s+(\d+)`)
	dnsRunTime   = regexp.MustCompile(`(?m)^\s*Run time \(s\):\s+([\d.]+)`)
	dnsRate      = regexp.MustCompile(`(?m)^\s*Queries per second:\s+([\d.]+)`)
	dnsCodes     = regexp.MustCompile(`(?m)^\s*Response codes:\s+(.*)$`)
	dnsCode      = regexp.MustCompile(`([A-Z]+) (\d+) \(`)
	dnsSize      = regexp.MustCompile(`(?m)^\s*Average packet size:\s+request \d+, response (\d+)`)
)

// parseDnsperf reads dnsperf's report. Requests are the queries answered;
// lost ones and answers other than NOERROR are errors. dnsperf prints an
// average latency and no percentiles, so those stay unknown; bytes are
// the answers' average size times their number.
func parseDnsperf(out string) (clientResult, error) {
	r := clientResult{Bytes: -1, P50us: -1, P99us: -1, P999us: -1, ClientCPUs: -1}
	c, t := dnsCompleted.FindStringSubmatch(out), dnsRunTime.FindStringSubmatch(out)
	if c == nil || t == nil {
		return r, fmt.Errorf("dnsperf: no \"Queries completed:\" and \"Run time (s):\" lines in its output: %s", tail0(out))
	}
	r.Requests, _ = strconv.ParseFloat(c[1], 64)
	r.Seconds, _ = strconv.ParseFloat(t[1], 64)
	if m := dnsRate.FindStringSubmatch(out); m != nil {
		r.ReqPerS, _ = strconv.ParseFloat(m[1], 64)
	} else if r.Seconds > 0 {
		r.ReqPerS = r.Requests / r.Seconds
	}
	if m := dnsSize.FindStringSubmatch(out); m != nil {
		size, _ := strconv.ParseFloat(m[1], 64)
		r.Bytes = size * r.Requests
	}
	var what []string
	if m := dnsLost.FindStringSubmatch(out); m != nil {
		if n, _ := strconv.ParseInt(m[1], 10, 64); n > 0 {
			r.Errors += n
			what = append(what, fmt.Sprintf("%d lost", n))
		}
	}
	if m := dnsCodes.FindStringSubmatch(out); m != nil {
		for _, code := range dnsCode.FindAllStringSubmatch(m[1], -1) {
			if n, _ := strconv.ParseInt(code[2], 10, 64); code[1] != "NOERROR" && n > 0 {
				r.Errors += n
				what = append(what, fmt.Sprintf("%d %s", n, code[1]))
			}
		}
	}
	r.ErrorText = strings.Join(what, ", ")
	return r, nil
}
