//go:build ringpoison

package buf

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ringpoll/ringpoll/internal/poison"
)

// poisoned reports whether every byte of p is the poison pattern.
func poisoned(p []byte) bool {
	return len(p) > 0 && bytes.Count(p, []byte{poison.Pattern}) == len(p)
}

// TestPoisonFreedNodes: under the ringpoison tag, memory a reader saw is
// poisoned the moment its node goes back to the pool: a node Release
// frees, the scratch copy Next made across nodes, a tail Shrink frees,
// and a node Share made views of once its last holder let go. Memory
// Abandon retires is left as it is: its reader may still look at it.
func TestPoisonFreedNodes(t *testing.T) {
	x, y := strings.Repeat("x", 4000), strings.Repeat("y", 4000)
	t.Run("Release", func(t *testing.T) {
		b := New()
		commitNodes(b, x, y)
		head := b.Next(100)      // aliases the first node
		across := b.Next(len(x)) // spans both nodes: a scratch copy
		rest := b.Next(b.Len())  // aliases the tail
		b.Release()              // frees the first node and the copy
		if !poisoned(head) || !poisoned(across) {
			t.Fatalf("after Release: head %q..., copy %q...: want the poison", head[:8], across[:8])
		}
		if poisoned(rest) {
			t.Fatal("Release poisoned the tail, which it keeps")
		}
		b.Shrink()
		if !poisoned(rest) {
			t.Fatalf("after Shrink: tail %q...: want the poison", rest[:8])
		}
	})
	t.Run("Share", func(t *testing.T) {
		b, dst := New(), New()
		commitNodes(b, x)
		b.Share(dst, 100)
		view := dst.Next(100)
		b.Discard() // b's reference; dst's view keeps the memory
		if poisoned(view) {
			t.Fatal("the memory was poisoned while a view still showed it")
		}
		dst.Release()
		dst.Shrink()
		if !poisoned(view) {
			t.Fatalf("after the last holder let go: %q...: want the poison", view[:8])
		}
	})
	t.Run("Abandon", func(t *testing.T) {
		b := New()
		commitNodes(b, x, y)
		held := b.Next(len(x) + 100)
		b.Abandon()
		if !bytes.Equal(held, []byte(x+y[:100])) {
			t.Fatalf("Abandon changed memory a reader holds: %q...", held[:8])
		}
	})
}
