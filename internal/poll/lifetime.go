package poll

// A connection's lifetime is one atomic word, in the manner of the fdMutex
// of Go's internal/poll: two reference counts and a few bits of state.
//
// The descriptor count (lifeSys) is held by whatever may still use the
// descriptor:
//
//   - the loop, from NewFD until Detach: its reference stands for every
//     request it may have in flight on the socket (a multishot recv or
//     poll, a send, a POLLOUT wait), in which the kernel also writes input
//     memory or reads output memory, and for its own reads and sends. The
//     loop tracks which requests are in flight, since it must cancel each,
//     and lets go once the last one's final completion came;
//   - a user goroutine for the length of a syscall on the descriptor
//     (Control, a writer's send), and Close while it runs.
//
// The memory count (lifeMem) is held by a Server's handler for the length
// of its call (Ref and Unref): whoever closes the connection meanwhile, the
// input the handler sees is recycled only after it returned.
//
// Close sets lifeClosed, after which no reference of either kind can be
// taken: the attempt fails, and the caller reports ErrClosed. Once the
// descriptor count is zero, the descriptor is closed, exactly once, as net
// closes it (a FIN, or a RST if input was left unread). Once both counts
// are zero, the FD is destroyed: its output and input buffers are freed
// and Hooks.Finalized runs. Input is recycled (provided buffers back to their
// ring, pooled nodes back to their pool) only if no reader holds slices of
// it; otherwise it is abandoned (buf.LinkBuffer.Abandon): pooled nodes go
// to the garbage collector with the reader's last slice, and provided
// buffers are retired from their ring for good, replaced by new memory.
// So memory a reader can still see is never reused, whoever closes the
// connection and whenever, and a reader that never calls Release (Next,
// then Close, is natural for a client) holds neither the descriptor, nor
// the ring's buffers, nor the engine.
//
//	open ──Close──> closed (new references fail) ──loop lets go──> detached
//	     ──no descriptor reference──> descriptor closed
//	     ──no handler either──> destroyed (buffers recycled or abandoned, Done, Finalized)
const (
	lifeSys     = 1 // one descriptor reference
	lifeSysMask = 1<<24 - 1
	lifeMem     = 1 << 24 // one memory reference (a handler call)
	lifeMemMask = (1<<24 - 1) << 24

	// lifeClosed: Close was called.
	lifeClosed = 1 << 63
	// lifeDetached: the loop dropped its references.
	lifeDetached = 1 << 62
	// lifeShut: Close shut down the writing side.
	lifeShut = 1 << 61
	// lifeClosing: claimed by the goroutine that closes the descriptor.
	lifeClosing = 1 << 60
	// lifeFDClosed: the descriptor is closed.
	lifeFDClosed = 1 << 59
	// lifeDestroyed: the buffers are freed.
	lifeDestroyed = 1 << 58
	// lifeIdle: the idle timer made the close (set with lifeClosed).
	lifeIdle = 1 << 57
	// lifeAbort: Abort made the close (set with lifeClosed): queued
	// output is dropped, not drained, and the connection reset.
	lifeAbort = 1 << 56
)

// acquire takes one reference of the kind ref, unless fd is closed.
func (fd *FD) acquire(ref uint64) bool {
	for {
		old := fd.life.Load()
		if old&lifeClosed != 0 {
			return false
		}
		if fd.life.CompareAndSwap(old, old+ref) {
			return true
		}
	}
}

// put drops references (ref is a sum of lifeSys and lifeMem units) and
// finishes what their holders kept from happening.
func (fd *FD) put(ref uint64) { fd.settle(fd.life.Add(-ref)) }

// settle closes the descriptor and destroys fd once their references are
// gone, given s, the state after the caller's own atomic update. Of the
// goroutines that race here, the one whose update came last sees every
// condition met.
func (fd *FD) settle(s uint64) {
	if s&lifeClosed == 0 || s&lifeSysMask != 0 {
		return
	}
	if s&lifeFDClosed == 0 {
		if fd.life.Or(lifeClosing)&lifeClosing != 0 {
			return // another goroutine closes it, and settles after
		}
		closeFD(fd.Sysfd)
		s = fd.life.Or(lifeFDClosed) | lifeFDClosed
	}
	if s&lifeMemMask != 0 || fd.life.Or(lifeDestroyed)&lifeDestroyed != 0 {
		return
	}
	fd.destroy()
}

// Ref takes a reference to fd's memory, as a Server does around a handler
// call: until Unref, fd's buffers are not freed. It reports false, taking
// none, once fd is closed.
func (fd *FD) Ref() bool { return fd.acquire(lifeMem) }

// Unref drops a reference Ref took.
func (fd *FD) Unref() { fd.put(lifeMem) }

// Closing reports whether Close has been called.
func (fd *FD) Closing() bool { return fd.life.Load()&lifeClosed != 0 }

// IdleClosed reports whether fd was closed by its idle timer (or
// ExpireIdle) rather than by Close.
func (fd *FD) IdleClosed() bool { return fd.life.Load()&lifeIdle != 0 }

// Aborted reports whether Abort closed fd: the loop drops its queued
// output at once instead of draining it.
func (fd *FD) Aborted() bool { return fd.life.Load()&lifeAbort != 0 }

// Detached reports whether the loop has let go of fd (Detach).
func (fd *FD) Detached() bool { return fd.life.Load()&lifeDetached != 0 }

// DescriptorClosed reports whether fd's descriptor is closed.
func (fd *FD) DescriptorClosed() bool { return fd.life.Load()&lifeFDClosed != 0 }

// Finalized reports whether fd was destroyed: its descriptor is closed and
// its buffers freed.
func (fd *FD) Finalized() bool { return fd.life.Load()&lifeDestroyed != 0 }

// Done returns a channel that is closed once fd was destroyed.
func (fd *FD) Done() <-chan struct{} { return fd.done.done() }

// Detach drops the loop's reference. The loop calls it once, after Close,
// when no request of its own is left on the socket; it never touches fd
// again.
func (fd *FD) Detach() {
	fd.life.Or(lifeDetached)
	fd.put(lifeSys)
}

// shutWrite shuts down the writing side of the socket, once: the peer
// reads EOF after whatever was sent. The caller holds a descriptor
// reference.
func (fd *FD) shutWrite() {
	if fd.life.Or(lifeShut)&lifeShut == 0 {
		Shutdown(fd.Sysfd, shutWrite)
	}
}

// destroy runs once, when fd is closed and neither the kernel nor a
// handler can touch its buffers any more; a reader may still hold slices.
func (fd *FD) destroy() {
	fd.inMu.Lock()
	if fd.in != nil {
		if fd.inHeld {
			fd.in.Abandon()
		} else {
			fd.in.Discard()
		}
	}
	fd.inHeld = false
	fd.syncLen()
	fd.inMu.Unlock()

	fd.outMu.Lock()
	if fd.out != nil {
		fd.out.Discard()
	}
	fd.noteOut()
	fd.loopOwns = false
	fd.outMu.Unlock()

	fd.done.fire()
	if fd.Hooks != nil {
		fd.Hooks.Finalized()
	}
}
