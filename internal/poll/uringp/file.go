//go:build linux

package uringp

import (
	"context"
	"os"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// File operations.
const (
	FileRead uint8 = iota
	FileWrite
	FileSync
	FileDatasync
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
	// sleep (it lacks FMODE_NOWAIT; see uring.Ring.SetMayBlock).
	MayBlock bool

	done      chan struct{}
	slot, gen uint32
	fixed     uint16 // 1 + the registered buffer slot Buf is in; 0: none
}

// FileLoop is the loop a file's requests go to.
type FileLoop struct{ l *loop }

// FileLoop returns the next loop, for a file's requests.
func (e *Engine) FileLoop() FileLoop { return FileLoop{e.pick()} }

// Run submits op and waits for its completion. If ctx ends or stop is
// closed first, it cancels the request in the ring (ASYNC_CANCEL) and
// still waits for its final completion, whose result may be -ECANCELED
// or the request's own if it finished first. It returns op.Res.
//
// With registered file buffers (Tuning.FileBuffers), a read or write of
// up to FileBufferSize bytes goes through a free slot of them: a write's
// bytes are copied in first, a read's copied out once it completed, and
// the slot is free again only after the final completion.
func (f FileLoop) Run(ctx context.Context, stop <-chan struct{}, op *FileOp) int32 {
	b := f.l.fbufs
	user := op.Buf
	slot := -1
	if b != nil && (op.Op == FileRead || op.Op == FileWrite) && len(user) > 0 && len(user) <= FileBufferSize {
		select {
		case s := <-b.free:
			slot = int(s)
		default: // every slot busy: the caller's memory, as without them
		}
	}
	if slot >= 0 {
		op.Buf = b.slot(slot)[:len(user)]
		op.fixed = uint16(slot) + 1
		if op.Op == FileWrite {
			copy(op.Buf, user)
		}
	}
	res := f.run(ctx, stop, op)
	if slot >= 0 {
		if op.Op == FileRead && res > 0 {
			copy(user, op.Buf[:res])
		}
		op.Buf, op.fixed = user, 0
		b.free <- uint16(slot)
	}
	return res
}

func (f FileLoop) run(ctx context.Context, stop <-chan struct{}, op *FileOp) int32 {
	op.done = make(chan struct{}, 1)
	f.l.post(task{kind: taskFile, f: op})
	select {
	case <-op.done:
		return op.Res
	case <-ctx.Done():
	case <-stop:
	}
	f.l.post(task{kind: taskFileCancel, f: op})
	<-op.done
	return op.Res
}

// FixedBuffers returns the number of registered file buffer slots of
// the loop (0: none).
func (f FileLoop) FixedBuffers() int {
	if f.l.fbufs == nil {
		return 0
	}
	return cap(f.l.fbufs.free)
}

// FileBufferSize is the size of a registered file buffer slot.
const FileBufferSize = 64 << 10

// fileBufs are a loop's registered file buffers: an mmap'd arena the ring
// has registered as buffer 0, cut in FileBufferSize slots.
type fileBufs struct {
	mem  []byte
	free chan uint16 // free slots; any goroutine takes and gives back
}

// newFileBufs maps n slots and registers them with l's ring. Loop only,
// at setup.
func newFileBufs(r *uring.Ring, n int) (*fileBufs, error) {
	mem, err := unix.Mmap(-1, 0, n*FileBufferSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	if err := r.RegisterBuffers([][]byte{mem}); err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	b := &fileBufs{mem: mem, free: make(chan uint16, n)}
	for i := range n {
		b.free <- uint16(i)
	}
	return b, nil
}

func (b *fileBufs) slot(i int) []byte {
	return b.mem[i*FileBufferSize : (i+1)*FileBufferSize : (i+1)*FileBufferSize]
}

// close unmaps the arena, once the ring is closed: the kernel may write
// into a slot until a request's final completion, and no request is left
// by then.
func (b *fileBufs) close() { unix.Munmap(b.mem) }

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
		// that runs its retry (Ring.SetMayBlock): until the last such
		// request completes, enters tell the scheduler.
		if l.sleepyFiles == 0 {
			l.ring.SetMayBlock(true)
		}
		l.sleepyFiles++
	}
	sqe := l.getSQE()
	switch op.Op {
	case FileRead:
		if op.fixed != 0 {
			sqe.PrepReadFixed(op.Fd, op.Buf, op.Off, 0)
		} else {
			sqe.PrepReadAt(op.Fd, op.Buf, op.Off)
		}
	case FileWrite:
		if op.fixed != 0 {
			sqe.PrepWriteFixed(op.Fd, op.Buf, op.Off, 0)
		} else {
			sqe.PrepWriteAt(op.Fd, op.Buf, op.Off)
		}
	case FileSync:
		sqe.PrepFsync(op.Fd, 0)
	case FileDatasync:
		sqe.PrepFsync(op.Fd, uring.FsyncDatasync)
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
		if l.sleepyFiles--; l.sleepyFiles == 0 {
			l.ring.SetMayBlock(false)
		}
	}
	op.Res = cqe.Res
	op.done <- struct{}{}
}
