package ringpoll

import (
	"errors"
	"net"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// Every error a ringpoll call returns is one of these values, or one of
// net.ErrClosed, os.ErrDeadlineExceeded and io.EOF as in package net, or
// errors.ErrUnsupported (a RawConn's Read and Write, every call off
// Linux), or wraps one of them (test with errors.Is). The exception, as in
// package net, is a call given an argument no correct program passes (a
// nil Handler, a negative count): its error matches no exported value and
// its message names the call. Errors of I/O on a connection or listener
// come in a *net.OpError, as net's do; a syscall's errno is in an
// *os.SyscallError inside it.
var (
	// ErrServerClosed is returned by Serve after Shutdown, and by a
	// Server's setup of a connection that arrives while it shuts down. It
	// is the cause (context.Cause) of the handlers' context, which
	// Shutdown cancels, and is matched by the error of a handler's read
	// that would wait for input once Shutdown began (see Handler).
	ErrServerClosed = errors.New("ringpoll: Server closed")

	// ErrEngineUnavailable is wrapped by the error of Listen, Dial and
	// NewServer when the engine asked for cannot run here; the error
	// names the reason (see UringStatus).
	ErrEngineUnavailable = errors.New("ringpoll: engine not available")

	// ErrInvalidOption is wrapped by the error of a call that takes
	// options (Listen, Dial, NewServer, the packet and file calls) when
	// an option is malformed (the error names it and its valid range), or
	// is one the call does not take or the engine named by WithEngine
	// does not use (the error names the option and the call, and says
	// where the option applies; see Option); and by ParseEngine's for a
	// name that is no engine's (and so by a bad RINGPOLL_ENGINE).
	ErrInvalidOption = errors.New("ringpoll: invalid option")

	// ErrBufferFull is returned (in a *net.OpError) by Reader.Until when
	// the input high-water mark of bytes holds no delimiter: a peer cannot
	// make it buffer without bound.
	ErrBufferFull = poll.ErrBufferFull

	// ErrWriteClosed is returned (in a *net.OpError) by a write after
	// CloseWrite. It matches syscall.EPIPE too, which is what a write
	// after shutdown(SHUT_WR) returns on a net.Conn.
	ErrWriteClosed = poll.ErrWriteClosed

	// ErrWouldBlock is matched (errors.Is) by the error of a call that
	// would have to wait, on a connection whose handler runs inline on the
	// event loop (WithInlineHandler). A handler that returns it is called
	// again when more input arrives.
	ErrWouldBlock = poll.ErrWouldBlock

	// ErrIdleTimeout is returned (in a *net.OpError) by the calls on a
	// connection that its idle timer closed (WithIdleTimeout): reads,
	// writes, deadlines, Close. The connection is closed as if by Close,
	// so the error matches net.ErrClosed too (errors.Is).
	ErrIdleTimeout error = idleTimeoutError{}
)

// The errors of calls given arguments no correct program passes, or made
// where no correct program makes them: not
// exported, as net exports none for its own, since a caller fixes the call
// rather than tests for them. Each message names the call.
var (
	// errNilHandler is returned by NewServer for a nil Handler.
	errNilHandler = errors.New("ringpoll: NewServer: nil Handler")

	// errNegativeCount is wrapped by the error of a Reader or Writer call
	// (and SendFile) given a negative length or offset.
	errNegativeCount = errors.New("ringpoll: negative count")

	// errBeyondWritten is wrapped by the error of Writer.MallocAck and
	// Writer.WriteDirect (and LinkBuffer's) given a count larger than
	// MallocLen, the bytes written since the last Flush.
	errBeyondWritten = errors.New("ringpoll: count beyond the bytes written since the last Flush")

	// errListenerMismatch is wrapped by Serve's error for a listener it
	// cannot serve: one not from Listen, or one on another engine than
	// the Server's WithEngine, or made with other engine options
	// (WithLoops, WithBufferRing...) than the Server was given.
	errListenerMismatch = errors.New("ringpoll: the listener does not fit the Server")

	// errInline is wrapped by the error of a call that waits for the
	// event loop, made by a handler that runs inline on that loop
	// (WithInlineHandler): Conn.SendFile. Make the call from a pooled
	// handler (the default) or another goroutine.
	errInline = errors.New("ringpoll: the call would wait for the loop its inline handler runs on")
)

type idleTimeoutError struct{}

func (idleTimeoutError) Error() string {
	return "ringpoll: connection closed after its idle timeout"
}

func (idleTimeoutError) Is(target error) bool { return target == net.ErrClosed }
