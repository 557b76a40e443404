package poll

import "sync/atomic"

// Stats counts one loop's work. The loop goroutine updates most counters;
// Wakeups are counted by the goroutines that wake it. Any goroutine may read
// them. Counters an engine has no use for stay zero.
type Stats struct {
	// EnterSubmit counts io_uring_enter calls that only submitted.
	EnterSubmit atomic.Uint64
	// EnterWait counts io_uring_enter calls that waited for completions.
	EnterWait atomic.Uint64
	// EnterGetEvents counts io_uring_enter calls made only to run deferred
	// completions or flush a CQ overflow, with nothing to submit.
	EnterGetEvents atomic.Uint64
	// EnterWakeSQ counts io_uring_enter calls that woke an SQPOLL thread.
	EnterWakeSQ atomic.Uint64
	// Parks counts waits of an io_uring loop in Go's poller.
	Parks atomic.Uint64
	// SendsNow counts sends a parked loop made itself, as a system call,
	// rather than through its ring, before it parked.
	SendsNow atomic.Uint64
	// Naps counts the waits of a parked io_uring loop in io_uring_enter
	// on its P (uringp's nap.go).
	Naps atomic.Uint64
	// BusyPolls counts the times an idle io_uring loop polled before it
	// slept (WithBusyPoll), and BusyPollHits those in which work came
	// while it polled, so that it did not sleep.
	BusyPolls, BusyPollHits atomic.Uint64
	// ThreadMoves counts the turns a parked io_uring loop found itself on
	// another thread than the turn before.
	ThreadMoves atomic.Uint64
	// PollWaits counts epoll_wait calls.
	PollWaits atomic.Uint64
	// SQEs counts submission queue entries submitted.
	SQEs atomic.Uint64
	// CQEs counts completions reaped.
	CQEs atomic.Uint64
	// Wakeups counts wake-up signals sent to a sleeping loop.
	Wakeups atomic.Uint64
	// ENOBUFS counts multishot receives ended by an empty buffer ring.
	ENOBUFS atomic.Uint64
	// CQOverflows counts loop turns that found the CQ overflowed.
	CQOverflows atomic.Uint64
	// Rearms counts multishot requests armed again after they ended.
	Rearms atomic.Uint64
	// InputCancels counts input requests a cancel ended, to pause input
	// or to close.
	InputCancels atomic.Uint64
	// InputMoves counts input requests cancelled to be armed anew from
	// the loop's current thread.
	InputMoves atomic.Uint64
	// CancelRetries counts cancels of input requests sent again because
	// the first was lost.
	CancelRetries atomic.Uint64
	// Accepts counts connections a Listener accepted onto the loop.
	Accepts atomic.Uint64
	// DrainsExpired counts closed connections whose queued output the
	// drain timeout cut short: the rest was dropped and the connection
	// reset (FD.ExpireDrain).
	DrainsExpired atomic.Uint64
	// BytesIn and BytesOut count payload bytes received and sent by the
	// loop (bytes writers send themselves are not counted).
	BytesIn, BytesOut atomic.Uint64
	// BuffersOut is the number of provided buffers the kernel filled
	// that their readers have not released yet. A released buffer goes
	// back to the ring at the loop's next turn.
	BuffersOut atomic.Int64
	// BuffersRetired counts provided buffers taken out of use for good:
	// their connection was destroyed while a reader still held slices of
	// them, so their memory is never handed out again, and new memory
	// takes their place in the ring.
	BuffersRetired atomic.Uint64
	// BuffersShared counts output slices queued straight from a receive
	// buffer, kept out of the ring by a reference of their own, where
	// they would have been copied (Sharer).
	BuffersShared atomic.Uint64
	// BuffersCopied counts receives copied out of their provided buffer,
	// which went back to the ring at once, because their connection
	// already pinned its share of the ring (FD.InputRef).
	BuffersCopied atomic.Uint64

	// The zero-copy sends of FD.SendFrom, made by user goroutines on the
	// loop's connections.

	// Sendfiles and SendfileBytes count sendfile calls and the bytes they
	// moved.
	Sendfiles, SendfileBytes atomic.Uint64
	// Splices and SpliceBytes count splice calls from a pipe into a
	// connection and the bytes they moved.
	Splices, SpliceBytes atomic.Uint64
	// SendStalls counts the times a zero-copy send found the socket full
	// (it then waits for room, or, on an FD that may not wait, copies
	// the rest through the output queue); SendCopied counts the bytes so
	// copied.
	SendStalls, SendCopied atomic.Uint64
	// ReadFromCopied counts bytes that ReadFrom copied through Write
	// because their source had no zero-copy path (FD.NoteCopied).
	ReadFromCopied atomic.Uint64
}
