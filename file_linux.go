package ringpoll

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

// File is an open file whose reads, writes and syncs go through an
// engine's event loop: on the io_uring engines each is a request on a
// loop's ring, and the calling goroutine sleeps on a channel until its
// completion, holding no OS thread (an os.File read holds one for its
// whole length); Close cancels it in the ring (ASYNC_CANCEL). On epoll
// each is the ordinary system call, as on an os.File, and cannot be
// cancelled once it started.
//
// A File is safe for concurrent use. Reads at the file's position take
// turns, as an os.File's do, so that each byte goes to one of them;
// ReadAt and WriteAt, which name their offsets, and Sync run at once and
// wait for no Read. Its methods return *os.PathError, as an os.File's do.
type File struct {
	fd   int
	name string
	ref  *engineRef
	ring bool // requests go to fl
	fl   uringp.FileLoop
	// tryCache: a read first asks the page cache without waiting
	// (preadv2 with RWF_NOWAIT) and goes to the ring only if the data is
	// not there; not for O_DIRECT, which never reads the cache.
	tryCache atomic.Bool
	// mayBlock: the file lacks FMODE_NOWAIT, so io_uring's inline try
	// of a request may sleep in the loop's thread (nowaitCapable).
	mayBlock bool

	// pos is the file's position: one Read at a time holds it, from
	// before its request is issued until the request ended. The kernel
	// makes read(2)s of a regular file take turns (fdget_pos takes its
	// f_pos_lock, fs/file.c), but not requests at the position on a
	// ring: each takes f_pos when it is issued and stores its end back
	// when it completes (io_uring/rw.c, io_kiocb_update_pos), so two in
	// flight at once can read the same bytes (TestFileReadConcurrent).
	// A one-slot channel, not a mutex, so that a Read waiting for it
	// gives up when Close is called.
	pos chan struct{}

	mu      sync.RWMutex // requests hold it shared; Close exclusively
	closed  atomic.Bool
	closing chan struct{} // closed by Close: cancels requests in flight
}

// OpenFile opens the named file as os.OpenFile does (flag may include
// O_DIRECT, whose reads and writes then need aligned buffers and
// offsets), on the engine the options select (WithEngine; default auto).
// Options: WithEngine, WithLogger, and the options that tune an engine
// (WithLoops, WithBufferRing, WithLoopCPUs...), which select the engine a
// File shares with the listeners and connections given the same.
func OpenFile(name string, flag int, perm os.FileMode, opts ...Option) (*File, error) {
	fd, err := unix.Open(name, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f, err := newFile(inOpenFile, fd, name, opts)
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return f, nil
}

// NewFile makes a File of a duplicate of f's descriptor: f stays open
// and usable, and the File must be closed on its own. It takes the
// options OpenFile takes.
func NewFile(f *os.File, opts ...Option) (*File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) {
		fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, &os.PathError{Op: "dup", Path: f.Name(), Err: err}
	}
	if derr != nil {
		return nil, &os.PathError{Op: "dup", Path: f.Name(), Err: derr}
	}
	nf, err := newFile(inNewFile, fd, f.Name(), opts)
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "dup", Path: f.Name(), Err: err}
	}
	return nf, nil
}

func newFile(t taker, fd int, name string, opts []Option) (*File, error) {
	cfg, err := configFor(t, opts)
	if err != nil {
		return nil, err
	}
	ref, err := acquireEngine(cfg)
	if err != nil {
		return nil, err
	}
	f := &File{fd: fd, name: name, ref: ref, pos: make(chan struct{}, 1), closing: make(chan struct{})}
	if e, ok := ref.eng.(*uringp.Engine); ok {
		f.ring, f.fl = true, e.FileLoop()
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		f.mayBlock = !nowaitCapable(fd)
		f.tryCache.Store(err == nil && fl&unix.O_DIRECT == 0 && !f.mayBlock)
	}
	return f, nil
}

// nowaitCapable reports whether the kernel can try fd's reads and writes
// without sleeping (the file has FMODE_NOWAIT, as files on local file
// systems, pipes and sockets do). io_uring issues a request of a file
// without it, FUSE's for one, from the thread that submits it, where it
// may sleep until the file system's server answers. A read with
// RWF_NOWAIT of such a file fails with EOPNOTSUPP before the file system
// sees it; the probe asks for a byte at an offset past any file's end,
// so that on other files it reads nothing and starts no readahead. A file
// it cannot read (opened write-only) counts as one that may sleep.
func nowaitCapable(fd int) bool {
	var b [1]byte
	_, err := unix.Preadv2(fd, [][]byte{b[:]}, 1<<62, unix.RWF_NOWAIT)
	return err != unix.EOPNOTSUPP && err != unix.EBADF
}

// Name returns the name the file was opened with. It is safe for
// concurrent use.
func (f *File) Name() string { return f.name }

// ReadAt reads len(p) bytes at offset off, as io.ReaderAt says: fewer
// only with an error, io.EOF at the end of the file. It is safe for
// concurrent use, with itself and every other method, as io.ReaderAt
// asks: it neither uses nor moves the file's position, and waits for no
// Read.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &os.PathError{Op: "readat", Path: f.name, Err: errors.New("negative offset")}
	}
	n, err := f.transfer(uringp.FileRead, p, off)
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	return n, err
}

