package poll

import (
	"io"
	"math"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// Input, user side. All are safe for concurrent use; the byte slices they
// return are valid until Release (or a Read, which releases).

// lockInput waits until at least n bytes are readable and returns with inMu
// held, or returns an error without it: ErrClosed, ErrDeadline, or the input
// error once fewer than n bytes remain.
func (fd *FD) lockInput(n int) error {
	err := fd.waitInput(n)
	if err != nil {
		fd.readerGone()
	}
	return err
}

// waitInput is lockInput but for what a reader that stops waiting owes
// the loop (readerGone). While it waits, a read of the socket the loop
// leaves it is its own (selfread.go).
func (fd *FD) waitInput(n int) error {
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
		fd.inBits &^= selfWaiting
		if fd.Closing() {
			fd.inMu.Unlock()
			fd.signalReadable() // pass the news to the next blocked reader
			return ErrClosed
		}
		if fd.inBits&(selfReady|selfReading) == selfReady {
			fd.readSelf()
			continue
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
		if err := fd.inputErr(); err != nil {
			fd.inMu.Unlock()
			fd.signalReadable() // pass the news to the next blocked reader
			return err
		}
		fd.inWant = int32(min(fd.in.Held()-fd.in.Len()+n, math.MaxInt32))
		resume := fd.inPaused && int(fd.inWant) > fd.in.Held()
		if resume {
			fd.inPaused = false
		}
		fd.inBits |= selfWaiting
		fd.inMu.Unlock()
		hook(HookInputWait, fd)
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

// releaseInput releases the consumed input, unless WriteTo lent some of it
// to its writer, which releases it when the writer is done. Called with
// inMu held. Bytes consumed in the node that also holds the start of the
// next message stop counting against the input marks too (ReleaseRead):
// counted until the node is freed, they could hold input paused at its
// mark while the handler waits for the rest of that message.
func (fd *FD) releaseInput() {
	if fd.inLent {
		return
	}
	fd.inHeld = false
	if fd.in == nil {
		return
	}
	fd.in.ReleaseRead()
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
	more := fd.in.Len() > 0 || fd.inBits&inEnded != 0
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
	return n, fd.inTotal - uint64(n), fd.inBits&inEnded != 0
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
	ended := fd.inBits&inEnded != 0
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
		chunks = fd.in.Slices(chunks[:0], MaxIov)
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
