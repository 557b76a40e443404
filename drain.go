package ringpoll

import "github.com/ringpoll/ringpoll/internal/poll"

// A Server connection's graceful close, which Server.Shutdown drives one
// step per round (Server.drain).

// drainStep moves c one step along its graceful close, at time now (Unix
// nanoseconds).
func (c *Conn) drainStep(now int64) {
	if !c.flagSet(connDraining) {
		c.setFlag(connDraining)
		// A handler may read what has arrived, but must not wait for a
		// peer that may never send the rest of a request.
		c.fd.StopWaits()
	}
	end := c.lingerEnd()
	switch {
	case end == 0 && !c.flagSet(connProcessing) && c.fd.Quiet():
		// The last reply is out and no handler can start another.
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

// dropInput consumes and releases the input of a connection the Server is
// shutting down: requests that arrive after its last reply are not served,
// and input must keep flowing so the peer's close can be seen. It closes
// the connection once the peer has closed.
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
