package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/bench/internal/quicbench"
)

// serve starts quicbench's server on a std UDP socket for the test.
func serve(t *testing.T) string {
	t.Helper()
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := quicbench.Start(uc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stopping the server: %v", err)
		}
	})
	return uc.LocalAddr().String()
}

// field returns the value of a report's "key: value" line.
func field(t *testing.T, out, key string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + key + `: (\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s line in the report:\n%s", key, out)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

// TestLoad: a short run, every byte verified, reports answered streams
// and their bytes without errors; -requests caps the streams exactly.
func TestLoad(t *testing.T) {
	addr := serve(t)
	for _, tc := range []struct {
		args []string
		max  float64 // the requests the run may make at most; 0: no cap
	}{
		{[]string{"-conns", "2", "-streams", "3", "-size", "70000", "-duration", "300ms", "-verify"}, 0},
		{[]string{"-conns", "3", "-streams", "2", "-size", "64", "-duration", "10s", "-requests", "50"}, 50},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"-addr", addr}, tc.args...), &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit %d: %s%s", tc.args, code, stdout.String(), stderr.String())
		}
		out := stdout.String()
		reqs, size := field(t, out, "requests"), field(t, out, "bytes")/field(t, out, "requests")
		if reqs < 1 || (tc.max > 0 && reqs != tc.max) || field(t, out, "errors") != 0 || strings.Contains(out, "first_error") {
			t.Errorf("%q: report:\n%s", tc.args, out)
		}
		if want, _ := strconv.ParseFloat(tc.args[5], 64); size != want {
			t.Errorf("%q: %v bytes per request, want %v", tc.args, size, want)
		}
		if p50, p999 := field(t, out, "p50_us"), field(t, out, "p999_us"); p50 <= 0 || p999 < p50 {
			t.Errorf("%q: p50 %v, p99.9 %v", tc.args, p50, p999)
		}
		t.Logf("%q:\n%s", tc.args, out)
	}
}

// TestBadFlags: bad command lines exit 2 naming the flag.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-addr", "4433"}, `-addr "4433"`},
		{[]string{"-conns", "0"}, "-conns 0"},
		{[]string{"-streams", "1001"}, "-streams 1001"},
		{[]string{"-size", "-1"}, "-size -1"},
		{[]string{"-duration", "10ms"}, "-duration 10ms"},
		{[]string{"-requests", "0"}, "-requests 0"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-bogus"}, "-bogus"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestQuantile: nearest rank; none gives -1.
func TestQuantile(t *testing.T) {
	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	for _, tc := range []struct{ q, want float64 }{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}} {
		if got := quantile(xs, tc.q); got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); got != -1 {
		t.Errorf("quantile of none = %v, want -1", got)
	}
}
