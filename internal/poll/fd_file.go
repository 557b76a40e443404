package poll

// Writes that bypass the output queue: a file range the kernel moves into
// the socket itself (sendfile(2) from a user goroutine, or a splice the
// loop runs on its ring). They keep the order of the connection's writes
// by holding the writers' lock, taken only once every byte queued before
// has left the queue (LockOutput), so nothing queued can overtake them and
// they overtake nothing queued.

// LockOutput takes the writers' lock once the output queue is empty and
// no send of it is in flight, waiting for that (bounded by the write
// deadline). Until UnlockOutput, other writers wait, and the holder may
// move bytes into the socket by other means than Write, then in order
// with everything written before and after. On error the lock is not
// held: ErrClosed, ErrDeadline, the sticky send error, ErrWriteClosed, or
// ErrWouldBlock on a NoBlock FD (whose user must not wait) with output
// still queued.
func (fd *FD) LockOutput() error {
	fd.wmu.Lock()
	if err := fd.WaitOutput(); err != nil {
		fd.wmu.Unlock()
		return err
	}
	return nil
}

// UnlockOutput lets the other writers go on after LockOutput.
func (fd *FD) UnlockOutput() { fd.wmu.Unlock() }

// WriteLocked is Write for the holder of LockOutput: p goes out through
// the queue (or the writer's own send), after which the holder must call
// LockOutput's wait again (WaitOutput) before it moves bytes by other
// means.
func (fd *FD) WriteLocked(p []byte) (int, error) {
	src := sliceSource{p}
	return fd.write(&src)
}

// WaitOutput is LockOutput's wait for the holder of the lock (SendFrom
// and CloseWrite hold it too): it returns once the output queue is empty
// and no send of it is in flight, so that the holder may send on the
// socket itself, or with LockOutput's errors, the lock still held. As
// the lock is held, no writer queues meanwhile.
func (fd *FD) WaitOutput() error {
	var wake <-chan struct{}
	for {
		if err := fd.writeErr(); err != nil {
			return err
		}
		fd.outMu.Lock()
		idle := !fd.loopOwns
		fd.outMu.Unlock()
		if idle {
			return nil
		}
		if fd.NoBlock {
			return ErrWouldBlock
		}
		if wake == nil {
			wake = fd.waits().writable.wait()
			continue // check again, now that a signal cannot be lost
		}
		fd.await(wake, true) // the queue drained, a send error, or Close
	}
}

// WriteDeadline returns a channel that is closed when the write deadline
// passes; a deadline moved later after it closed gives a new channel on
// the next call.
func (fd *FD) WriteDeadline() <-chan struct{} { return fd.deadlines().wd.wait() }

// WriteErr returns why nothing more can be written, if anything: Close, a
// passed write deadline, CloseWrite, or a failed send.
func (fd *FD) WriteErr() error { return fd.writeErr() }

// Touch records output for the idle timer, for bytes moved into the
// socket by other means than the output queue.
func (fd *FD) Touch() { fd.touch() }
