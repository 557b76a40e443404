//go:build linux

package uringp

import (
	"testing"
	"unsafe"
)

// TestConnSize keeps the loop's per-connection record in the 64-byte
// size class: every idle connection carries one.
func TestConnSize(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n > 64 {
		t.Errorf("uringp.conn is %d bytes, want at most 64 (idle memory per connection; see docs/RELIABILITY.md)", n)
	}
}
