// Package poll holds what every ringpoll engine shares: the per-connection
// state (FD), its blocking reader and writer operations, deadlines, and the
// contract an engine's event loop implements.
//
// # The loop contract
//
// An engine runs one or more loops. Each registered FD belongs to exactly one
// loop for its whole life. Two kinds of goroutine touch an FD:
//
//   - the loop goroutine, which alone produces input (FD.InputSpace and
//     FD.InputCommit, or FD.InputRef for memory the kernel filled), records
//     input errors (FD.InputError), sends output that the writers handed over
//     (FD.OutputSlices, FD.OutputSent, FD.OutputError) and finally lets go
//     of the socket (FD.Detach);
//   - user goroutines, which read (Read, Next, Peek, ...) and write (Write,
//     WriteBuffer), set deadlines and call Close.
//
// A Loop receives three requests from user goroutines. Each may be called from
// any goroutine, must not block, and must be acted on by the loop soon even if
// the loop is asleep:
//
//   - Flush(fd): fd's output buffer is non-empty and the loop owns sending it
//     (FD.loopOwns is set). The loop sends until the buffer is empty, waiting
//     for writability as the engine does it (EPOLLOUT, POLL_ADD, a SEND CQE),
//     reporting progress with FD.OutputSent. It keeps at most one send in
//     flight per FD, so bytes go out in order.
//   - Resume(fd): fd's reader consumed input below the low-water mark, or a
//     blocked reader needs more than is buffered. The loop starts reading fd
//     again (epoll: read until EAGAIN; io_uring: re-arm the multishot recv).
//   - Close(fd): the user closed fd. The loop keeps sending queued output until
//     it is empty, a send fails, or fd's drain deadline passes; then it stops
//     every operation on the socket (epoll_ctl DEL; for io_uring: cancel and
//     wait for each op's final CQE) and calls FD.Detach, dropping the
//     reference that kept the descriptor open for it (lifetime.go). A loop
//     never lets go while it has operations in flight, and never touches
//     the FD after Detach.
//
// Input backpressure is the loop's duty: FD.InputCommit and FD.InputRef report
// whether the FD wants more; when they say no, the loop stops reading (epoll:
// it ignores readiness; io_uring: it does not re-arm the recv) until Resume.
//
// Engines whose writers may call send themselves (epoll, uring-reactor,
// uring-hybrid) set FD.DirectWrite before registering: a writer then sends in
// its own goroutine while the loop does not own output, and hands the rest to
// the loop on EAGAIN. Engines that send only from the loop (uring) leave it
// false: every write is queued and the loop is asked to Flush. On every
// engine, FD.SendFrom sends from a file or a pipe with sendfile or splice
// from the user goroutine while the loop does not own output, and waits
// for room when the socket is full (Loop.WatchWritable, fd_send.go).
package poll

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// Loop is the engine side of one event loop, as an FD sees it. See the
// package documentation for the contract.
type Loop interface {
	// Flush asks the loop to send fd's queued output.
	Flush(fd *FD)
	// Resume asks the loop to read fd again.
	Resume(fd *FD)
	// Close asks the loop to drain and close fd.
	Close(fd *FD)
	// Stats returns the loop's counters, which user goroutines also
	// update for the work they do on the loop's connections (FD.SendFrom).
	Stats() *Stats
	// WatchWritable asks the loop to call fd.NoteWritable every time fd's
	// socket becomes writable (at the kernel's writable mark: for TCP,
	// free space at least half of what is queued), from now on, for the
	// connection's life: a zero-copy send that found the socket full
	// waits for that (FD.SendFrom), as net's waits on Go's poller. epoll
	// hears every socket's EPOLLOUT edges from the start; an io_uring
	// loop arms a multishot POLLOUT poll and keeps it; armed after the
	// call, its first check reports a socket that is writable already.
	WatchWritable(fd *FD)
}

