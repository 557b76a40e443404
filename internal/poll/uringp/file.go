//go:build linux

package uringp

import "github.com/ringpoll/ringpoll/internal/uring"

// File operations.
const (
	FileRead uint8 = iota
	FileWrite
	FileSync
)

// FileOp is one read, write or sync of a file that a goroutine hands to a
// loop, which submits it on its ring; the goroutine sleeps on a channel,
// not in a system call, until the completion comes. Buf must stay
// untouched until Run returns, which it does only after the request's
// final completion, cancelled or not.
type FileOp struct {
	Op  uint8
	Fd  int
	Buf []byte
	Off int64 // -1: at the file's position
	Res int32 // bytes, or -errno
	// MayBlock: the file may make the enter that issues the request
	// sleep (it lacks FMODE_NOWAIT; see enter).
	MayBlock bool

	done      chan struct{}
	slot, gen uint32
}

// FileLoop is the loop a file's requests go to.
type FileLoop struct{ l *loop }

// FileLoop returns the next loop, for a file's requests.
func (e *Engine) FileLoop() FileLoop { return FileLoop{e.pick()} }

// Run submits op and waits for its completion. If stop is closed first,
// it cancels the request in the ring (ASYNC_CANCEL) and still waits for
// its final completion, whose result may be -ECANCELED or the request's
// own if it finished first. It returns op.Res.
func (f FileLoop) Run(stop <-chan struct{}, op *FileOp) int32 {
	op.done = make(chan struct{}, 1)
	f.l.post(task{kind: taskFile, f: op})
	select {
	case <-op.done:
		return op.Res
	case <-stop:
	}
	f.l.post(task{kind: taskFileCancel, f: op})
	<-op.done
	return op.Res
}

// submitFile gives op a slot and queues its SQE. Loop only.
func (l *loop) submitFile(op *FileOp) {
	if n := len(l.freeFileSlots); n > 0 {
		op.slot = l.freeFileSlots[n-1]
		l.freeFileSlots = l.freeFileSlots[:n-1]
	} else {
		op.slot = uint32(len(l.fileOps))
		l.fileOps = append(l.fileOps, nil)
		l.fileGens = append(l.fileGens, 0)
	}
	l.fileOps[op.slot] = op
	op.gen = l.fileGens[op.slot]
	l.files++
	if op.MayBlock {
		// The request may sleep in the enter that issues it, or in one
		// that runs its retry (enter): until the last such request
		// completes, enters tell the scheduler.
		l.sleepyFiles++
		l.mayBlock = true
	}
	sqe := l.getSQE()
	switch op.Op {
	case FileRead:
		sqe.PrepReadAt(op.Fd, op.Buf, op.Off)
	case FileWrite:
		sqe.PrepWriteAt(op.Fd, op.Buf, op.Off)
	case FileSync:
		sqe.PrepFsync(op.Fd, 0)
	}
	sqe.UserData = userData(kindFile, op.gen, op.slot)
}

// cancelFile cancels op if it is still in flight. Loop only.
func (l *loop) cancelFile(op *FileOp) {
	if int(op.slot) < len(l.fileOps) && l.fileOps[op.slot] == op {
		l.cancel(userData(kindFile, op.gen, op.slot))
	}
}

// fileDone completes the request in slot. Loop only.
func (l *loop) fileDone(gen, slot uint32, cqe *uring.CQE) {
	if int(slot) >= len(l.fileOps) || l.fileGens[slot] != gen || l.fileOps[slot] == nil {
		return
	}
	op := l.fileOps[slot]
	l.fileOps[slot] = nil
	l.fileGens[slot] = (gen + 1) & genMask
	l.freeFileSlots = append(l.freeFileSlots, slot)
	l.files--
	if op.MayBlock {
		l.sleepyFiles--
		l.mayBlock = l.sleepyFiles > 0
	}
	op.Res = cqe.Res
	op.done <- struct{}{}
}
