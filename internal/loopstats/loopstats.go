// Package loopstats holds the event loops' inner counters, for the
// module's own tools and tests: what a user acts on is ringpoll.Stats.
package loopstats

import "fmt"

// Of returns the counters of each loop of the engine serving x (a
// *ringpoll.Listener, *ringpoll.Server or *ringpoll.Conn), or nil for
// anything else. Package ringpoll sets it.
var Of func(x any) []LoopStats

// LoopStats is a snapshot of one event loop's counters since it started.
// Counters an engine does not use stay zero: io_uring engines count enters,
// SQEs and CQEs; epoll counts epoll_wait calls.
type LoopStats struct {
	// Engine is the loop's engine's name and Loop its index.
	Engine string
	Loop   int
	// EnterSubmit, EnterWait, EnterGetEvents and EnterWakeSQ split the
	// io_uring_enter calls by purpose: submit only; submit and wait for a
	// completion (the loop sleeps); run deferred completions or flush an
	// overflowed CQ with nothing to submit; wake an SQPOLL thread.
	EnterSubmit, EnterWait, EnterGetEvents, EnterWakeSQ uint64
	// Parks counts the times an io_uring loop that does not keep a thread
	// (the default; see docs/ARCHITECTURE.md) waited for completions in
	// Go's poller.
	Parks uint64
	// SendsNow counts the sends such a loop, about to park with one send
	// and nothing else to submit, made itself with a system call rather
	// than through its ring (docs/ARCHITECTURE.md, "Waiting").
	SendsNow uint64
	// Naps counts the times such a loop, with requests coming close
	// together, connections whose handlers or readers run on goroutines,
	// and a Go processor to spare (GOMAXPROCS above the loops keeping
	// one), waited for the next in io_uring_enter instead,
	// keeping its processor for at most 10 ms (docs/ARCHITECTURE.md,
	// "Threads: parked loops"). Each is also an EnterWait.
	Naps uint64
	// BusyPolls counts the times an idle io_uring loop polled for work
	// before it slept (WithBusyPoll), and BusyPollHits those in which
	// work came while it polled: a sleep and a wake-up saved each.
	BusyPolls, BusyPollHits uint64
	// ThreadMoves counts the turns such a loop found itself on another
	// OS thread than the turn before. The input requests it armed on the
	// old thread are armed anew once it stays on the new one.
	ThreadMoves uint64
	// EpollWaits counts epoll_wait calls.
	EpollWaits uint64
	// SQEs and CQEs count submission entries queued and completions
	// reaped.
	SQEs, CQEs uint64
	// Wakeups counts the times another goroutine woke the sleeping loop.
	Wakeups uint64
	// ENOBUFS counts multishot receives ended because every provided
	// buffer was in use (the data waited in the socket; see Rearms).
	ENOBUFS uint64
	// CQOverflows counts loop turns that found completions parked in the
	// kernel because the CQ ring was full (none is lost).
	CQOverflows uint64
	// Rearms counts multishot requests (recv, poll, accept) armed again
	// after they ended.
	Rearms uint64
	// InputCancels counts input requests (multishot recv or poll) that a
	// cancel ended: input paused at the high-water mark where the kernel
	// has no recv byte limit, and connections closing.
	InputCancels uint64
	// InputMoves counts input requests cancelled and armed anew because
	// the loop had moved to another thread (ThreadMoves).
	InputMoves uint64
	// CancelRetries counts cancels of input requests sent again because
	// the request went on after the first reported success.
	CancelRetries uint64
	// Accepts counts connections a Listener accepted onto the loop, each
	// once its Conn is made (it may be served already).
	Accepts uint64
	// DrainsExpired counts closed connections whose queued output did not
	// reach the peer within the drain timeout (WithDrainTimeout): the rest
	// was dropped and the connection reset. A peer that stops reading causes
	// it; so does a drain timeout too short for a slow reader.
	DrainsExpired uint64
	// BytesIn and BytesOut count bytes the loop received and sent (bytes
	// writers send themselves, on epoll, uring-hybrid and uring-reactor,
	// are not counted).
	BytesIn, BytesOut uint64
	// BuffersOut is the number of provided buffers holding input that
	// readers have not released yet. It is 0 when every connection has
	// released its input or closed.
	BuffersOut int64
	// BuffersRetired counts provided buffers taken out of use for good,
	// because their connection was closed while a reader still held
	// slices of them (without Release): that memory is never reused, so
	// the slices stay valid, and new memory takes its place in the ring.
	// A count that keeps growing means readers that do not call Release
	// before Close; each such buffer costs one allocation.
	BuffersRetired uint64
	// BuffersShared counts the slices of input that Writer.WriteBinary
	// linked and Flush then queued without a copy: with incrementally
	// consumed receive buffers (WithBufferRing), the reply of an echo goes
	// out of the buffer its request arrived in, which stays out of the
	// ring until that send completed.
	BuffersShared uint64
	// BuffersCopied counts receives copied out of their provided buffer,
	// which went straight back to the ring, because their connection
	// already pinned its share of the ring (a quarter; less once most of
	// it is out) with input it had not released or not read yet. A reader
	// that holds input without Release, or reads slowly, so costs a copy
	// of its own input and never stalls the loop's other connections.
	BuffersCopied uint64
	// Sendfiles and SendfileBytes count the sendfile(2) calls that
	// Conn.ReadFrom (io.Copy from a file) and Conn.SendFile made into this
	// loop's connections, and the bytes they moved; Splices and
	// SpliceBytes the same for ReadFrom's splice(2) out of a pipe into
	// them (the splices that fill the pipe are not counted). These and
	// the counters below are updated by the goroutines that call ReadFrom
	// and SendFile, not by the loop.
	Sendfiles, SendfileBytes, Splices, SpliceBytes uint64
	// SendStalls counts the times a zero-copy ReadFrom or SendFile found
	// its socket full, and then waited for room; a ReadFrom in a handler
	// inline on the loop, which may not wait, copies the rest through the
	// output queue instead, and SendCopied counts those bytes.
	SendStalls, SendCopied uint64
	// ReadFromCopied counts the bytes ReadFrom copied through Write
	// because their source had no zero-copy path.
	ReadFromCopied uint64
}

