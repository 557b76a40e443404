package ringpoll

import (
	"testing"
	"unsafe"
)

// TestConnSize keeps the Conn, which every connection carries, in the
// 112-byte size class (docs/RELIABILITY.md, memory per idle connection).
// Put a new small field with the others in their shared word, or rarely
// used state behind a pointer.
func TestConnSize(t *testing.T) {
	if n := unsafe.Sizeof(Conn{}); n > 112 {
		t.Errorf("Conn is %d bytes, want at most 112", n)
	}
	if networks[netUnix] != "unix" {
		t.Errorf("netUnix is %q, not unix", networks[netUnix])
	}
}
