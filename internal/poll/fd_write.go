package poll

import (
	"time"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// MaxIov bounds the chunks gathered into one send: the iovecs of a
// sendmsg (Iovecs) and of an engine's SENDMSG.
const MaxIov = 64

// Output, loop side. Only the loop goroutine calls these.

// OutputSlices appends up to max chunks of queued output to dst. The chunks
// stay valid until OutputSent consumes them: writers only append.
func (fd *FD) OutputSlices(dst [][]byte, max int) [][]byte {
	fd.outMu.Lock()
	if fd.out != nil {
		dst = fd.out.Slices(dst, max)
	}
	fd.outMu.Unlock()
	return dst
}

// output returns the output queue, taking a buffer from buf's pool if fd
// gave its own back (OutputSent does once it is empty, so that an idle FD
// keeps none). Called with outMu held.
func (fd *FD) output() *buf.LinkBuffer {
	if fd.out == nil {
		fd.out = buf.Get()
	}
	return fd.out
}

// OutputSent consumes n sent bytes. It reports whether the queue is now
// empty, in which case the loop no longer owns output.
//
// The output marks count the bytes the queue holds (buf.LinkBuffer.Held),
// not the bytes left to send: a reply queued by reference is held whole
// until its last byte is sent, so writers wait for room until it is.
func (fd *FD) OutputSent(n int) (empty bool) {
	fd.outMu.Lock()
	left, held := 0, 0
	if out := fd.out; out != nil {
		out.Skip(n)
		out.Release()
		left, held = out.Len(), out.Held()
	}
	fd.noteOut()
	empty = left == 0
	if empty {
		fd.loopOwns = false
		if out := fd.out; out != nil {
			out.Shrink() // an idle connection keeps no output node
			if buf.Put(out) {
				fd.out = nil // nor the queue's header
			}
		}
	}
	fd.outMu.Unlock()
	if empty {
		hook(HookOutputDrained, fd)
	}
	if held <= fd.cfg.OutputLowWater {
		fd.signalWritable()
		if fd.NoBlock && fd.Hooks != nil && fd.Hooks.OutputDrained() {
			// It ran an inline handler, which may have queued more: the
			// caller must not take the queue for empty and finish a close.
			empty = empty && !fd.OutputPending()
		}
	}
	fd.touch()
	return empty
}

// OutputError drops the queued output after a send failed with err; writers
// get err from then on. A user on the loop (NoBlock) that held back for the
// queue to drain hears of it as of a drain (Hooks.OutputDrained), since no
// send will drain it now: it runs again and meets the error.
func (fd *FD) OutputError(err error) {
	fd.outMu.Lock()
	fd.setOutErrLocked(err)
	if fd.out != nil {
		fd.out.Discard()
	}
	fd.noteOut()
	fd.loopOwns = false
	fd.outMu.Unlock()
	fd.signalWritable()
	if fd.NoBlock && fd.Hooks != nil {
		fd.Hooks.OutputDrained()
	}
}

// OutputFull reports whether the output queue is at or above the output
// high-water mark. It takes no lock: an inline handler asks before every
// call.
func (fd *FD) OutputFull() bool { return fd.outFull.Load() }

// noteOut refreshes outFull after the output queue changed. Called with
// outMu held; it stores only when the answer changes.
func (fd *FD) noteOut() {
	if full := fd.out.Held() >= fd.cfg.OutputHighWater; full != fd.outFull.Load() {
		fd.outFull.Store(full)
	}
}

// OutputPending reports whether output is queued for the loop to send.
func (fd *FD) OutputPending() bool {
	fd.outMu.Lock()
	pending := fd.out.Len() > 0
	fd.outMu.Unlock()
	return pending
}

// DrainTimeout returns how long the loop keeps sending after Close.
func (fd *FD) DrainTimeout() time.Duration { return fd.cfg.DrainTimeout }

// Output, user side.

// source is what a writer sends: one slice, or a Writer's linked buffer.
type source interface {
	len() int
	slices(dst [][]byte) [][]byte
	advance(n int)
}

type sliceSource struct{ p []byte }

func (s *sliceSource) len() int                     { return len(s.p) }
func (s *sliceSource) slices(dst [][]byte) [][]byte { return append(dst, s.p) }
func (s *sliceSource) advance(n int)                { s.p = s.p[n:] }

// writeScratch is a writer's reusable scratch, under wmu. An FD makes it on
// the first send from a writer's goroutine (DirectWrite) or the first
// queued copy of a Writer's buffer: a handler whose replies move into the
// queue whole never does, so its idle connections do not carry it.
type writeScratch struct {
	iov    [][]byte
	iovecs *Iovecs // made on the first gathered send: 1 KiB most never need
}

// Buffers reports whether fd holds an input and an output buffer: an idle
// FD holds neither. Tests use it.
func (fd *FD) Buffers() (in, out bool) {
	fd.inMu.Lock()
	in = fd.in != nil
	fd.inMu.Unlock()
	fd.outMu.Lock()
	out = fd.out != nil
	fd.outMu.Unlock()
	return in, out
}

// HasWriteScratch reports whether fd has made its write scratch. Call it
// from the goroutine that wrote last, after the write returned; tests use
// it.
func (fd *FD) HasWriteScratch() bool { return fd.ws != nil }

// ReaderWaited reports whether a reader has ever blocked on fd (it made
// the readable token). Tests use it to wait until a reader blocks.
func (fd *FD) ReaderWaited() bool {
	w := fd.wait.Load()
	return w != nil && w.readable.c.Load() != nil
}

// scratch returns the FD's write scratch, making it if need be. Call with
// wmu held.
func (fd *FD) scratch() *writeScratch {
	if fd.ws == nil {
		fd.ws = new(writeScratch)
	}
	return fd.ws
}

type bufSource struct{ b *buf.LinkBuffer }

func (s bufSource) len() int                     { return s.b.Len() }
func (s bufSource) slices(dst [][]byte) [][]byte { return s.b.Slices(dst, MaxIov) }
func (s bufSource) advance(n int)                { s.b.Skip(n); s.b.Release(); s.b.Shrink() }

// Write sends p. It returns once every byte is in the kernel or copied into
// the output queue, blocking while the queue is above the output high-water
// mark (bounded by the write deadline). Safe for concurrent use: writes are
// serialized and never interleave. A Write of nothing fails as one of
// something would, as net's does: after Close, with net.ErrClosed.
func (fd *FD) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, fd.writeErr()
	}
	fd.wmu.Lock()
	w := fd.waits()
	w.slice.p = p // reused under wmu: a new one per call would escape
	n, err := fd.write(&w.slice)
	w.slice.p = nil
	fd.wmu.Unlock() // not deferred: write does not panic, and this runs per request
	return n, err
}

