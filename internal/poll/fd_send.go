package poll

import (
	"io"
	"os"
	"sync"
	"syscall"
)

// Zero-copy sends: sendfile(2) from a file and splice(2) from a pipe move
// bytes into the socket without passing through user memory. They are made
// by the user goroutine, as a writer's own send is, and only while the loop
// does not own output, so they go out after every byte written before.
//
// A non-blocking socket that is full fails them with EAGAIN. The user
// goroutine then neither spins nor blocks a thread in poll(2): it tells
// the loop it waits (wantOut; the first time, it asks the loop to watch
// the socket's writable edges, Loop.WatchWritable) and waits for the next
// edge, which comes at the kernel's writable mark, as net's sendfile
// waits on Go's poller. The loop counts every edge it hears (edges): one
// that came after the Move began but before wantOut was set is not told
// again, so then the send tries once more instead of waiting. An inline
// handler's FD (NoBlock) may not wait: it copies the rest of the source
// through the output queue instead (Stats.SendCopied).

// maxMove bounds one sendfile or splice call, as the kernel's own
// MAX_RW_COUNT bounds it anyway.
const maxMove = 1 << 30

// MoveKind names the system call of a Mover, for its counters and errors.
type MoveKind uint8

const (
	// MoveSendfile is sendfile(2) from a file.
	MoveSendfile MoveKind = iota
	// MoveSplice is splice(2) from a pipe.
	MoveSplice
)

func (k MoveKind) String() string {
	if k == MoveSplice {
		return "splice"
	}
	return "sendfile"
}

// Mover is the source of a zero-copy send (FD.SendFrom).
type Mover interface {
	// Move makes one system call that moves up to n bytes of the source
	// straight into the socket sysfd (sendfile or splice) and returns how
	// many it moved: (0, nil) at the source's end, an error IsAgain
	// matches when the socket is full, else the call's errno.
	Move(sysfd, n int) (int, error)
	// Read reads the source's next bytes, the ones Move would have moved
	// next, for what an FD that may not wait (NoBlock) copies through the
	// output queue instead.
	Read(p []byte) (int, error)
}

// piecePool holds the buffers a NoBlock send copies its source through:
// queueing copies them, so one buffer serves a whole send.
var piecePool = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// SendFrom sends up to n bytes of src into the socket, after every byte
// written before it (it waits until the loop has sent the queued output,
// bounded by the write deadline), and holds the writer lock throughout, so
// no write interleaves with it. It returns the bytes taken from src (sent,
// or queued for the loop to send) and stops early at src's end.
//
// handled is false, with nothing taken, when src's first Move says the
// call cannot be made on these descriptors (IsUnsupported); the caller
// then copies instead. Errors: ErrClosed after Close, ErrDeadline, the
// output error a failed send left, Move's errno in an *os.SyscallError
// named after kind, or the error of src's Read. On an FD with NoBlock set
// it never waits: output the loop still owns, or a full socket, sends the
// rest through the output queue, which then grows past its high-water
// mark as NoBlock writes do. Safe for concurrent use.
func (fd *FD) SendFrom(src Mover, n int64, kind MoveKind) (written int64, handled bool, err error) {
	fd.wmu.Lock()
	defer fd.wmu.Unlock()
	st := fd.Loop.Stats()
	var buf *[32 << 10]byte
	defer func() {
		if buf != nil {
			piecePool.Put(buf)
		}
	}()
	copyAll := false
	armed := false // wantOut set since the last Move that found the socket full
	disarm := func() {
		if armed {
			fd.waits().wantOut.Store(false)
			armed = false
		}
	}
	defer disarm()
	for written < n {
		if !copyAll {
			switch err := fd.WaitOutput(); err {
			case nil:
			case ErrWouldBlock:
				copyAll = true
			default:
				return written, true, err
			}
		}
		if !copyAll {
			var w *waitState
			var seen uint32 // w.edges before the Move
			if !fd.NoBlock {
				w = fd.waits()
				seen = w.edges.Load()
			}
			m, err := fd.move(src, int(min(n-written, maxMove)), kind, st)
			written += int64(m)
			switch {
			case err == nil && m == 0:
				return written, true, nil // src's end
			case err == nil:
				disarm() // the try after asking found room: no wait now
				continue
			case IsUnsupported(err) && written == 0:
				return 0, false, os.NewSyscallError(kind.String(), err)
			case !IsAgain(err):
				return written, true, fd.moveError(kind, err)
			}
			if !fd.NoBlock {
				wake := w.writable.wait()
				if !armed {
					st.SendStalls.Add(1)
					hook(HookSendWantsWritable, fd)
					w.wantOut.Store(true)
					armed = true
					if !w.watched {
						w.watched = true
						fd.Loop.WatchWritable(fd)
					}
					if w.edges.Load() != seen {
						// An edge since the Move began, told
						// before wantOut was set: the socket may
						// have room, and no edge will say so
						// again. Move once more.
						continue
					}
				}
				armed = false
				fd.await(wake, true) // writable, Close, or the write deadline (WaitOutput says which)
				continue
			}
			st.SendStalls.Add(1)
			copyAll = true
		}
		if buf == nil {
			buf = piecePool.Get().(*[32 << 10]byte)
		}
		k, err := src.Read(buf[:min(int64(len(buf)), n-written)])
		if k > 0 {
			if qerr := fd.queuePiece(buf[:k]); qerr != nil {
				return written, true, qerr
			}
			written += int64(k)
			st.SendCopied.Add(uint64(k))
		}
		if err == io.EOF {
			return written, true, nil
		}
		if err != nil {
			return written, true, err
		}
	}
	return written, true, nil
}

