package poll

import (
	"io"
	"math"

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
	if fd.inPaused || fd.inErr != nil || fd.Closing() {
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
	if fd.inErr == nil {
		fd.inErr = err
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

// Input, user side. All are safe for concurrent use; the byte slices they
// return are valid until Release (or a Read, which releases).

// lockInput waits until at least n bytes are readable and returns with inMu
// held, or returns an error without it: ErrClosed, ErrDeadline, or the input
// error once fewer than n bytes remain.
func (fd *FD) lockInput(n int) error {
	var wake <-chan struct{}
	for {
		// Close first: after it every read fails with ErrClosed, as
		// net's do, whatever the deadline.
		if fd.readExpired() && !fd.Closing() {
			// Pass the news to another blocked reader, which may wait
			// on its token alone (await).
			fd.signalReadable()
			return ErrDeadline
		}
		fd.inMu.Lock()
		if fd.Closing() {
			fd.inMu.Unlock()
			fd.signalReadable() // pass the news to the next blocked reader
			return ErrClosed
		}
		if fd.inLent {
			// WriteTo's writer is reading input this reader's release
			// would free: wait until it is done (and the bytes after are
			// this reader's, if WriteTo does not take them first).
			fd.inMu.Unlock()
			if fd.NoBlock {
				return ErrWouldBlock
			}
			if wake == nil {
				wake = fd.waits().readable.wait()
				continue
			}
			fd.await(wake, false)
			continue
		}
		if fd.in.Len() >= n {
			fd.inWant = 0
			return nil
		}
		if err := fd.inErr; err != nil {
			fd.inMu.Unlock()
			fd.signalReadable() // pass the news to the next blocked reader
			return err
		}
		fd.inWant = int32(min(fd.in.Held()-fd.in.Len()+n, math.MaxInt32))
		resume := fd.inPaused && int(fd.inWant) > fd.in.Held()
		if resume {
			fd.inPaused = false
		}
		fd.inMu.Unlock()
		if resume {
			fd.Loop.Resume(fd)
		}
		if err := fd.noWait(); err != nil {
			return err
		}
		if wake == nil {
			wake = fd.waits().readable.wait()
			continue // check again, now that a signal cannot be lost
		}
		fd.await(wake, false) // input, its end, or Close
	}
}

// releaseInput frees the consumed input, unless WriteTo lent some of it
// to its writer, which releases it when the writer is done. Called with
// inMu held.
func (fd *FD) releaseInput() {
	if fd.inLent {
		return
	}
	fd.inHeld = false
	if fd.in == nil {
		return
	}
	fd.in.Release()
	fd.in.Shrink() // an idle connection keeps no input node
	if buf.Put(fd.in) {
		fd.in = nil // nor the buffer's header
	}
}

// unlockInput resumes a paused loop once input fell under the low-water
// mark, hands the wake-up token on while input remains, and unlocks inMu.
func (fd *FD) unlockInput() {
	resume := fd.inPaused && fd.in.Held() < int(fd.inLow)
	if resume {
		fd.inPaused = false
	}
	more := fd.in.Len() > 0 || fd.inErr != nil
	fd.syncLen()
	fd.inMu.Unlock()
	if more {
		fd.signalReadable()
	}
	if resume {
		fd.Loop.Resume(fd)
	}
}

// Read copies buffered input into p, blocking until there is some, and
// releases what it consumed (slices from Next or Peek become invalid).
func (fd *FD) Read(p []byte) (int, error) {
	if len(p) == 0 {
		if fd.Closing() {
			return 0, ErrClosed
		}
		return 0, nil
	}
	if err := fd.lockInput(1); err != nil {
		return 0, err
	}
	n := fd.in.ReadInto(p)
	fd.releaseInput()
	fd.unlockInput()
	return n, nil
}

// Next consumes and returns the next n bytes, blocking until they arrived.
func (fd *FD) Next(n int) ([]byte, error) {
	if err := fd.lockInput(n); err != nil {
		return nil, err
	}
	var b []byte
	if n > 0 {
		fd.inHeld = true
		b = fd.in.Next(n)
	}
	fd.unlockInput()
	return b, nil
}

// Peek returns the next n bytes without consuming them, blocking until they
// arrived.
func (fd *FD) Peek(n int) ([]byte, error) {
	if err := fd.lockInput(n); err != nil {
		return nil, err
	}
	var b []byte
	if n > 0 {
		fd.inHeld = true
		b = fd.in.Peek(n)
	}
	fd.unlockInput()
	return b, nil
}

// A reader may consume input without inMu, from a view: the readable bytes
// of the input's read node, which a locked call handed out with its result
// (NextView, PeekView). The bytes the FD would give next are, byte for
// byte, a prefix of the view, until someone else consumes or releases
// input, so a reader that is the only consumer may take them from the view
// and tell the FD how many it took (skip) with its next locked call. It
// saves two locked instructions per Peek or Next, the bulk of a pipelined
// request's own user-space cost. Until then the FD's input still holds
// the skipped bytes: Len counts them, Held too (as it counts consumed
// bytes until Release), and the loop, which only appends, never reads the
// read position. The view's memory is as safe as a Peek's: handed out
// with inHeld set, it is not recycled before a release.
//
// The reader must check ViewUsable before each use of its view, as a
// locked call checks Closing and the read deadline.

// ViewUsable reports whether a reader may take bytes from its view: fd is
// not closing and the read deadline has not passed (a locked call would
// fail then, whatever is buffered).
func (fd *FD) ViewUsable() bool {
	return !fd.Closing() && !fd.readExpired()
}

// NextView consumes skip bytes the reader took from its last view, then
// consumes and returns the next n bytes as Next does, with the new
// view: the readable bytes that follow them in their node (possibly
// none). On error nothing is consumed, skip included.
func (fd *FD) NextView(skip, n int) (b, view []byte, err error) {
	return fd.takeView(skip, n, true)
}

// PeekView consumes skip bytes the reader took from its last view, then
// returns the next n bytes as Peek does, with the new view, which
// starts with them when they lie in one node. On error nothing is
// consumed, skip included.
func (fd *FD) PeekView(skip, n int) (b, view []byte, err error) {
	return fd.takeView(skip, n, false)
}

// takeView is NextView (consume set) and PeekView.
func (fd *FD) takeView(skip, n int, consume bool) (b, view []byte, err error) {
	if err := fd.lockInput(skip + n); err != nil {
		return nil, nil, err
	}
	fd.skipTaken(skip)
	if n > 0 {
		if consume {
			b = fd.in.Next(n)
		} else {
			b = fd.in.Peek(n)
		}
	}
	view = fd.in.Front()
	if len(b) > 0 || len(view) > 0 {
		// The view is input memory too, whatever n was: Next(0) hands
		// it out as surely as Next(1).
		fd.inHeld = true
	}
	fd.unlockInput()
	return b, view, nil
}

// ReleaseSkip consumes skip bytes the reader took from its view, then
// releases as Release does.
func (fd *FD) ReleaseSkip(skip int) {
	fd.inMu.Lock()
	fd.skipTaken(skip)
	fd.releaseInput()
	fd.unlockInput()
}

// Consume consumes skip bytes the reader took from its view, without
// waiting or failing: for a reader that gives its view up before another
// call.
func (fd *FD) Consume(skip int) {
	if skip <= 0 {
		return
	}
	fd.inMu.Lock()
	fd.skipTaken(skip)
	fd.unlockInput()
}

// skipTaken consumes the skip bytes a reader took from its view; once fd
// was destroyed there are none left to consume. Called with inMu held.
func (fd *FD) skipTaken(skip int) {
	if skip = min(skip, fd.in.Len()); skip > 0 {
		fd.in.Skip(skip)
	}
}

// Skip consumes the next n bytes, blocking until they arrived.
func (fd *FD) Skip(n int) error {
	if err := fd.lockInput(n); err != nil {
		return err
	}
	if n > 0 {
		fd.in.Skip(n)
	}
	fd.unlockInput()
	return nil
}

// Slice moves the next n bytes into dst without copying (see
// buf.LinkBuffer.Share), blocking until they arrived, then releases the
// input as Release does. dst's memory stays valid however fd's input is
// released or freed, and does not count against the input high-water
// mark. It reports whether dst holds memory an owner waits for (a
// provided buffer): such a dst must be released or abandoned, not
// dropped.
func (fd *FD) Slice(n int, dst *buf.LinkBuffer) (owned bool, err error) {
	if err := fd.lockInput(n); err != nil {
		return false, err
	}
	if n > 0 {
		owned = fd.in.Share(dst, n)
	}
	fd.releaseInput()
	fd.unlockInput()
	return owned, nil
}

// Until consumes and returns the input up to and including the first delim,
// blocking until it arrived. It fails with ErrBufferFull when the input
// high-water mark of bytes holds no delim, so a peer cannot make it buffer
// without bound.
func (fd *FD) Until(delim byte) ([]byte, error) {
	need := 1
	for {
		if err := fd.lockInput(need); err != nil {
			return nil, err
		}
		if i := fd.in.IndexByte(delim); i >= 0 {
			fd.inHeld = true
			b := fd.in.Next(i + 1)
			fd.unlockInput()
			return b, nil
		}
		if fd.in.Len() >= int(fd.inHigh) {
			fd.unlockInput()
			return nil, ErrBufferFull
		}
		need = fd.in.Len() + 1
		fd.unlockInput()
	}
}

// Release frees the input consumed so far. Slices returned before are no
// longer valid.
func (fd *FD) Release() {
	fd.inMu.Lock()
	fd.releaseInput()
	fd.unlockInput()
}

// The small accessors below unlock by hand rather than by defer: they run
// several times per request.

// Len returns the number of input bytes readable without blocking: none
// once Close was called, since every read fails from then on.
func (fd *FD) Len() int {
	if fd.Closing() {
		return 0
	}
	if n := fd.inLen.Load(); n >= 0 {
		return int(n)
	}
	fd.inMu.Lock()
	n := fd.in.Len()
	fd.inMu.Unlock()
	return n
}

// syncLen stores the input's length for Len if it changed. Called with
// inMu held, after anything that may change the length and before the
// unlock.
func (fd *FD) syncLen() {
	n := int32(-1)
	if l := fd.in.Len(); l <= math.MaxInt32 {
		n = int32(l)
	}
	if fd.inLen.Load() != n {
		fd.inLen.Store(n)
	}
}

// InputState returns, in one look, the number of input bytes readable
// without blocking, how many bytes readers have consumed since the FD
// began, and whether input has ended. The consumed count tells whether a
// reader made progress; the readable count cannot, as input that arrives
// meanwhile may replace what was consumed byte for byte.
func (fd *FD) InputState() (n int, consumed uint64, ended bool) {
	fd.inMu.Lock()
	n, consumed, ended = fd.inputStateLocked()
	fd.inMu.Unlock()
	return n, consumed, ended
}

// ReleaseState does ReleaseSkip(skip), then returns what InputState
// would.
func (fd *FD) ReleaseState(skip int) (n int, consumed uint64, ended bool) {
	fd.inMu.Lock()
	fd.skipTaken(skip)
	fd.releaseInput()
	n, consumed, ended = fd.inputStateLocked()
	fd.unlockInput()
	return n, consumed, ended
}

func (fd *FD) inputStateLocked() (n int, consumed uint64, ended bool) {
	n = fd.in.Len()
	return n, fd.inTotal - uint64(n), fd.inErr != nil
}

// InputHeld returns the input bytes the FD pins: readable plus consumed but
// not yet released. Tests use it to check the high-water bound.
func (fd *FD) InputHeld() int {
	fd.inMu.Lock()
	defer fd.inMu.Unlock()
	return fd.in.Held()
}

// InputEnded reports whether input has ended (peer FIN or a read error).
func (fd *FD) InputEnded() bool {
	fd.inMu.Lock()
	ended := fd.inErr != nil
	fd.inMu.Unlock()
	return ended
}

// WriteTo hands the input to w until it ends, blocking for more as Read
// does (bounded by the read deadline): each turn passes the chunks
// buffered so far to w.Write straight from the input buffer, with no copy
// in between, then releases them. It returns nil at the end of input
// (io.EOF), else ErrClosed, ErrDeadline, the read error, or w's error;
// the bytes of the turn that failed are consumed. Safe for concurrent use
// with other readers: each byte goes to one of them, and while w holds a
// turn's chunks other readers wait (lockInput) and Release frees nothing,
// so the chunks stay valid until w returns and no input piles up
// unreleased behind them.
func (fd *FD) WriteTo(w io.Writer) (int64, error) {
	var total int64
	var chunks [][]byte
	for {
		if err := fd.lockInput(1); err != nil {
			if err == io.EOF {
				err = nil
			}
			return total, err
		}
		chunks = fd.in.Slices(chunks[:0], maxIov)
		for _, p := range chunks {
			fd.in.Skip(len(p))
		}
		fd.inHeld = true
		fd.inLent = true
		fd.unlockInput()
		var err error
		for _, p := range chunks {
			var n int
			n, err = w.Write(p)
			total += int64(n)
			if err == nil && n < len(p) {
				err = io.ErrShortWrite
			}
			if err != nil {
				break
			}
		}
		clear(chunks) // let the buffers' memory go with the next release
		fd.inMu.Lock()
		fd.inLent = false
		fd.releaseInput()
		fd.unlockInput()
		if err != nil {
			return total, err
		}
	}
}
