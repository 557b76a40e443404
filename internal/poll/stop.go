package poll

// StopWaits makes the reads that need more input than fd holds fail with
// ErrStopped instead of waiting for it, from now on, and wakes those that
// wait: for a Server that shuts down, whose handlers may still read what
// has arrived but must not wait for a peer that may never send the rest.
// Input that has arrived stays readable. It does not apply to an FD with
// NoBlock set, whose reads never wait. Safe for concurrent use.
func (fd *FD) StopWaits() {
	fd.inMu.Lock()
	fd.inBits |= inStopped
	fd.inMu.Unlock()
	fd.signalReadable() // a waiter looks again (lockInput) and sees it
}

// noWait returns the error of a read that would now wait for input, or
// nil if it may wait. It locks inMu, which a reader about to wait can
// afford, so that its flag shares the flags' word.
func (fd *FD) noWait() error {
	if fd.NoBlock {
		return ErrWouldBlock
	}
	fd.inMu.Lock()
	stop := fd.inBits&inStopped != 0
	fd.inMu.Unlock()
	if stop {
		return ErrStopped
	}
	return nil
}