// WriteBuffer sends everything in b as Write does; b is empty afterwards,
// even on error. Bytes b references are sent or copied before it returns, so
// the caller may reuse them at once.
func (fd *FD) WriteBuffer(b *buf.LinkBuffer) error {
	fd.wmu.Lock()
	_, err := fd.write(bufSource{b})
	b.Discard()
	fd.wmu.Unlock() // not deferred, as in Write
	return err
}

func (fd *FD) write(src source) (int, error) {
	total := 0
	direct := fd.DirectWrite
	var wake <-chan struct{}
	for src.len() > 0 {
		if err := fd.userErr(); err != nil {
			return total, err
		}
		fd.outMu.Lock()
		if err := fd.outErrLocked(); err != nil {
			fd.outMu.Unlock()
			return total, err
		}
		if direct && !fd.loopOwns {
			// The loop is not sending: send from this goroutine.
			fd.outMu.Unlock()
			ws := fd.scratch()
			ws.iov = src.slices(ws.iov[:0])
			n, err := fd.send(ws.iov)
			if n > 0 {
				total += n
				src.advance(n)
				fd.touch()
			}
			if err == errAgain {
				direct = false // queue the rest for the loop
			} else if err != nil {
				if fd.Closing() {
					// Close shut the socket under this send (EPIPE): the
					// write failed because of Close, as net reports it.
					return total, ErrClosed
				}
				fd.setOutErr(err)
				return total, err
			}
			continue
		}
		room := fd.cfg.OutputHighWater - fd.out.Held()
		if fd.NoBlock {
			room = src.len() // the user holds back instead (OutputDrained)
		}
		if room > 0 {
			if fd.Closing() {
				// Closed since userErr: what is queued now would never
				// be sent, or be freed.
				fd.outMu.Unlock()
				return total, ErrClosed
			}
			total += fd.queue(src, room)
			fd.noteOut()
			kick := !fd.loopOwns
			fd.loopOwns = true
			fd.outMu.Unlock()
			if kick {
				fd.Loop.Flush(fd)
			}
			continue
		}
		fd.outMu.Unlock()
		if wake == nil {
			wake = fd.waits().writable.wait()
			continue // check again, now that a signal cannot be lost
		}
		fd.await(wake, true) // room, a send error, or Close
	}
	return total, nil
}

// maxSharedQueue is the queued output above which a writer copies what a
// Sharer would keep: output waiting for a peer that reads slowly should
// hold heap memory, not the loop's receive buffers.
const maxSharedQueue = 64 << 10

// minAdopt is the smallest slice of the input's own memory that output
// keeps by a reference instead of copying it (buf.LinkBuffer.AdoptRefs):
// below it a copy costs less than making the memory shared.
const minAdopt = 8 << 10

