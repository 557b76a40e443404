package poll

import (
	"testing"
	"time"
	"unsafe"
)

// TestFDSize keeps the FD, which every connection carries, in the 176-byte
// size class: docs/RELIABILITY.md counts it in the memory of an idle
// connection. A field added past that costs every idle connection 16 bytes
// more; move rarely used state into the waitState (as the deadlines are) or
// into the flags' word.
func TestFDSize(t *testing.T) {
	if n := unsafe.Sizeof(FD{}); n > 176 {
		t.Errorf("FD is %d bytes, want at most 176", n)
	}
}

// TestDeadlinesMadeOnDemand: an FD whose user neither sets a deadline nor
// blocks carries no deadlines; setting one makes them.
func TestDeadlinesMadeOnDemand(t *testing.T) {
	var fd FD
	if fd.readExpired() || fd.writeExpired() {
		t.Fatal("an FD without deadlines reports one expired")
	}
	if fd.wait.Load() != nil {
		t.Fatal("asking whether a deadline passed made the deadlines")
	}
	fd.waits().readable.wait() // a blocked reader's token
	if fd.setDeadlines() != nil {
		t.Fatal("a waiter's token made the deadlines")
	}
	fd.SetReadDeadline(time.Unix(1, 0))
	if fd.setDeadlines() == nil || !fd.readExpired() || fd.writeExpired() {
		t.Errorf("after a read deadline in the past: read expired %v, write expired %v", fd.readExpired(), fd.writeExpired())
	}
}