// move makes one Move holding a descriptor reference, so Close cannot close
// the socket under the call, and counts it.
func (fd *FD) move(src Mover, n int, kind MoveKind, st *Stats) (int, error) {
	if !fd.acquire(lifeSys) {
		return 0, ErrClosed
	}
	m, err := src.Move(fd.Sysfd, n)
	fd.put(lifeSys)
	countMove(st, kind, m)
	if m > 0 {
		fd.touch()
	}
	return m, err
}

// countMove counts one Move of kind that moved m bytes.
func countMove(st *Stats, kind MoveKind, m int) {
	if kind == MoveSplice {
		st.Splices.Add(1)
		st.SpliceBytes.Add(uint64(max(m, 0)))
	} else {
		st.Sendfiles.Add(1)
		st.SendfileBytes.Add(uint64(max(m, 0)))
	}
}

// moveError maps a failed Move as a failed write is mapped: ErrClosed if
// Close shut the socket under it, else the errno, named after the call.
// Only the socket's own errors stick (setOutErr), so that later writes
// fail as a failed send makes them: a reset, or a writing side shut down.
// Other errnos may be the source's, which say nothing of the socket.
func (fd *FD) moveError(kind MoveKind, err error) error {
	if err == ErrClosed || fd.Closing() {
		return ErrClosed
	}
	if errno, ok := err.(syscall.Errno); ok {
		err = os.NewSyscallError(kind.String(), errno)
		if errno == syscall.ECONNRESET || errno == syscall.EPIPE {
			fd.setOutErr(err)
		}
	}
	return err
}

// queuePiece copies p into the output queue for the loop to send, without
// trying a send first: the socket was just found full, and the loop waits
// for room. Called with wmu held.
func (fd *FD) queuePiece(p []byte) error {
	fd.outMu.Lock()
	if err := fd.outErrLocked(); err != nil {
		fd.outMu.Unlock()
		return err
	}
	if fd.Closing() {
		// What is queued now would never be sent, or be freed.
		fd.outMu.Unlock()
		return ErrClosed
	}
	fd.output().Append(p)
	fd.noteOut()
	kick := !fd.loopOwns
	fd.loopOwns = true
	fd.outMu.Unlock()
	if kick {
		fd.Loop.Flush(fd)
	}
	return nil
}

// NoteCopied counts n bytes that ReadFrom copied through Write because its
// source has no zero-copy path (Stats.ReadFromCopied).
func (fd *FD) NoteCopied(n int64) {
	if n > 0 && fd.Loop != nil {
		fd.Loop.Stats().ReadFromCopied.Add(uint64(n))
	}
}
