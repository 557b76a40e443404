//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringpoll/ringpoll"
)

// TestSmokeKV runs the key-value scenario end to end on a 1 MiB data
// file: ringbench makes the file, builds ringkv and ringload, and loads
// std and a ringpoll server with gets and with puts; every reply checks.
func TestSmokeKV(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs servers")
	}
	servers := "std,osfile"
	if ringpoll.UringStatus() == nil {
		servers += ",ring,sendfile"
	}
	dir, out := t.TempDir(), t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"-kv", "-kv-servers", servers, "-kv-conns", "3", "-kv-writes", "0,50",
		"-kv-outstanding", "2", "-kv-file-size", "1MiB", "-kv-dir", dir,
		"-repeats", "1", "-warmup", "50ms", "-duration", "200ms", "-out", out}, &stdout, &stderr)
	if code != 0 {
		if strings.Contains(stderr.String(), "invalid argument") {
			t.Skipf("O_DIRECT in %s: %s", dir, stderr.String())
		}
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	f, err := os.Open(filepath.Join(out, "kv.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r kvRun
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Err != "" || r.ReqPerS <= 0 || r.PerCPU <= 0 || r.ThreadsMax == 0 || r.Errors != 0 {
			t.Errorf("run %+v", r)
		}
		n++
	}
	if want := 2*strings.Count(servers, ",") + 2; n != want {
		t.Errorf("kv.jsonl has %d runs, want %d", n, want)
	}
	md, err := os.ReadFile(filepath.Join(out, "kv.md"))
	if err != nil || !bytes.Contains(md, []byte("### 50% puts")) || !bytes.Contains(md, []byte("| std")) {
		t.Errorf("kv.md (%v):\n%s", err, md)
	}
	// A second run reuses the data file.
	stderr.Reset()
	if code := run([]string{"-kv", "-kv-servers", "std", "-kv-conns", "1", "-kv-writes", "0", "-kv-file-size", "1MiB", "-kv-dir", dir,
		"-repeats", "1", "-warmup", "0s", "-duration", "100ms", "-out", out}, io.Discard, &stderr); code != 0 || !strings.Contains(stderr.String(), "reusing") {
		t.Errorf("second run: exit %d, stderr:\n%s", code, stderr.String())
	}
}

// TestKVSkipsSmallDisk: a data file larger than the free space skips the
// scenario with the reason, and exits 0.
func TestKVSkipsSmallDisk(t *testing.T) {
	var stderr bytes.Buffer
	code := run([]string{"-kv", "-kv-file-size", "1000000GiB", "-kv-dir", t.TempDir(), "-out", t.TempDir()}, io.Discard, &stderr)
	if code != 0 || !strings.Contains(stderr.String(), "skipping -kv") || !strings.Contains(stderr.String(), "free") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
}

// TestParseKV: sizes with units, and bad flags with a clear error.
func TestParseKV(t *testing.T) {
	for s, want := range map[string]int64{"2GiB": 2 << 30, "64MiB": 64 << 20, "4KiB": 4096, "1048576": 1 << 20} {
		if n, err := parseSize(s); err != nil || n != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", s, n, err, want)
		}
	}
	for _, bad := range [][4]string{
		{"nope", "100", "0", "1GiB"},
		{"ring", "0", "0", "1GiB"},
		{"ring", "100", "101", "1GiB"},
		{"ring", "100", "0", "12 bytes"},
		{"ring", "100", "0", "1KiB"},
	} {
		if _, err := parseKV(bad[0], bad[1], bad[2], bad[3]); err == nil {
			t.Errorf("parseKV%q succeeded", bad)
		}
	}
}
