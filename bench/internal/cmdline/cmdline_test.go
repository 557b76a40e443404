package cmdline

import (
	"bytes"
	"strings"
	"testing"
)

// parseTool parses args as the command line of a tool with one flag, -n,
// as frameserve's run does; it returns the exit code and stderr.
func parseTool(args ...string) (int, string) {
	var stderr bytes.Buffer
	fs := FlagSet("tool", &stderr)
	fs.Int("n", 1, "a count")
	code := -1 // parsed: the tool would go on
	if err := Parse(fs, args); err != nil {
		code = Exit(&stderr, "tool", err, "usage: tool -n N")
	}
	return code, stderr.String()
}

// TestExit: -h exits 0 with the flags' help; a flag error, printed by the
// flag package, exits 2 without a second message; a leftover argument
// exits 2 with the command's name, the argument and the usage line.
func TestExit(t *testing.T) {
	if code, out := parseTool("-n", "3"); code != -1 || out != "" {
		t.Errorf("-n 3: exit %d, stderr %q; want to go on, quietly", code, out)
	}
	if code, out := parseTool("-h"); code != 0 || !strings.Contains(out, "a count") || strings.Contains(out, "usage: tool") {
		t.Errorf("-h: exit %d, stderr:\n%s\nwant 0 and the flag package's help only", code, out)
	}
	if code, out := parseTool("-bogus"); code != 2 || !strings.Contains(out, "-bogus") || strings.Contains(out, "already reported") {
		t.Errorf("-bogus: exit %d, stderr:\n%s\nwant 2 and the flag package's message only", code, out)
	}
	want := "tool: unexpected argument \"extra\": tool takes flags only\nusage: tool -n N\n"
	if code, out := parseTool("-n", "3", "extra"); code != 2 || out != want {
		t.Errorf("-n 3 extra: exit %d, stderr %q; want 2, %q", code, out, want)
	}
}
