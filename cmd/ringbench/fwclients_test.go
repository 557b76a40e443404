//go:build linux

package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func readSample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "frameworks", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// near reports whether got is want within a millionth (the parsers scale
// units by floating point).
func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-6*math.Abs(want)
}

func checkResult(t *testing.T, got, want clientResult) {
	t.Helper()
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"Requests", got.Requests, want.Requests}, {"Seconds", got.Seconds, want.Seconds},
		{"ReqPerS", got.ReqPerS, want.ReqPerS}, {"Bytes", got.Bytes, want.Bytes},
		{"P50us", got.P50us, want.P50us}, {"P99us", got.P99us, want.P99us}, {"P999us", got.P999us, want.P999us},
	} {
		if !near(f.got, f.want) {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
	if got.Errors != want.Errors || got.ErrorText != want.ErrorText {
		t.Errorf("errors %d (%q), want %d (%q)", got.Errors, got.ErrorText, want.Errors, want.ErrorText)
	}
}

// TestParseWrk reads wrk 4.1's reports: with our script's p99.9 and exact
// bytes, without them (the bytes then from the rounded "read" figure),
// with non-2xx answers and with socket errors.
func TestParseWrk(t *testing.T) {
	for _, tc := range []struct {
		file string
		want clientResult
	}{
		{"wrk-hello.txt", clientResult{Requests: 70580, Seconds: 1.10, ReqPerS: 64151.80, Bytes: 9175400,
			P50us: 83, P99us: 24300, P999us: 37857}},
		{"wrk-file.txt", clientResult{Requests: 2718, Seconds: 1.10, ReqPerS: 2471.16, Bytes: 2850543270,
			P50us: 624, P99us: 3110, P999us: 6650}},
		{"wrk-non2xx.txt", clientResult{Requests: 54138, Seconds: 1.10, ReqPerS: 49224.24, Bytes: 9.09 * 1024 * 1024,
			P50us: 26, P99us: 1870, P999us: -1, Errors: 54138, ErrorText: "54138 non-2xx/3xx"}},
		{"wrk-errors.txt", clientResult{Requests: 49017, Seconds: 2.00, ReqPerS: 24488.13, Bytes: 6.08 * 1024 * 1024,
			P50us: 162, P99us: 23000, P999us: 41804, Errors: 20 + 204879, ErrorText: "20 read, 204879 write"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := parseWrk(readSample(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, got, tc.want)
		})
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused\n"); err == nil {
		t.Error("parseWrk of a failed run succeeded")
	}
}

// TestParseH2load reads h2load 1.52's reports, one clean and one whose
// requests all got 404.
func TestParseH2load(t *testing.T) {
	for _, tc := range []struct {
		file string
		want clientResult
	}{
		{"h2load.txt", clientResult{Requests: 29202, Seconds: 1, ReqPerS: 29202, Bytes: 1024005, P50us: -1, P99us: -1, P999us: -1}},
		{"h2load-non2xx.txt", clientResult{Requests: 34358, Seconds: 1, ReqPerS: 34358, Bytes: 1443668, P50us: -1, P99us: -1, P999us: -1,
			Errors: 34358, ErrorText: "34358 failed (0 errored), 0 timed out; status codes: 0 2xx, 0 3xx, 34358 4xx, 0 5xx"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := parseH2load(readSample(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, got, tc.want)
		})
	}
	if _, err := parseH2load("starting benchmark...\nNo protocol negotiated. Aborted\n"); err == nil {
		t.Error("parseH2load of a failed run succeeded")
	}
}

// TestParseH2loadLog takes nearest-rank percentiles of the durations in
// h2load's per-request log.
func TestParseH2loadLog(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "frameworks", "h2load-log.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p50, p99, p999, err := parseH2loadLog(f)
	if err != nil {
		t.Fatal(err)
	}
	// Durations 80, 95, 120, 3731, 4000.
	if p50 != 120 || p99 != 4000 || p999 != 4000 {
		t.Errorf("p50, p99, p99.9 = %v, %v, %v; want 120, 4000, 4000", p50, p99, p999)
	}
	for _, bad := range []string{"", "1\t200\n", "1\t200\tx\n"} {
		if _, _, _, err := parseH2loadLog(strings.NewReader(bad)); err == nil {
			t.Errorf("parseH2loadLog(%q) succeeded", bad)
		}
	}
}

// TestQuantile: nearest rank, over 1000 values 1..1000.
func TestQuantile(t *testing.T) {
	var xs []float64
	for i := 1; i <= 1000; i++ {
		xs = append(xs, float64(i))
	}
	for _, tc := range []struct{ q, want float64 }{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0, 1}} {
		if got := quantile(xs, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
}

// TestParseGRPC reads grpc-go's benchmark client's report; its latencies
// are Go durations and it gives no p99.9. A client that died at a failed
// call printed no report.
func TestParseGRPC(t *testing.T) {
	got, err := parseGRPC(readSample(t, "grpc-stream.txt"), 1)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, got, clientResult{Requests: 102018, Seconds: 1, ReqPerS: 102018, Bytes: -1,
		P50us: 126.102, P99us: 1448.249, P999us: -1})
	got, err = parseGRPC("qps: 2500\nLatency: (50/90/99 %ile): 1ms/2ms/3.5ms\n", 4)
	if err != nil || got.Requests != 10000 || got.P99us != 3500 {
		t.Errorf("parseGRPC over 4 s = %+v, %v; want 10000 requests, p99 3500 µs", got, err)
	}
	if _, err := parseGRPC(readSample(t, "grpc-fail.txt"), 1); err == nil {
		t.Error("parseGRPC of a failed run succeeded")
	}
}

// TestParseQuicload reads quicload's reports: 64 B streams, 4 MiB ones,
// and a run whose server died under it (its streams then failed at the
// end of the grace). A run that printed no report fails.
func TestParseQuicload(t *testing.T) {
	for _, tc := range []struct {
		file string
		want clientResult
	}{
		{"quicload-small.txt", clientResult{Requests: 3880, Seconds: 1.098517, ReqPerS: 3532.0, Bytes: 248320,
			P50us: 247153, P99us: 615278, P999us: 746135}},
		{"quicload-bulk.txt", clientResult{Requests: 20, Seconds: 1.081980, ReqPerS: 18.5, Bytes: 83886080,
			P50us: 106610, P99us: 134792, P999us: 134792}},
		{"quicload-errors.txt", clientResult{Requests: 7408, Seconds: 12.001494, ReqPerS: 617.3, Bytes: 474112,
			P50us: 932, P99us: 4819, P999us: 9401, Errors: 8,
			ErrorText: "first: reading the answer after 0 of 64 bytes: Application error 0x1 (local): quicload: streams still busy after the run"}},
	} {
		checkSample(t, "parseQuicload", parseQuicload, tc.file, tc.want)
	}
	checkRefused(t, "parseQuicload", parseQuicload, "quicload: -conns 0: want 1 to 10000\n", "requests: 1\nseconds: x\n")
}

func TestParseDnsperf(t *testing.T) {
	for _, tc := range []struct {
		file string
		want clientResult
	}{
		{"dnsperf.txt", clientResult{Requests: 125028, Seconds: 2.002744, ReqPerS: 62428.348306, Bytes: 55 * 125028,
			P50us: -1, P99us: -1, P999us: -1}},
		{"dnsperf-errors.txt", clientResult{Requests: 1000, Seconds: 1, ReqPerS: 1000, Bytes: 55 * 1000,
			P50us: -1, P99us: -1, P999us: -1, Errors: 20, ErrorText: "10 lost, 7 SERVFAIL, 3 REFUSED"}},
	} {
		checkSample(t, "parseDnsperf", parseDnsperf, tc.file, tc.want)
	}
	checkRefused(t, "parseDnsperf", parseDnsperf, "dnsperf: invalid argument\n", "  Queries completed:    1 (100.00%)\n")
	// The query file asks only what the dns-* servers answer: A records.
	lines := strings.Split(strings.TrimSpace(dnsQueries()), "\n")
	if len(lines) != 100 || lines[0] != "h0.example. A" {
		t.Errorf("dnsQueries: %d lines, first %q", len(lines), lines[0])
	}
}

// checkSample checks what parse, named name, makes of testdata file.
func checkSample(t *testing.T, name string, parse func(string) (clientResult, error), file string, want clientResult) {
	t.Helper()
	t.Run(file, func(t *testing.T) {
		got, err := parse(readSample(t, file))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkResult(t, got, want)
	})
}

// checkRefused checks that parse, named name, refuses each of bad.
func checkRefused(t *testing.T, name string, parse func(string) (clientResult, error), bad ...string) {
	t.Helper()
	for _, b := range bad {
		if _, err := parse(b); err == nil {
			t.Errorf("%s(%q) succeeded", name, b)
		}
	}
}

// TestClientArgv: the clients' command lines, threads never above
// connections, durations in whole seconds.
func TestClientArgv(t *testing.T) {
	for _, tc := range []struct {
		got, want []string
	}{
		{wrkArgv("wrk", 2, 100, 10, "", "/s.lua", "http://A/hello"),
			[]string{"wrk", "-t", "2", "-c", "100", "-d", "10s", "--timeout", "10s", "--latency", "-s", "/s.lua", "http://A/hello"}},
		{wrkArgv("wrk", 2, 100, 10, "Connection: close", "/s.lua", "http://A/hello"),
			[]string{"wrk", "-t", "2", "-c", "100", "-d", "10s", "--timeout", "10s", "--latency", "-H", "Connection: close", "-s", "/s.lua", "http://A/hello"}},
		{wrkArgv("wrk", 4, 2, 1, "", "/s.lua", "http://A/file"),
			[]string{"wrk", "-t", "2", "-c", "2", "-d", "1s", "--timeout", "10s", "--latency", "-s", "/s.lua", "http://A/file"}},
		{h2loadArgv("h2load", 1, 100, 10, 5, "/log", "http://A/hello"),
			[]string{"h2load", "-t", "1", "-c", "100", "-m", "10", "-D", "5", "--log-file", "/log", "http://A/hello"}},
		{grpcArgv("g", "7000", 10, 10, 1, 3, "unary", "n"),
			[]string{"g", "-port", "7000", "-c", "10", "-r", "10", "-w", "0", "-d", "3", "-req", "1", "-resp", "1", "-rpc_type", "unary", "-test_name", "n"}},
		{quicloadArgv("q", "127.0.0.1:9", 100, 10, 64, 3),
			[]string{"q", "-addr", "127.0.0.1:9", "-conns", "100", "-streams", "10", "-size", "64", "-duration", "3s"}},
		{dnsperfArgv("d", "127.0.0.1:53", 2, 10, 10, 3, "/q"),
			[]string{"d", "-s", "127.0.0.1", "-p", "53", "-T", "2", "-c", "10", "-q", "100", "-l", "3", "-t", "2", "-d", "/q"}},
		{dnsperfArgv("d", "127.0.0.1:53", 4, 1, 5, 1, "/q"),
			[]string{"d", "-s", "127.0.0.1", "-p", "53", "-T", "1", "-c", "1", "-q", "5", "-l", "1", "-t", "2", "-d", "/q"}},
	} {
		if !slices.Equal(tc.got, tc.want) {
			t.Errorf("got  %q\nwant %q", tc.got, tc.want)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {200 * time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {10 * time.Second, 10}} {
		if got := wholeSeconds(tc.d); got != tc.want {
			t.Errorf("wholeSeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
