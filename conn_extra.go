package ringpoll

import (
	"net"
	"sync"
	"sync/atomic"
)

// connExtra is a Conn's rarely used state, made on first use (extras).
type connExtra struct {
	// lingerEnd is set by Server.Shutdown once the connection's writing
	// side is shut down: when it is closed even if the peer has not closed
	// (Unix nanoseconds).
	lingerEnd atomic.Int64
	// cutoff is set by Server.Shutdown when it begins to drain the
	// connection: the input total (consumed plus readable) then. While
	// the handler has consumed less, input that arrived before Shutdown
	// is still owed a call; 0 once nothing is (owes).
	cutoff atomic.Uint64
	// drainSince is when Server.Shutdown began to drain the connection
	// (Unix nanoseconds): a graceful close that still waits on the peer
	// a drain timeout later ends (Conn.peerHolds).
	drainSince atomic.Int64

	mu        sync.Mutex
	callbacks []CloseCallback // AddCloseCallback's, in the order added
	closed    bool            // the callbacks were taken to run

	// raddr is RemoteAddr's answer: made by its first call on a TCP
	// connection, set up front on others.
	raddr atomic.Pointer[net.Addr]
	// laddr is a local address the Conn's own field cannot hold (one not
	// of its network's type); set by newConn before the Conn is shared.
	laddr net.Addr
}

// remote returns the remote address, or nil if it was not made yet.
func (e *connExtra) remote() net.Addr {
	if p := e.raddr.Load(); p != nil {
		return *p
	}
	return nil
}

// setRemote keeps a as the remote address unless one was kept first, and
// returns the one kept.
func (e *connExtra) setRemote(a net.Addr) net.Addr {
	e.raddr.CompareAndSwap(nil, &a)
	return *e.raddr.Load()
}

// extras returns c's connExtra, making it on first use.
func (c *Conn) extras() *connExtra {
	if e := c.extra.Load(); e != nil {
		return e
	}
	c.extra.CompareAndSwap(nil, new(connExtra))
	return c.extra.Load()
}

// lingerEnd returns the linger end Server.Shutdown set, or 0.
func (c *Conn) lingerEnd() int64 {
	if e := c.extra.Load(); e != nil {
		return e.lingerEnd.Load()
	}
	return 0
}

func (c *Conn) setLingerEnd(t int64) { c.extras().lingerEnd.Store(t) }

// CloseCallback is a function that AddCloseCallback runs after its
// connection closed. Its error is ignored; the type returns one so that
// netpoll's callbacks (func(netpoll.Connection) error) port by a change
// of the parameter's type.
type CloseCallback func(c *Conn) error

// AddCloseCallback arranges for f to run once the connection is closed,
// whoever closed it: Close, or a Server (after the peer closed, the
// handler failed, Shutdown, or the idle timeout). The callbacks run once
// the connection is finished: its descriptor closed, no handler running
// and the engine done with it. They run one after another on a goroutine
// of their own, the last added first (like deferred calls), before the
// connection leaves its Server, so a Shutdown that waits for its
// connections returns after them. One added
// after that runs at once, on a goroutine of its own. A nil f is ignored.
// Safe for concurrent use.
//
// A connection from Dial or Accept is closed only by Close or its idle
// timeout (WithIdleTimeout): as in net, the peer closing makes its reads
// return io.EOF, nothing more. So its callbacks run after one of those,
// as netpoll's do for a connection without an OnRequest.
func (c *Conn) AddCloseCallback(f CloseCallback) error {
	if f == nil {
		return nil
	}
	e := c.extras()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		go f(c)
		return nil
	}
	e.callbacks = append(e.callbacks, f)
	// Finalized may have run before e existed, or before f was added,
	// and found nothing to run: the FD counts as finalized before it runs.
	var fns []CloseCallback
	if c.fd.Finalized() {
		fns = e.takeCallbacks()
	}
	e.mu.Unlock()
	if fns != nil {
		go runCloseCallbacks(c, fns)
	}
	return nil
}

// takeCallbacks marks the callbacks taken and returns them. Called with
// e.mu held.
func (e *connExtra) takeCallbacks() []CloseCallback {
	fns := e.callbacks
	e.callbacks, e.closed = nil, true
	return fns
}

// closeCallbacks returns c's close callbacks for the Finalized hook to
// run, marking them taken, or nil.
func (c *Conn) closeCallbacks() []CloseCallback {
	e := c.extra.Load()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	return e.takeCallbacks()
}

func runCloseCallbacks(c *Conn, fns []CloseCallback) {
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i](c)
	}
}

// IsActive reports whether the connection is still usable both ways as
// far as ringpoll has seen, as netpoll's IsActive does: false once it was
// closed, by anyone, or its input ended (the peer closed its side, or a
// read failed). A connection whose input is paused at its high-water mark
// is not read, so its peer's close shows only once the input is read.
// Safe for concurrent use.
func (c *Conn) IsActive() bool {
	return !c.fd.Closing() && !c.fd.InputEnded()
}
