package ringpoll

import (
	"errors"
	"runtime/debug"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// The per-connection side of a Server: scheduling the handler on input.

// connHooks are a Conn's poll.Hooks, as a type of their own so that the
// methods stay out of Conn's API.
type connHooks Conn

// InputArrived implements poll.Hooks: input starts a Server's handler.
func (h *connHooks) InputArrived() {
	if c := (*Conn)(h); c.srv != nil {
		c.schedule()
	}
}

// connTask is a Conn as the Server's pool runs it: no closure per
// connection.
type connTask Conn

// Run implements gopool.Task: it serves the connection's input.
func (t *connTask) Run() { (*Conn)(t).serve() }

// OutputDrained implements poll.Hooks: an inline handler held back by
// full output runs again. poll calls it only for NoBlock FDs, which are
// exactly the inline handlers' (newConn).
func (h *connHooks) OutputDrained() bool { return (*Conn)(h).outputDrained() }

// Finalized implements poll.Hooks: the connection runs its close
// callbacks, leaves its Server and drops its reference to the engine.
// Finalized may run on the event loop, and callbacks may block, so they
// run on a goroutine of their own, and the rest after them.
func (h *connHooks) Finalized() {
	c := (*Conn)(h)
	if fns := c.closeCallbacks(); fns != nil {
		go c.finish(fns)
		return
	}
	c.finish(nil)
}

// finish runs the close callbacks fns, then lets c leave its Server and
// drops c's reference to the engine.
func (c *Conn) finish(fns []CloseCallback) {
	runCloseCallbacks(c, fns)
	if c.srv != nil {
		c.srv.forget(c)
	}
	c.eng.release()
}

// schedule runs on the loop goroutine after input arrived: it starts the
// handler on a pooled goroutine unless one is already running, or, inline,
// runs it here.
func (c *Conn) schedule() {
	c.inputSeq.Add(1)
	if c.claim() {
		if c.inline() {
			c.serve()
			return
		}
		c.srv.pool.Submit((*connTask)(c))
	}
}

// outputDrained runs on the loop goroutine when the output queue fell to
// its low-water mark: an inline handler held back by a full queue runs
// again. It reports whether it ran the handler.
func (c *Conn) outputDrained() bool {
	if c.flagSet(connHeldBack) && c.takeFlag(connHeldBack) {
		c.schedule()
		return true
	}
	return false
}

// holdBack reports whether an inline handler must wait for its output to
// drain before it runs again; outputDrained then runs it.
func (c *Conn) holdBack() bool {
	if !c.inline() || !c.fd.OutputFull() {
		return false
	}
	c.setFlag(connHeldBack)
	// Output sent since the check would have found heldBack unset.
	return c.fd.OutputFull() || !c.takeFlag(connHeldBack)
}

// serve runs the handler while there is input it makes progress on, then
// gives up connProcessing. The re-check after clearing the flag catches
// input that arrived while it was set, whose schedule call did nothing.
func (c *Conn) serve() {
	for {
		seq := c.inputSeq.Load()
		if !c.runHandler() {
			c.unclaim()
			return
		}
		c.unclaim()
		if c.inputSeq.Load() == seq || !c.claim() {
			return
		}
	}
}

// runHandler calls the handler while it consumes input. It reports false
// once the connection is closed or closing. Once Shutdown began, it calls
// the handler only for input that arrived before (drain.go). Progress is
// what the handler consumed, not what is left: input the loop adds while
// a pooled handler runs can match, byte for byte, what the handler took,
// and a connection whose input then ended would be closed with that input
// unserved.
func (c *Conn) runHandler() bool {
	n, done, ended := c.fd.InputState()
	c.unstall()
	// An inline handler's calls run on the loop, one after another for
	// as long as it consumes input: they too must let the rest of the
	// program have the P now and then (poll.Awake).
	var awake poll.Awake
	for {
		if c.inline() {
			awake.Turn()
		}
		if c.fd.Closing() {
			return false
		}
		if c.flagSet(connDraining) && !c.owes(done) {
			return c.dropInput()
		}
		if n == 0 {
			if ended {
				c.Close() // the peer is done and so is the input
				return false
			}
			return true
		}
		if c.holdBack() {
			return true
		}
		// The call holds a reference: whoever closes the connection
		// meanwhile, the input the handler sees is not recycled before it
		// returns.
		if !c.fd.Ref() {
			return false // closed since the check above
		}
		err := c.call()
		poll.Hook(poll.HookHandlerReturned, c.fd)
		after, doneAfter, endedAfter := c.fd.ReleaseState(c.reader.settled())
		c.fd.Unref()
		if err != nil && !(c.inline() && errors.Is(err, ErrWouldBlock)) {
			c.Close()
			return false
		}
		if doneAfter == done && after == n {
			// The handler took nothing and nothing came: it waits
			// for more input.
			if endedAfter {
				c.Close() // nothing will ever complete what is left
				return false
			}
			if c.flagSet(connDraining) {
				// Shutdown began: the handler's reads no longer wait,
				// and what completes the request, if it ever comes,
				// comes after. It is owed nothing more.
				c.forgive()
				continue
			}
			c.stall(doneAfter + uint64(after))
			return true
		}
		n, done, ended = after, doneAfter, endedAfter
	}
}

// call calls the handler once. A panic in it is the connection's, not the
// process's (nor, inline, the loop's): as net/http does, call recovers
// it, logs it with its stack, counts it, and returns an error, which
// closes the connection.
func (c *Conn) call() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = c.srv.handlerPanicked(c, v)
		}
	}()
	return c.srv.handler(c.srv.ctx, c)
}

// handlerPanicked logs and counts the panic v of the handler serving c,
// and returns the error that closes c.
func (s *Server) handlerPanicked(c *Conn, v any) error {
	s.panics.Add(1)
	s.cfg.logger.Error("ringpoll: the handler panicked; closing its connection",
		"remote", c.RemoteAddr(), "panic", v, "stack", string(debug.Stack()))
	return errHandlerPanicked
}

// errHandlerPanicked is what a panicking handler call returns to the
// Server, which closes the connection on it.
var errHandlerPanicked = errors.New("ringpoll: the handler panicked")
