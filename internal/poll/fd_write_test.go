//go:build linux

package poll

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// sharedOwner owns memory that output may keep by reference (buf.Sharer),
// as the loop's receive buffers and adopted copies are.
type sharedOwner struct{ owner }

func (*sharedOwner) Shared() bool { return true }

// TestOutputMarkCountsHeldBytes: a reply queued by reference counts whole
// against the output high-water mark until its last byte is sent, since
// its memory stays held until then. With the reply mostly sent, a writer
// still waits (here, until its deadline); once the rest is sent the node
// is freed, its owner told, and writers go on.
func TestOutputMarkCountsHeldBytes(t *testing.T) {
	fd, _, _ := lifeFD(t)
	high := fd.cfg.OutputHighWater
	var o sharedOwner
	reply := new(buf.LinkBuffer)
	reply.AppendRef(make([]byte, high), &o)
	if err := fd.WriteBuffer(reply); err != nil {
		t.Fatalf("queueing a %d-byte reply by reference: %v", high, err)
	}
	if !fd.OutputFull() {
		t.Fatalf("a queued reply of %d bytes does not fill a %d-byte mark", high, high)
	}

	fd.OutputSent(high - 1024) // play the loop: all but 1 KiB went out
	if q := fd.OutputQueued(); q != 1024 {
		t.Fatalf("%d bytes left to send, want 1024", q)
	}
	if !fd.OutputFull() {
		t.Error("the mark counts only the unsent bytes of a reply still held whole")
	}
	fd.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	if n, err := fd.Write([]byte("x")); !errors.Is(err, ErrDeadline) {
		t.Errorf("Write beside a held reply at the mark returned (%d, %v), want to wait until its deadline", n, err)
	}
	if o.released.Load() != 0 {
		t.Fatal("the reply's owner was told before its last byte was sent")
	}

	fd.OutputSent(1024) // the rest: the node is freed
	if o.released.Load() != 1 {
		t.Fatalf("the reply's owner heard %d releases, want 1", o.released.Load())
	}
	if fd.OutputFull() {
		t.Error("the output still counts as full once the reply was sent and freed")
	}
	fd.SetWriteDeadline(time.Time{})
	if n, err := fd.Write([]byte("x")); n != 1 || err != nil {
		t.Errorf("Write after the reply was freed returned (%d, %v), want (1, nil)", n, err)
	}
}

// drainHooks counts OutputDrained calls.
type drainHooks struct{ drained int }

func (*drainHooks) InputArrived()         {}
func (h *drainHooks) OutputDrained() bool { h.drained++; return false }
func (*drainHooks) Finalized()            {}

// TestOutputErrorTellsNoBlock: a failed send drops the queue, which no
// send will drain now: a user on the loop (NoBlock), who may have held
// back for the drain, hears of it as of one, and runs again to meet the
// error; others wait on the FD and are woken there.
func TestOutputErrorTellsNoBlock(t *testing.T) {
	for _, noBlock := range []bool{false, true} {
		fd, _, _ := lifeFD(t)
		h := new(drainHooks)
		fd.Hooks, fd.NoBlock = h, noBlock
		out := new(buf.LinkBuffer)
		out.Append(make([]byte, 1024))
		if err := fd.WriteBuffer(out); err != nil {
			t.Fatalf("NoBlock %v: queueing 1 KiB: %v", noBlock, err)
		}
		fd.OutputError(syscall.ECONNRESET) // play the loop: the send failed
		want := 0
		if noBlock {
			want = 1
		}
		if h.drained != want {
			t.Errorf("NoBlock %v: OutputDrained called %d times after a failed send, want %d", noBlock, h.drained, want)
		}
		if _, err := fd.Write([]byte("x")); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("NoBlock %v: Write after the failed send: %v, want ECONNRESET", noBlock, err)
		}
	}
}

// TestOutputDrainedOnlyNoBlock: a send that drains the queue tells the
// hooks only of an FD whose user runs on the loop (NoBlock); the others'
// users wait on the FD, and the call would read their state for nothing.
func TestOutputDrainedOnlyNoBlock(t *testing.T) {
	for _, noBlock := range []bool{false, true} {
		fd, _, _ := lifeFD(t)
		h := new(drainHooks)
		fd.Hooks, fd.NoBlock = h, noBlock
		out := new(buf.LinkBuffer)
		out.Append(make([]byte, 1024))
		if err := fd.WriteBuffer(out); err != nil {
			t.Fatalf("NoBlock %v: queueing 1 KiB: %v", noBlock, err)
		}
		fd.OutputSent(1024) // play the loop: it all went out
		want := 0
		if noBlock {
			want = 1
		}
		if h.drained != want {
			t.Errorf("NoBlock %v: OutputDrained called %d times, want %d", noBlock, h.drained, want)
		}
	}
}