// Sharer is implemented by a Loop whose receive buffers can stay out of
// its ring for as long as output needs them: Share returns an owner that
// keeps the buffer holding all of p until the output queue releases it,
// or nil where p is other memory (the writer then copies it). Safe for
// concurrent use.
type Sharer interface {
	Share(p []byte) buf.Owner
}

// Engine is a running instance of one engine: a set of loops.
type Engine interface {
	// Name is the engine's name as ringpoll.ParseEngine spells it.
	Name() string
	// Register attaches fd to one of the engine's loops and starts input.
	// The socket must be non-blocking. On success, fd.Loop is set and the
	// loop will eventually call fd.Detach. Safe for concurrent use.
	Register(fd *FD) error
	// Stats returns the counters of each loop. They stay readable after
	// Stop.
	Stats() []*Stats
	// Stop ends the engine's loops. The caller guarantees that every FD
	// registered with it has been destroyed and that Register is not
	// called again. It does not block, so a loop may call it.
	Stop()
}

// Hooks are an FD user's callbacks. One interface value, where three
// funcs would be three closures, keeps them out of an idle connection's
// memory (the user implements them on the state it has anyway).
type Hooks interface {
	// InputArrived runs on the loop goroutine after new input arrived or
	// input ended. It must not block.
	InputArrived()
	// OutputDrained runs on the loop goroutine each time sent output
	// leaves the queue at or under the output low-water mark, for an FD
	// whose user runs on the loop (NoBlock) only: the others' users wait
	// on the FD itself, and a call per send would read the user's state
	// for nothing. It must not block, and reports whether it may have
	// queued output.
	OutputDrained() bool
	// Finalized runs once, after the descriptor is closed and the buffers
	// freed, on the goroutine that let go last.
	Finalized()
}

// Config holds the per-connection limits an FD is created with.
type Config struct {
	// InputHighWater is the number of input bytes (buffered or consumed but
	// not released) at which the loop stops reading the socket.
	InputHighWater int
	// InputLowWater is the level under which reading resumes.
	InputLowWater int
	// OutputHighWater is the number of output bytes the queue holds (unsent,
	// or sent from a node not yet freed) above which writers block.
	OutputHighWater int
	// OutputLowWater is the level under which blocked writers continue.
	OutputLowWater int
	// DrainTimeout bounds how long Close keeps sending queued output.
	DrainTimeout time.Duration
	// IdleTimeout closes a connection with no input or output for that long
	// (0: never).
	IdleTimeout time.Duration
}

// Errors returned by FD operations. The public package wraps them in
// *net.OpError where net does.
var (
	// ErrClosed is returned for an FD closed by this side. It is
	// net.ErrClosed itself, so errors.Is works without wrapping.
	ErrClosed = net.ErrClosed
	// ErrDeadline is returned when a deadline passes. It is
	// os.ErrDeadlineExceeded itself.
	ErrDeadline = os.ErrDeadlineExceeded
	// ErrBufferFull is returned by Until when the input high-water mark of
	// bytes holds no delimiter.
	ErrBufferFull = errors.New("ringpoll: input high-water mark reached without the delimiter")
	// ErrWriteClosed is returned by writes after CloseWrite. It matches
	// syscall.EPIPE too, as such a write on a net.Conn fails with it.
	ErrWriteClosed error = writeClosedError{}
	// ErrStopped is returned, after StopWaits, by a read that needs more
	// input than has arrived.
	ErrStopped = errors.New("ringpoll: reads no longer wait for input")
	// ErrWouldBlock is returned, on an FD with NoBlock set, by a read
	// that needs more input than has arrived and by a CloseWrite that
	// would wait for output to drain.
	ErrWouldBlock = errors.New("ringpoll: the call would block the event loop")
)

type writeClosedError struct{}

func (writeClosedError) Error() string        { return "ringpoll: write after CloseWrite" }
func (writeClosedError) Is(target error) bool { return target == syscall.EPIPE }
