package poll

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// FD is one connection's state, shared by its loop and its user goroutines.
//
// Lifecycle:
//
//	open ──peer FIN──> input ended (Read: buffered bytes, then io.EOF; Write still works)
//	open ──Close──> closing (writers fail with ErrClosed; the loop drains output,
//	                bounded by DrainTimeout, then removes the socket)
//	closing ──loop──> finalized (descriptor closed, Done closed, OnFinalize run)
//
// Locks, in the order they may be taken: wmu (one writer at a time), then
// outMu; inMu alone; sysMu (read-locked around every syscall a user goroutine
// makes on Sysfd, write-locked by Finalize, so the descriptor number is never
// reused under a running syscall).
type FD struct {
	// Sysfd is the non-blocking socket.
	Sysfd int
	// DirectWrite lets writers send from their own goroutine (see the
	// package documentation). Set before Register.
	DirectWrite bool
	// Loop is the loop serving this FD; Engine.Register sets it.
	Loop Loop
	// OnInput, if set, runs on the loop goroutine after new input arrived
	// or input ended. It must not block. Set before Register.
	OnInput func()
	// OnFinalize, if set, runs once after the descriptor is closed.
	OnFinalize func()
	// NoBlock makes the user side never wait, for an FD whose user runs
	// on the loop goroutine: reads that need more input than has arrived
	// fail with ErrWouldBlock (after asking the loop for that input),
	// writes queue past the output high-water mark, and CloseWrite with
	// output queued fails with ErrWouldBlock. Set before Register.
	NoBlock bool
	// OnDrained, if set, runs on the loop goroutine each time sent output
	// leaves the queue at or under the output low-water mark. It must not
	// block, and reports whether it may have queued output. Set before
	// Register.
	OnDrained func() bool
	// Private is the engine's per-FD state, set by Register.
	Private any

	cfg Config

	inMu      sync.Mutex
	in        *buf.LinkBuffer
	inErr     error // io.EOF or a read error; sticky
	inPaused  bool  // the loop stopped reading (backpressure)
	inWant    int   // bytes a blocked reader needs held
	lastSpace int   // length of the last InputSpace (loop only)
	readable  token

	wmu      sync.Mutex
	outMu    sync.Mutex
	out      *buf.LinkBuffer
	loopOwns bool        // the loop is sending out; writers must queue
	outFull  atomic.Bool // out.Len() >= OutputHighWater; stored under outMu (noteOut)
	outErr   error       // sticky send error
	wrClosed bool
	writable token
	iov      [][]byte    // writer scratch, under wmu
	slice    sliceSource // writer scratch, under wmu
	iovecs   *Iovecs     // writer scratch, under wmu; made on first gathered send

	sysMu     sync.RWMutex
	sysClosed bool

	closing   event // Close was called
	finalized event // the descriptor is closed

	rd, wd     deadline
	lastActive atomic.Int64 // monotonic ns, for the idle timeout
	idleTimer  atomic.Pointer[time.Timer]
}

// NewFD returns the FD for the non-blocking socket sysfd.
func NewFD(sysfd int, cfg Config) *FD {
	return &FD{Sysfd: sysfd, cfg: cfg, in: buf.New(), out: buf.New()}
}

// StartIdleTimer arms the idle timeout, if the configuration has one. Call
// it once, after Engine.Register succeeded: the timer closes fd through
// fd.Loop, which Register sets, and an FD that was never registered must
// never fire it.
func (fd *FD) StartIdleTimer() {
	if fd.cfg.IdleTimeout <= 0 {
		return
	}
	// Published before it can fire: checkIdle loads it atomically.
	fd.touch()
	t := time.AfterFunc(time.Duration(1<<62), fd.checkIdle)
	fd.idleTimer.Store(t)
	t.Reset(fd.cfg.IdleTimeout)
}

// Close starts closing fd: blocked and later reads and writes fail with
// ErrClosed, and the loop drains queued output and closes the socket. It
// returns ErrClosed if fd was already closed. Safe for concurrent use.
func (fd *FD) Close() error {
	if !fd.closing.fire() {
		return ErrClosed
	}
	if t := fd.idleTimer.Load(); t != nil {
		t.Stop()
	}
	fd.Loop.Close(fd)
	return nil
}

// Closing reports whether Close has been called.
func (fd *FD) Closing() bool { return fd.closing.fired() }

// Done returns a channel that is closed once the descriptor is closed.
func (fd *FD) Done() <-chan struct{} { return fd.finalized.done() }

// Finalize closes the descriptor. Only the loop calls it, once, after every
// operation on the socket has ended. Input bytes a reader may still hold are
// left to the garbage collector rather than recycled, so a slice from Next
// never sees another connection's data.
func (fd *FD) Finalize() {
	fd.sysMu.Lock()
	fd.sysClosed = true
	syscall.Close(fd.Sysfd)
	fd.sysMu.Unlock()

	fd.outMu.Lock()
	fd.out.Discard()
	fd.noteOut()
	fd.loopOwns = false
	fd.outMu.Unlock()
	fd.writable.signal()
	fd.readable.signal()

	fd.finalized.fire()
	if fd.OnFinalize != nil {
		fd.OnFinalize()
	}
}

// DiscardInput frees all buffered input, returning memory the kernel
// filled (FD.InputRef) to its owner. A loop whose input memory is recycled
// (io_uring provided buffers) calls it before Finalize: after Close, slices
// from Next and Peek are invalid.
func (fd *FD) DiscardInput() {
	fd.inMu.Lock()
	fd.in.Discard()
	fd.inMu.Unlock()
}

// LimitInput lowers the input high-water mark to at most n bytes (the low
// mark to half of it), for an engine whose input memory is a shared pool.
// Call it before Register.
func (fd *FD) LimitInput(n int) {
	if n < fd.cfg.InputHighWater {
		fd.cfg.InputHighWater = n
		fd.cfg.InputLowWater = n / 2
	}
}

// SetReadDeadline sets the deadline for reads; the zero time clears it.
// Safe for concurrent use.
func (fd *FD) SetReadDeadline(t time.Time) { fd.rd.set(t) }

// SetWriteDeadline sets the deadline for writes; the zero time clears it.
// Safe for concurrent use.
func (fd *FD) SetWriteDeadline(t time.Time) { fd.wd.set(t) }

// Control runs f with the descriptor held open, or returns ErrClosed.
// Safe for concurrent use.
func (fd *FD) Control(f func(sysfd int) error) error {
	fd.sysMu.RLock()
	defer fd.sysMu.RUnlock()
	if fd.sysClosed {
		return ErrClosed
	}
	return f(fd.Sysfd)
}

// clock is the origin of the monotonic timestamps in lastActive.
var clock = time.Now()

func (fd *FD) touch() {
	if fd.cfg.IdleTimeout > 0 {
		fd.lastActive.Store(int64(time.Since(clock)))
	}
}

// checkIdle runs on the idle timer: close fd if nothing moved for the idle
// timeout, else wait for the rest of it.
func (fd *FD) checkIdle() {
	idle := time.Since(clock) - time.Duration(fd.lastActive.Load())
	if left := fd.cfg.IdleTimeout - idle; left > 0 {
		fd.idleTimer.Load().Reset(left)
		return
	}
	fd.Close()
}
