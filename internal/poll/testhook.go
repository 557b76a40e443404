package poll

import "sync/atomic"

// HookPoint names a place in the library where a test may stop the
// goroutine that reached it, to force an interleaving that the scheduler
// would produce only now and then (in the manner of the hooks of Go's
// net/http tests). A hook runs only while a test has set one; otherwise a
// point costs one atomic load.
type HookPoint uint8

// The hook points. Each says which goroutine reaches it and what has just
// happened there.
const (
	// HookNone is no point; tests use it as a zero value.
	HookNone HookPoint = iota
	// HookDrainExpired: the loop found that fd's drain deadline passed
	// with output still queued, and is about to tear the connection down.
	HookDrainExpired
	// HookOutputDrained: the loop's send emptied fd's output queue, and
	// it is about to hand output back to writers (or finish a close).
	HookOutputDrained
	// HookCloseQueued: Close saw output queued and handed the connection
	// to the loop to drain.
	HookCloseQueued
	// HookInputLinked: the loop linked received bytes into fd's input
	// (or ended it) and is about to tell the reader and run
	// Hooks.InputArrived (FD.InputReady).
	HookInputLinked
	// HookHandlerReturned: a Server's handler returned for fd, and the
	// Server is about to release its input and decide what comes next.
	HookHandlerReturned
	// HookShutdownLooked: Server.Shutdown looked at fd on one of its
	// rounds (and began its half-close if it found it quiet), and goes
	// on to the next connection.
	HookShutdownLooked
	// HookShutdownQuiet: Server.Shutdown found fd quiet (no handler
	// running) and is about to half-close it.
	HookShutdownQuiet
	// HookFileReadIssue: a File's Read at the file's position is about to
	// issue its read (hand it to a loop's ring, or call read(2) on
	// epoll), on the reader's goroutine; fd is nil.
	HookFileReadIssue
	// HookFileReadWait: a File's Read at the file's position found
	// another Read of the same File in progress and is about to wait for
	// it to end, on the reader's goroutine; fd is nil.
	HookFileReadWait
	// HookLoopYielded: a loop that stayed awake too long (Awake) is
	// about to yield its P; fd is nil.
	HookLoopYielded
	// HookPacketShutdownWaits: PacketServer.Shutdown has stopped its
	// readers and is about to wait for the handlers running, on
	// Shutdown's goroutine; fd is nil.
	HookPacketShutdownWaits
	// HookPacketServing: PacketServer.Serve has taken its sockets (Addr
	// answers) and started their readers, on Serve's goroutine; fd is
	// nil.
	HookPacketServing
	// HookBatchRecv: a ReadBatch, past its deadline check, is about to
	// call recvmmsg(2), on the reader's goroutine; fd is nil.
	HookBatchRecv
	// HookInputWait: a reader found too little input and is about to
	// wait for more (or fail if it may not wait), on its goroutine.
	HookInputWait
	// HookReadLeft: an epoll loop left a read of fd to its blocked
	// reader (ReadOrLeave) and is about to tell it.
	HookReadLeft
	// HookSelfRead: a blocked reader took the read the loop left it and
	// is about to read the socket, on the reader's goroutine.
	HookSelfRead
	// HookSendWantsWritable: a zero-copy send found the socket full and
	// is about to say it waits for room (asking its loop to watch, the
	// first time: Loop.WatchWritable), then to wait, or to try once more
	// if the loop heard an edge since its call began; on the writer's
	// goroutine.
	HookSendWantsWritable
	// HookWritableEdge: the loop heard fd's socket become writable and is
	// about to look whether a zero-copy send waits for that
	// (FD.NoteWritable).
	HookWritableEdge
)

// testHook is the hook a test set, or nil.
var testHook atomic.Pointer[func(HookPoint, *FD)]

// SetTestHook makes f run at every hook point, on the goroutine that
// reached it, with the connection concerned (nil where there is none),
// until the returned function restores the hook that was set before.
// Tests only: f must let every goroutine other than the one it means to
// stop go on at once, since every connection of the process reaches the
// points.
func SetTestHook(f func(HookPoint, *FD)) (restore func()) {
	old := testHook.Swap(&f)
	return func() { testHook.Store(old) }
}

// hook runs the test hook, if any, at point p for fd.
func hook(p HookPoint, fd *FD) {
	if h := testHook.Load(); h != nil {
		(*h)(p, fd)
	}
}

// Hook runs the test hook, if any, at point p for fd: for the engines and
// the root package, whose points are named here too.
func Hook(p HookPoint, fd *FD) { hook(p, fd) }
