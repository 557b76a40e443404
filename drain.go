package ringpoll

import "github.com/ringpoll/ringpoll/internal/poll"

// A Server connection's graceful close, which Server.Shutdown drives one
// step per round (Server.drain):
//
//	serving ──Shutdown looks first (startDrain)──> draining: the input that
//	  had arrived (cutoff) is owed to the handler, later input is dropped,
//	  reads no longer wait
//	draining ──no handler runs, the owed input consumed or seen and left
//	  for more, no output queued (drained)──> half-closed: the peer reads
//	  every reply, then EOF
//	half-closed ──the peer closes, or every reply is acknowledged and the
//	  linger passed──> closed
//	any step ──still waiting on the peer (output it does not take, replies
//	  it does not acknowledge) a drain timeout after Shutdown began──>
//	  aborted: the rest of the output is dropped and the connection reset
//	  (poll.FD.Abort), so that the peer knows it did not get it all
//
// "Seen" is what the handler's last run ended on (stall): input the loop
// has linked but not yet handed over (InputReady, which schedules the
// handler) is owed all the same, and Shutdown waits for the call it is
// about to get.

// drainStep moves c one step along its graceful close, at time now (Unix
// nanoseconds).
func (c *Conn) drainStep(now int64) {
	if !c.flagSet(connDraining) {
		c.startDrain(now)
	}
	end := c.lingerEnd()
	if c.peerHolds(now, end) {
		c.fd.Abort()
		return
	}
	switch {
	case end == 0 && c.drained():
		// The last reply is out, and a handler run from now on only
		// drops what it finds.
		poll.Hook(poll.HookShutdownQuiet, c.fd)
		c.setLingerEnd(now + int64(lingerTimeout))
		if c.fd.InputEnded() && c.fd.Len() == 0 {
			c.Close() // the peer is gone already
			return
		}
		go func() {
			if c.CloseWrite() != nil {
				c.Close()
			}
		}()
	case end != 0 && now > end:
		if c.unacked() > 0 {
			// Replies still in the socket (a slow reader): a close
			// now would reset the connection and drop them.
			c.setLingerEnd(now + int64(lingerTimeout))
			return
		}
		c.Close()
	}
}

// startDrain begins c's graceful close: the input that has arrived is
// owed to the handler, and reads stop waiting, so that the handler may
// read what has arrived but no peer that stalls mid-request holds it.
func (c *Conn) startDrain(now int64) {
	n, done, _ := c.fd.InputState()
	// Stored before the flag: a run that sees the flag sees the cutoff.
	x := c.extras()
	x.drainSince.Store(now)
	x.cutoff.Store(done + uint64(n))
	c.setFlag(connDraining)
	c.fd.StopWaits()
}

// peerHolds reports whether c's graceful close has waited on its peer for
// longer than the drain timeout (at least the linger) since Shutdown began
// on it, at time now, with end its linger end: output is queued that the
// peer does not take (a handler may be blocked writing it), or replies
// wait in the socket for the peer's acknowledgement. A handler that is
// busy with output sent does not count: only the peer is not waited for
// without end.
func (c *Conn) peerHolds(now, end int64) bool {
	limit := max(c.fd.DrainTimeout(), lingerTimeout)
	if now <= c.extra.Load().drainSince.Load()+int64(limit) {
		return false
	}
	return !c.fd.Quiet() || (end != 0 && c.unacked() > 0)
}

// owes reports whether a draining c's handler is owed a call on input that
// arrived before Shutdown: it has consumed done bytes, fewer than had
// arrived by then.
func (c *Conn) owes(done uint64) bool { return done < c.extra.Load().cutoff.Load() }

// forgive gives up what a draining c's handler is owed: it can do no more
// with it (drained, runHandler).
func (c *Conn) forgive() { c.extra.Load().cutoff.Store(0) }

// drained reports whether Shutdown may half-close a draining c: no handler
// runs, the input that arrived before Shutdown was consumed, or seen by
// the handler and left for more input (which, arriving after, no longer
// counts), or can get no reply any more (c cannot be written to), and no
// output is queued.
func (c *Conn) drained() bool {
	if c.flagSet(connProcessing) {
		return false
	}
	if x := c.extra.Load(); x.cutoff.Load() != 0 {
		n, done, _ := c.fd.InputState()
		if c.owes(done) && !c.stalledAt(done+uint64(n)) && c.fd.WriteErr() == nil {
			// No handler has seen this input: the loop has linked it
			// and is about to schedule the handler, or, inline, will
			// run it once the output drained. (Once a send failed,
			// that drain never comes, and no reply could go out.)
			return false
		}
		c.forgive()
		// A run that claimed c before the forgive may have found input
		// owed and be serving it: wait for it. One that claims it after
		// finds none owed and drops what it finds (the atomics are
		// sequentially consistent: one of the two sees the other).
		if c.flagSet(connProcessing) {
			return false
		}
	}
	return c.fd.Quiet()
}

// stall records that the handler's run ended on a call that consumed
// nothing, with total bytes of input (consumed plus readable) in: the
// handler has seen them all and waits for more.
func (c *Conn) stall(total uint64) {
	c.stallAt.Store(uint32(total))
	c.setFlag(connStalled)
}

// unstall forgets the last stall, as a run begins.
func (c *Conn) unstall() {
	if c.flagSet(connStalled) {
		c.flags.And(^connStalled)
	}
}

// stalledAt reports whether the handler's last run ended stalled with
// total bytes of input in, no run having begun since: whether it has seen
// all the input there is. stallAt keeps the low 32 bits, which suffice:
// what the loop links while no run begins is bounded by the input
// high-water mark (at most 2 GiB) and what it reads past the mark, far
// under 4 GiB, so the two totals never differ by a multiple of it.
func (c *Conn) stalledAt(total uint64) bool {
	return c.flagSet(connStalled) && c.stallAt.Load() == uint32(total)
}

// dropInput consumes and releases the input of a draining connection whose
// handler is owed nothing more: requests that arrived after Shutdown
// began are not served, and input must keep flowing so the peer's close
// can be seen. It closes the connection once the peer has closed.
func (c *Conn) dropInput() bool {
	if n := c.fd.Len(); n > 0 {
		c.fd.Skip(n)
	}
	c.fd.Release()
	if c.fd.InputEnded() {
		c.Close()
		return false
	}
	return true
}