// Enters returns the io_uring_enter calls of every purpose.
func (s LoopStats) Enters() uint64 {
	return s.EnterSubmit + s.EnterWait + s.EnterGetEvents + s.EnterWakeSQ
}

// CQEsPerEnter returns the completions reaped per io_uring_enter call.
func (s LoopStats) CQEsPerEnter() float64 {
	if n := s.Enters(); n > 0 {
		return float64(s.CQEs) / float64(n)
	}
	return 0
}

// String formats the counters on one line, for logs.
func (s LoopStats) String() string {
	return fmt.Sprintf("engine=%s loop=%d enter(submit=%d wait=%d getevents=%d wakesq=%d) parks=%d sends_now=%d naps=%d busy_polls=%d busy_poll_hits=%d thread_moves=%d epoll_wait=%d sqes=%d cqes=%d cqes/enter=%.2f wakeups=%d enobufs=%d cq_overflows=%d rearms=%d input_cancels=%d input_moves=%d cancel_retries=%d accepts=%d drains_expired=%d bytes_in=%d bytes_out=%d buffers_out=%d buffers_retired=%d sendfiles=%d sendfile_bytes=%d splices=%d splice_bytes=%d send_stalls=%d send_copied=%d readfrom_copied=%d buffers_shared=%d buffers_copied=%d",
		s.Engine, s.Loop, s.EnterSubmit, s.EnterWait, s.EnterGetEvents, s.EnterWakeSQ, s.Parks, s.SendsNow, s.Naps, s.BusyPolls, s.BusyPollHits, s.ThreadMoves, s.EpollWaits,
		s.SQEs, s.CQEs, s.CQEsPerEnter(), s.Wakeups, s.ENOBUFS, s.CQOverflows, s.Rearms, s.InputCancels, s.InputMoves, s.CancelRetries, s.Accepts, s.DrainsExpired,
		s.BytesIn, s.BytesOut, s.BuffersOut, s.BuffersRetired, s.Sendfiles, s.SendfileBytes, s.Splices, s.SpliceBytes, s.SendStalls, s.SendCopied, s.ReadFromCopied, s.BuffersShared, s.BuffersCopied)
}
