package poll

import (
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// FD is one connection's state, shared by its loop and its user goroutines.
// Its lifetime (who may still touch the socket and the buffers, and when
// they are recycled) is one counted word; see lifetime.go.
//
// Locks, in the order they may be taken: wmu (one writer at a time), then
// outMu; inMu alone. None is held across a wait.
type FD struct {
	// Sysfd is the non-blocking socket.
	Sysfd int
	// DirectWrite lets writers send from their own goroutine (see the
	// package documentation). Set before Register.
	DirectWrite bool
	// NoBlock makes the user side never wait, for an FD whose user runs
	// on the loop goroutine: reads that need more input than has arrived
	// fail with ErrWouldBlock (after asking the loop for that input),
	// writes queue past the output high-water mark, and CloseWrite with
	// output queued fails with ErrWouldBlock. Set before Register.
	NoBlock bool

	// The flags, together so that they share a word; each is guarded as
	// its group below says.
	inPaused bool        // the loop stopped reading (backpressure); inMu
	inHeld   bool        // slices were handed out since the last release (destroy); inMu
	inLent   bool        // WriteTo's writer reads consumed input: nothing is released; inMu
	loopOwns bool        // the loop is sending out; writers must queue; outMu
	wrClosed bool        // outMu
	inBits   inBits      // inStopped (StopWaits), inEnded and the self-read flags (selfread.go); inMu
	outFull  atomic.Bool // out.Held() >= OutputHighWater; stored under outMu (noteOut)
	// inHint is the input buffer's grow hint, kept for the buffer fd
	// takes after giving its own back (inMu).
	inHint int32
	// inLen is in.Len() for Len, which reads it without inMu (a handler
	// asks several times a request): stored under inMu when the length
	// changed (syncLen), -1 while it does not fit.
	inLen atomic.Int32
	// inWant is the bytes a blocked reader needs held (inMu), at most
	// math.MaxInt32 (the high-water marks are int32 too).
	inWant int32

	// Loop is the loop serving this FD; Engine.Register sets it.
	Loop Loop
	// Hooks, if set, are the user's callbacks. Set before Register.
	Hooks Hooks
	// Private is the engine's per-FD record, set by Register (a pointer
	// the engine converts back: one word, where an interface takes two).
	Private unsafe.Pointer

	cfg *Config // shared by the connections of one listener, server or dialer
	// inHigh and inLow are the input marks: the configuration's, unless
	// LimitInput lowered them.
	inHigh, inLow int32

	life atomic.Uint64 // references and state; see lifetime.go
	done event         // fired when the FD is destroyed

	// in and out are nil while empty: an idle FD gives their headers back
	// to buf's pool (releaseInput, OutputSent) and takes new ones when
	// bytes come (input, output).
	inMu    sync.Mutex
	in      *buf.LinkBuffer
	inTotal uint64 // input bytes ever added (InputCommit, InputRef); inMu

	wmu   sync.Mutex
	outMu sync.Mutex
	out   *buf.LinkBuffer
	ws    *writeScratch // under wmu; made by the first write that needs it

	wait atomic.Pointer[waitState] // made on first use: see waitState
	idle atomic.Pointer[idleState] // made by StartIdleTimer, with an idle timeout
}

// waitState is the part of an FD that only a connection whose user
// blocks, sets a deadline or calls Write needs, or one whose send or read
// failed: the waiters' wake-up tokens, the deadlines, Write's source, the
// sticky send error, the read error that ended input. An FD makes it on
// first use, so that a connection served by a handler carries none of it
// (docs/RELIABILITY.md, memory per idle connection). The write scratch stays apart: on epoll a handler's
// replies are sent from its goroutine, which needs the scratch and none of
// this.
type waitState struct {
	readable token
	writable token
	slice    sliceSource               // Write's, under wmu
	dl       atomic.Pointer[deadlines] // made by the first deadline set or waited on
	outErr   error                     // sticky send error; under outMu
	inErr    error                     // the read error that ended input (inEnded), if not io.EOF; under inMu
	// wantOut: a zero-copy send waits for the socket to become writable
	// (Loop.WatchWritable); the loop clears it and signals writable.
	wantOut atomic.Bool
	// watched: the loop was asked to watch for writable edges
	// (Loop.WatchWritable), which it does for good; under wmu.
	watched bool
	// edges counts the writable edges the loop heard (NoteWritable).
	edges atomic.Uint32
}

// inputErr returns why input ended, or nil if it has not. Called with inMu
// held.
func (fd *FD) inputErr() error {
	if fd.inBits&inEnded == 0 {
		return nil
	}
	if w := fd.wait.Load(); w != nil && w.inErr != nil {
		return w.inErr
	}
	return io.EOF
}

// waits returns fd's waitState, making it if need be.
func (fd *FD) waits() *waitState {
	if w := fd.wait.Load(); w != nil {
		return w
	}
	w := new(waitState)
	if fd.wait.CompareAndSwap(nil, w) {
		return w
	}
	return fd.wait.Load()
}

// signalReadable and signalWritable wake a blocked reader or writer, if
// one ever waited.
func (fd *FD) signalReadable() {
	if w := fd.wait.Load(); w != nil {
		w.readable.signal()
	}
}

// NoteWritable tells fd that its socket became writable: a zero-copy
// send waiting for that (SendFrom) goes on. The loop calls it on the
// writable edges it hears (Loop.WatchWritable).
func (fd *FD) NoteWritable() {
	hook(HookWritableEdge, fd)
	if w := fd.wait.Load(); w != nil {
		// Counted before wantOut is looked at, as SendFrom sets wantOut
		// before it looks at the count: one of the two sees the other.
		w.edges.Add(1)
		if w.wantOut.Load() && w.wantOut.Swap(false) {
			w.writable.signal()
		}
	}
}

func (fd *FD) signalWritable() {
	if w := fd.wait.Load(); w != nil {
		w.writable.signal()
	}
}

// idleState is the idle timeout's state, which only FDs configured with one
// carry.
type idleState struct {
	lastActive atomic.Int64 // monotonic ns since clock
	timer      *time.Timer
}

// NewFD returns the FD for the non-blocking socket sysfd. It holds the
// loop's reference from the start, which the loop drops with Detach; an FD
// that was never registered is not destroyed, and its caller closes sysfd.
//
// cfg is shared, not copied: the caller must not change it afterwards.
func NewFD(sysfd int, cfg *Config) *FD {
	fd := &FD{Sysfd: sysfd, cfg: cfg, inHigh: clampMark(cfg.InputHighWater), inLow: clampMark(cfg.InputLowWater)}
	fd.life.Store(lifeSys)
	return fd
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
	st := &idleState{timer: time.AfterFunc(time.Duration(1<<62), fd.checkIdle)}
	st.lastActive.Store(int64(time.Since(clock)))
	fd.idle.Store(st)
	st.timer.Reset(fd.cfg.IdleTimeout)
	if fd.Closing() {
		// Closed before the timer was stored: Close did not see it.
		st.timer.Stop()
	}
}

// Close closes fd: blocked and later reads and writes fail with ErrClosed,
// and no reference can be taken any more. With no output queued, the
// writing side is shut down before Close returns, so the peer reads EOF;
// otherwise the loop sends the queued output first, bounded by the drain
// timeout, as the kernel does for a closed socket's unsent bytes. The loop
// then ends its requests on the socket and the descriptor is closed; the
// buffers are freed once no handler runs, and recycled unless a reader
// still holds slices of them (lifetime.go). It returns
// ErrClosed if fd was already closed. Safe for concurrent use, and it never
// waits, so a handler on the loop may call it.
func (fd *FD) Close() error { return fd.close(0) }

// Abort closes fd as Close does, but gives up on its output: what is
// queued, in fd and in the kernel, is dropped at once rather than drained,
// and the connection is reset (SO_LINGER 0), so that the peer reads
// ECONNRESET instead of a stream cut short that ends like a complete one.
// For a closer that stops waiting on a peer that does not read
// (Server.Shutdown). Safe for concurrent use; it never waits.
func (fd *FD) Abort() error { return fd.close(lifeAbort) }

// close is Close, marking fd with why (lifeIdle, lifeAbort, or 0 for Close) in the
// same update that closes it, so that the first closer alone names the
// cause.
func (fd *FD) close(why uint64) error {
	for {
		old := fd.life.Load()
		if old&lifeClosed != 0 {
			return ErrClosed
		}
		// Closed, and holding a reference of its own until the end.
		if fd.life.CompareAndSwap(old, (old+lifeSys)|lifeClosed|why) {
			break
		}
	}
	if st := fd.idle.Load(); st != nil {
		st.timer.Stop()
	}
	// Blocked readers and writers look again and see Closing.
	fd.signalReadable()
	fd.signalWritable()
	switch {
	case why&lifeAbort != 0:
		resetOnClose(fd.Sysfd) // this call's reference keeps it open
	case fd.Quiet():
		fd.shutWrite()
	}
	fd.Loop.Close(fd)
	fd.put(lifeSys)
	return nil
}

// ExpireDrain is for a loop whose drain of fd's output, after Close, ran
// past the drain deadline: the bytes still queued will never be sent, so
// the connection is to end with a reset (SO_LINGER 0) rather than a FIN,
// and the peer learns that the stream was cut instead of reading a short
// one that looks complete. A Unix socket has no reset: its peer reads EOF.
// The loop calls it before it lets go, while its reference keeps the
// descriptor open, and counts the expiry in stats.
func (fd *FD) ExpireDrain(stats *Stats) {
	hook(HookDrainExpired, fd)
	stats.DrainsExpired.Add(1)
	resetOnClose(fd.Sysfd)
}

// LimitInput lowers the input high-water mark to at most n bytes (the low
// mark to half of it), for an engine whose input memory is a shared pool.
// Call it before Register.
func (fd *FD) LimitInput(n int) {
	if n < int(fd.inHigh) {
		fd.inHigh = clampMark(n)
		fd.inLow = clampMark(n / 2)
	}
}

// SetReadDeadline sets the deadline for reads; the zero time clears it.
// Safe for concurrent use.
func (fd *FD) SetReadDeadline(t time.Time) {
	fd.deadlines().rd.set(t)
	fd.signalReadable() // a reader blocked on its token alone looks again (await)
}

// SetWriteDeadline sets the deadline for writes; the zero time clears it.
// Safe for concurrent use.
func (fd *FD) SetWriteDeadline(t time.Time) {
	fd.deadlines().wd.set(t)
	fd.signalWritable() // likewise for a blocked writer
}

// Control runs f with the descriptor held open, or returns ErrClosed.
// Safe for concurrent use.
func (fd *FD) Control(f func(sysfd int) error) error {
	if !fd.acquire(lifeSys) {
		return ErrClosed
	}
	defer fd.put(lifeSys)
	return f(fd.Sysfd)
}

// clock is the origin of the monotonic timestamps in idleState.
var clock = time.Now()

func (fd *FD) touch() {
	if fd.cfg.IdleTimeout > 0 {
		if st := fd.idle.Load(); st != nil {
			st.lastActive.Store(int64(time.Since(clock)))
		}
	}
}

// checkIdle runs on the idle timer: close fd if nothing moved for the idle
// timeout (IdleClosed then reports it), else wait for the rest of it.
func (fd *FD) checkIdle() {
	st := fd.idle.Load()
	idle := time.Since(clock) - time.Duration(st.lastActive.Load())
	if left := fd.cfg.IdleTimeout - idle; left > 0 {
		st.timer.Reset(left)
		return
	}
	fd.close(lifeIdle)
}

// ExpireIdle closes fd as its idle timer does when the idle timeout
// passed, on a timer goroutine, whatever moved on fd meanwhile and even
// before the timer was started: tests use it to close by the idle timer at
// a moment they choose. It does nothing on an FD without an idle timeout.
func (fd *FD) ExpireIdle() {
	if fd.cfg.IdleTimeout <= 0 {
		return
	}
	if st := fd.idle.Load(); st != nil {
		st.timer.Stop()
	}
	time.AfterFunc(0, func() { fd.close(lifeIdle) })
}

// IdleFor returns how long fd has had no input or output, as its idle
// timer sees it (0 on an FD without an idle timeout or before its timer
// started).
func (fd *FD) IdleFor() time.Duration {
	st := fd.idle.Load()
	if fd.cfg.IdleTimeout <= 0 || st == nil {
		return 0
	}
	return time.Since(clock) - time.Duration(st.lastActive.Load())
}

// clampMark stores a water mark in an FD's 32 bits: a mark of 2 GiB or
// more means the same as 2 GiB for one connection's input.
func clampMark(n int) int32 { return int32(min(n, math.MaxInt32)) }