// queue copies up to room bytes of src into the output queue. Called with
// outMu held. A Writer's buffer that fits whole moves its nodes over
// instead (buf.LinkBuffer.Splice): a reply costs no copy and no node.
// Slices the Writer linked from the input move over too, kept by a
// reference to their memory: from the loop's receive buffers where the
// loop is a Sharer, and from the input's own nodes (a copy Next made of a
// message that spanned buffers, or epoll's input) when they are large.
func (fd *FD) queue(src source, room int) int {
	if s, ok := src.(bufSource); ok && s.b.Len() <= room {
		n := s.b.Len()
		out := fd.output()
		if sh, ok := fd.Loop.(Sharer); ok && out.Len() < maxSharedQueue {
			s.b.ShareRefs(sh.Share)
		}
		if n >= minAdopt {
			// inMu inside outMu: no path takes them the other way.
			fd.inMu.Lock()
			if fd.in != nil {
				s.b.AdoptRefs(fd.in, minAdopt)
			}
			fd.inMu.Unlock()
		}
		out.Splice(s.b)
		return n
	}
	out := fd.output()
	if s, ok := src.(*sliceSource); ok {
		// One slice: no gather list, so that a Write on an engine whose
		// loop sends needs no write scratch.
		p := s.p[:min(len(s.p), room)]
		out.Append(p)
		s.advance(len(p))
		return len(p)
	}
	n := 0
	ws := fd.scratch()
	ws.iov = src.slices(ws.iov[:0])
	for _, p := range ws.iov {
		if n+len(p) > room {
			p = p[:room-n]
		}
		out.Append(p)
		n += len(p)
		if n == room {
			break
		}
	}
	src.advance(n)
	return n
}

// writeErr returns why no more can be written, if anything.
func (fd *FD) writeErr() error {
	if err := fd.userErr(); err != nil {
		return err
	}
	fd.outMu.Lock()
	err := fd.outErrLocked()
	fd.outMu.Unlock()
	return err
}

// userErr is the part of writeErr that needs no lock: Close, or a passed
// write deadline.
func (fd *FD) userErr() error {
	if fd.Closing() {
		return ErrClosed
	}
	if fd.writeExpired() {
		fd.signalWritable() // pass the news to another blocked writer (await)
		return ErrDeadline
	}
	return nil
}

// outErrLocked is the part of writeErr under outMu: CloseWrite, or a
// failed send.
func (fd *FD) outErrLocked() error {
	if fd.wrClosed {
		return ErrWriteClosed
	}
	if w := fd.wait.Load(); w != nil {
		return w.outErr
	}
	return nil
}

func (fd *FD) setOutErr(err error) {
	fd.outMu.Lock()
	fd.setOutErrLocked(err)
	fd.outMu.Unlock()
}

// setOutErrLocked makes err the sticky send error, unless there is one.
// Call with outMu held.
func (fd *FD) setOutErrLocked(err error) {
	if w := fd.waits(); w.outErr == nil {
		w.outErr = err
	}
}

// send makes one send syscall on behalf of a user goroutine, holding a
// reference so that the descriptor stays open for it.
func (fd *FD) send(iov [][]byte) (int, error) {
	if !fd.acquire(lifeSys) {
		return 0, ErrClosed
	}
	ws := fd.scratch()
	if len(iov) > 1 && ws.iovecs == nil {
		ws.iovecs = new(Iovecs)
	}
	n, err := Sendv(fd.Sysfd, iov, ws.iovecs)
	fd.put(lifeSys)
	return n, err
}

// CloseWrite waits until the queued output is sent (bounded by the write
// deadline), then shuts down the writing side of the socket: the peer reads
// EOF. Later writes fail with ErrWriteClosed.
func (fd *FD) CloseWrite() error {
	fd.wmu.Lock()
	defer fd.wmu.Unlock()
	if err := fd.WaitOutput(); err != nil {
		return err
	}
	// Only a writer, holding wmu, queues output: the queue is still
	// empty when later writes start to fail.
	fd.outMu.Lock()
	fd.wrClosed = true
	fd.outMu.Unlock()
	return fd.Control(func(s int) error { return Shutdown(s, shutWrite) })
}

// CloseRead shuts down the reading side of the socket.
func (fd *FD) CloseRead() error {
	if fd.Closing() {
		return ErrClosed
	}
	return fd.Control(func(s int) error { return Shutdown(s, shutRead) })
}

// Quiet reports whether fd has no queued output.
func (fd *FD) Quiet() bool {
	fd.outMu.Lock()
	defer fd.outMu.Unlock()
	return !fd.loopOwns && fd.out.Len() == 0
}

// OutputQueued returns the number of output bytes queued for the loop.
// Tests use it to check the high-water bound.
func (fd *FD) OutputQueued() int {
	fd.outMu.Lock()
	defer fd.outMu.Unlock()
	return fd.out.Len()
}
