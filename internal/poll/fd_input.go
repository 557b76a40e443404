package poll

import (
	"io"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// Input, loop side. Only the loop goroutine calls these.

// InputSpace returns free input buffer of at least min bytes for the loop to
// read into, or nil when the FD wants no input now (paused by backpressure,
// ended, or closing). The loop writes into it without holding any lock; see
// buf.LinkBuffer for why that is sound.
func (fd *FD) InputSpace(min int) []byte {
	fd.inMu.Lock()
	defer fd.inMu.Unlock()
	if fd.inPaused || fd.inBits&inEnded != 0 || fd.Closing() {
		return nil
	}
	return fd.input().WriteSpace(min)
}

// input returns the input buffer, taking one from buf's pool if fd gave
// its own back (releaseInput does once it is empty, so that an idle FD
// keeps none). Called with inMu held.
func (fd *FD) input() *buf.LinkBuffer {
	if fd.in == nil {
		fd.in = buf.Get()
		fd.in.SetGrowHint(int(fd.inHint))
	}
	return fd.in
}

// maxInHint bounds the grow hint fd keeps (buf caps its own lower), and
// maxClassHint the hint a burst that ended short asks for: buf's largest
// pooled node.
const (
	maxInHint    = 1 << 30
	maxClassHint = 64 << 10
)

// InputCommit records n bytes read into the last InputSpace, which bring
// the bytes read since the socket last became readable to burst. It
// reports whether the FD wants more input; when it does not, the loop
// stops reading until Resume.
//
// The burst sizes the next input node: a read that filled its space asks
// for one twice as big, so bulk streams take fewer syscalls; a short read
// (the burst's end, as a rule) asks for one twice the burst, up to
// maxClassHint, so that the next burst of that size comes in one read
// that comes out short (16 KiB messages: one read, where nodes grown from
// ReadSize took three); a burst under ReadSize/2 goes back to ReadSize
// nodes. fd keeps the hint too, for the next buffer it takes after giving
// this one back.
func (fd *FD) InputCommit(n, burst int) (more bool) {
	fd.inMu.Lock()
	in := fd.input()
	space := in.Space()
	in.Commit(n)
	fd.inTotal += uint64(n)
	var hint int32
	switch {
	case n == space:
		hint = int32(min(2*n, maxInHint))
	case burst < ReadSize/2:
		hint = 0
	default:
		hint = int32(min(2*burst, maxClassHint))
	}
	if hint != fd.inHint {
		fd.inHint = hint
		in.SetGrowHint(int(hint))
	}
	more = fd.checkInputHigh()
	fd.syncLen()
	fd.inMu.Unlock()
	fd.touch()
	return more
}

// InputRef links p, filled by the kernel, into the input without a copy;
// owner hears back once the reader released it (or, if a reader still
// held slices when fd was destroyed, that it must never reuse p). The
// result is as for InputCommit.
//
// An input that already pins share pieces of lent memory (buf's Owned:
// bytes readable, or consumed and not yet released) takes a copy of p
// instead, and owner hears at once that p is free: a reader that holds
// its input, or reads it slowly, pins no more of the loop's receive
// buffers than its share, so other connections never run dry because of
// it. It reports copied such input to the engine, whose loop counts it.
func (fd *FD) InputRef(p []byte, owner buf.Owner, share int) (more, copied bool) {
	fd.inMu.Lock()
	in := fd.input()
	if in.Owned() >= share {
		in.Append(p)
		owner.Release()
		copied = true
	} else {
		in.AppendRef(p, owner)
	}
	fd.inTotal += uint64(len(p))
	more = fd.checkInputHigh()
	fd.syncLen()
	fd.inMu.Unlock()
	fd.touch()
	return more, copied
}

// RetireWaitingInput lets go of the lent memory (io_uring provided
// buffers) that fd's input holds, read or not, released or not, if a
// reader waits for more input: each piece is retired without a copy
// (buf.LinkBuffer.RetireOwned), so that its owner gives the ring new
// memory in its place, and the reader keeps the old. For a loop whose ring
// ran dry while its connections held every buffer, each within its share:
// a reader that waits for input cannot release what it holds before the
// input comes, and none can come. It returns how many pieces it retired.
func (fd *FD) RetireWaitingInput() int {
	n := 0
	fd.inMu.Lock()
	if fd.in != nil && fd.inWant > 0 {
		n = fd.in.RetireOwned()
	}
	fd.inMu.Unlock()
	return n
}

// InputRoom returns how many more input bytes the FD takes before its
// high-water mark (or more, for a blocked reader that needs more): an
// engine whose kernel reads ahead caps its next receive with it.
func (fd *FD) InputRoom() int {
	fd.inMu.Lock()
	n := int(max(fd.inHigh, fd.inWant)) - fd.in.Held()
	fd.inMu.Unlock()
	return n
}

// checkInputHigh pauses input at the high-water mark, or higher when a
// blocked reader needs more. Called with inMu held.
func (fd *FD) checkInputHigh() bool {
	if fd.in.Held() >= int(max(fd.inHigh, fd.inWant)) {
		fd.inPaused = true
	}
	return !fd.inPaused
}

// InputError ends input with err: io.EOF for the peer's FIN, or the read
// error. Readers get the buffered bytes first.
func (fd *FD) InputError(err error) {
	fd.inMu.Lock()
	if fd.inBits&inEnded == 0 {
		fd.inBits |= inEnded
		if err != io.EOF {
			fd.waits().inErr = err // rare: an idle FD carries no error field
		}
	}
	fd.inMu.Unlock()
}

// InputReady wakes a blocked reader and runs Hooks.InputArrived. The loop calls it once
// per batch of InputCommit, InputRef or InputError on this FD.
func (fd *FD) InputReady() {
	hook(HookInputLinked, fd)
	fd.signalReadable()
	if fd.Hooks != nil {
		fd.Hooks.InputArrived()
	}
}
