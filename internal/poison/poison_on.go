//go:build ringpoison

package poison

// Enabled reports whether this build poisons memory given back
// (-tags ringpoison).
const Enabled = true

// Pattern is the byte Fill writes: 0xDB, which no text protocol uses and
// which reads as an implausible length in a binary one.
const Pattern = 0xDB

// Fill overwrites b with Pattern. Call it on memory a reader could have
// seen, at the moment it goes back to a pool or to the kernel: a read of
// a slice released too early then shows 0xDB at once, where it would
// otherwise show the old bytes, or some day another connection's.
func Fill(b []byte) {
	if len(b) == 0 {
		return
	}
	b[0] = Pattern
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}
