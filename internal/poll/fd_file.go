package poll

// Writes that bypass the output queue: bytes the kernel moves into the
// socket itself (sendfile(2) or splice(2) from a user goroutine,
// SendFrom). They keep the order of the connection's writes by holding
// the writers' lock, and moving only once every byte queued before has
// left the queue (WaitOutput), so nothing queued can overtake them and
// they overtake nothing queued.

// WaitOutput is the wait of a holder of the writers' lock (SendFrom and
// CloseWrite): it returns once the output queue is empty and no send of
// it is in flight, so that the holder may send on the socket itself,
// bounded by the write deadline. As the lock is held, no writer queues
// meanwhile. Errors: ErrClosed, ErrDeadline, the sticky send error,
// ErrWriteClosed, or ErrWouldBlock on a NoBlock FD (whose user must not
// wait) with output still queued.
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

// WriteErr returns why nothing more can be written, if anything: Close, a
// passed write deadline, CloseWrite, or a failed send.
func (fd *FD) WriteErr() error { return fd.writeErr() }
