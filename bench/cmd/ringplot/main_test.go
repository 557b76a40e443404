package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const results = "../../charts/testdata/results.jsonl"

// runMain runs run with args and stdin as standard input. The tests
// using it do not run in parallel: it swaps os.Stdin.
func runMain(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	f, err := os.Open(writeFile(t, t.TempDir(), "stdin", stdin))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = saved }()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// writeFile writes data to the file name in dir and returns its path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "charts")
	code, out, errs := runMain(t, "", "-in", results, "-out", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if errs != "" {
		t.Errorf("stderr %q", errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d paths printed, want 7:\n%s", len(lines), out)
	}
	for _, p := range lines {
		if filepath.Dir(p) != dir || !strings.HasSuffix(p, ".svg") {
			t.Errorf("printed %q, want an SVG file in %s", p, dir)
		}
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	if want := filepath.Join(dir, "echo-pingpong-1024B-max-cpu.svg"); lines[0] != want {
		t.Errorf("first path %q, want %q (sorted)", lines[0], want)
	}
}

func TestRunStdin(t *testing.T) {
	data, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	code, out, errs := runMain(t, string(data), "-in", "-", "-out", dir)
	if code != 0 || strings.Count(out, "\n") != 7 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestRunEmpty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "charts")
	code, out, errs := runMain(t, `{"kind":"run"}`+"\n", "-in", "-", "-out", dir)
	if code != 0 || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if !strings.Contains(errs, "no summaries") {
		t.Errorf("stderr %q, want a note that there was nothing to draw", errs)
	}
}

func TestRunErrors(t *testing.T) {
	tmp := t.TempDir()
	bad := writeFile(t, tmp, "bad.jsonl", "{\"kind\":\"run\"}\n{oops\n")
	notDir := writeFile(t, tmp, "file", "")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unknown flag", []string{"-bogus"}, 2, "bogus"},
		{"no -in", []string{"-out", tmp}, 2, "-in is required"},
		{"no -out", []string{"-in", results}, 2, "-out is required"},
		{"extra argument", []string{"-in", results, "-out", tmp, "more"}, 2, `unexpected argument "more"`},
		{"missing file", []string{"-in", filepath.Join(tmp, "nope.jsonl"), "-out", tmp}, 1, "nope.jsonl"},
		{"malformed line", []string{"-in", bad, "-out", tmp}, 1, "line 2"},
		{"out is a file", []string{"-in", results, "-out", notDir}, 1, "ringplot: "},
		{"-in and -bars", []string{"-in", results, "-bars", bad, "-out", tmp}, 2, "exclude each other"},
		{"-title without -bars", []string{"-in", results, "-title", "x", "-out", tmp}, 2, "-title goes with -bars"},
		{"malformed bars", []string{"-bars", bad, "-out", filepath.Join(tmp, "x.svg")}, 1, "bad.jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runMain(t, "", tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, errs)
			}
			if !strings.Contains(errs, tc.stderr) {
				t.Errorf("stderr %q does not mention %q", errs, tc.stderr)
			}
			if out != "" {
				t.Errorf("stdout %q", out)
			}
		})
	}
}

func TestRunBars(t *testing.T) {
	tmp := t.TempDir()
	in := writeFile(t, tmp, "t.csv", "# a note\nserver,B per conn\nstd,7912\ngnet,582\n")
	out := filepath.Join(tmp, "t.svg")
	code, stdout, errs := runMain(t, "", "-bars", in, "-title", "Memory", "-out", out)
	if code != 0 || stdout != out+"\n" || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, errs)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">Memory<", ">B per conn<", ">std<", ">7912<", ">gnet<", ">582<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestRunHelp(t *testing.T) {
	code, _, errs := runMain(t, "", "-h")
	if code != 0 || !strings.Contains(errs, "usage: ringplot") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}