// transfer runs requests of op until p is done, as ReadAt and WriteAt
// want; a request that moves nothing ends it with io.ErrUnexpectedEOF.
func (f *File) transfer(op uint8, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, f.checkOpen(opNames[op])
	}
	n := 0
	for n < len(p) {
		m, err := f.do(op, p[n:], off+int64(n))
		n += m
		if err != nil {
			return n, f.pathError(opNames[op], err)
		}
		if m == 0 {
			return n, io.ErrUnexpectedEOF
		}
	}
	return n, nil
}

var opNames = [...]string{uringp.FileRead: "read", uringp.FileWrite: "write"}

// Read reads up to len(p) bytes at the file's position and advances it,
// as os.File's Read does (io.EOF at the end); for pipes and devices,
// where positions mean nothing. It is safe for concurrent use: as an
// os.File's, the Reads of one File take turns, each waiting for the one
// before it to end, so that each byte goes to exactly one of them.
// ReadAt, WriteAt and Sync do not wait for them, nor they for those.
// A Read still waiting for its turn returns os.ErrClosed when the File is
// closed.
func (f *File) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, f.checkOpen("read")
	}
	if err := f.lockPos(); err != nil {
		return 0, f.pathError("read", err)
	}
	defer f.unlockPos()
	poll.Hook(poll.HookFileReadIssue, nil)
	n, err := f.do(uringp.FileRead, p, -1)
	if err != nil {
		return n, f.pathError("read", err)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// lockPos takes the file's position, waiting while another Read holds
// it, until Close is called (os.ErrClosed).
func (f *File) lockPos() error {
	select {
	case f.pos <- struct{}{}:
		return nil
	default:
	}
	poll.Hook(poll.HookFileReadWait, nil)
	select {
	case f.pos <- struct{}{}:
		return nil
	case <-f.closing:
		return os.ErrClosed
	}
}

// unlockPos lets the next Read have the file's position.
func (f *File) unlockPos() { <-f.pos }

// WriteAt writes p at offset off, all of it unless an error (ENOSPC, say)
// stops it, as io.WriterAt says. It is safe for concurrent use: it
// neither uses nor moves the file's position and waits for no Read, and
// writes that overlap one another or a ReadAt land in no set order, as
// pwrite(2)s do.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &os.PathError{Op: "writeat", Path: f.name, Err: errors.New("negative offset")}
	}
	n, err := f.transfer(uringp.FileWrite, p, off)
	if err == io.ErrUnexpectedEOF {
		err = f.pathError("write", io.ErrShortWrite)
	}
	return n, err
}

// Sync commits the file's data and metadata to storage (fsync(2)). It
// is safe for concurrent use and waits for no Read.
func (f *File) Sync() error {
	if _, err := f.do(uringp.FileSync, nil, 0); err != nil {
		return f.pathError("sync", err)
	}
	return nil
}

// Close closes the file. Requests in flight are cancelled and end with
// os.ErrClosed, as do Reads waiting for their turn; the descriptor is
// closed once every request has finished, and later calls fail with
// os.ErrClosed. It is safe for concurrent use: one Close closes, the
// others return os.ErrClosed at once.
func (f *File) Close() error {
	if !f.closed.CompareAndSwap(false, true) {
		return f.pathError("close", os.ErrClosed)
	}
	close(f.closing)
	f.mu.Lock() // every request in flight has ended
	err := unix.Close(f.fd)
	f.mu.Unlock()
	f.ref.release()
	if err != nil {
		return f.pathError("close", err)
	}
	return nil
}

// do runs one request and returns its byte count.
func (f *File) do(op uint8, p []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed.Load() {
		return 0, os.ErrClosed
	}
	if !f.ring {
		return f.syscall(op, p, off)
	}
	if op == uringp.FileRead && off >= 0 && f.tryCache.Load() {
		// A read the page cache holds costs a system call and no
		// hand-off to the loop; one it does not goes to the ring.
		n, err := unix.Preadv2(f.fd, [][]byte{p}, off, unix.RWF_NOWAIT)
		if err == nil {
			return n, nil
		}
		if err != unix.EAGAIN && err != unix.EINTR {
			if err == unix.EOPNOTSUPP || err == unix.EINVAL {
				f.tryCache.Store(false) // no RWF_NOWAIT for this file
			} else {
				return 0, err
			}
		}
	}
	for {
		req := uringp.FileOp{Op: op, Fd: f.fd, Buf: p, Off: off, MayBlock: f.mayBlock}
		res := f.fl.Run(f.closing, &req)
		switch {
		case res >= 0:
			return int(res), nil
		case res == -int32(unix.EINTR):
			continue
		case res == -int32(unix.ECANCELED) && f.closed.Load():
			return 0, os.ErrClosed
		}
		return 0, syscall.Errno(-res)
	}
}

// syscall runs a request as a system call (the epoll engine).
func (f *File) syscall(op uint8, p []byte, off int64) (int, error) {
	for {
		var n int
		var err error
		switch {
		case op == uringp.FileRead && off < 0:
			n, err = unix.Read(f.fd, p)
		case op == uringp.FileRead:
			n, err = unix.Pread(f.fd, p, off)
		case op == uringp.FileWrite:
			n, err = unix.Pwrite(f.fd, p, off)
		default:
			err = unix.Fsync(f.fd)
		}
		if err == unix.EINTR {
			continue
		}
		return max(n, 0), err
	}
}

// checkOpen fails with os.ErrClosed once the file is closed, for a call
// that would make no request (an empty read or write), as an os.File's
// does.
func (f *File) checkOpen(op string) error {
	if f.closed.Load() {
		return f.pathError(op, os.ErrClosed)
	}
	return nil
}

func (f *File) pathError(op string, err error) error {
	return &os.PathError{Op: op, Path: f.name, Err: err}
}
