package hertz

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/cloudwego/hertz/pkg/network"
	"github.com/ringpoll/ringpoll"
)

// Conn is a Hertz network.Conn over a *ringpoll.Conn: its Reader methods
// are those of the connection's nocopy ringpoll.Reader, its Writer methods
// those of its ringpoll.Writer. Slices that Peek and Next return stay valid
// until Release.
//
// Its net.Conn methods are safe for concurrent use, as net's are. Like
// ringpoll's Reader and Writer, the Reader methods (Peek, Next, Skip,
// ReadByte, ReadBinary, Release) must be used by one goroutine at a time,
// and so must the Writer methods (Malloc, WriteBinary, Flush), which Write
// flushes before it writes.
type Conn struct {
	rc *ringpoll.Conn
	r  *ringpoll.Reader
	w  *ringpoll.Writer

	// The per-operation timeouts (time.Duration; 0: none).
	readTimeout  atomic.Int64
	writeTimeout atomic.Int64

	// For a served connection: fresh says that no input was consumed
	// since the last Release, so a Peek finding no input waits for the
	// next request; idle is set during that wait, when the transport's
	// Shutdown may close the connection; down is the transport's
	// shutting-down flag. down is nil for a dialed connection.
	fresh atomic.Bool
	idle  atomic.Bool
	down  *atomic.Bool
}

var (
	_ network.Conn                = (*Conn)(nil)
	_ network.ErrorNormalization  = (*Conn)(nil)
	_ network.HandleSpecificError = (*Conn)(nil)
)

// newConn wraps rc. down is the serving transport's shutting-down flag,
// or nil for a dialed connection.
func newConn(rc *ringpoll.Conn, down *atomic.Bool) *Conn {
	return &Conn{rc: rc, r: rc.Reader(), w: rc.Writer(), down: down}
}

// Ringpoll returns the ringpoll connection under c, for what Hertz's
// interface does not reach (SetNoDelay, SyscallConn, CloseWrite).
func (c *Conn) Ringpoll() *ringpoll.Conn { return c.rc }

// Peek returns the next n bytes without consuming them, waiting for them
// for up to the read timeout. With fewer than n bytes left before the
// peer's close it returns io.EOF.
func (c *Conn) Peek(n int) ([]byte, error) {
	if c.down != nil && c.fresh.Load() && c.r.Len() == 0 {
		// Waiting for the next request: Shutdown may end the wait.
		c.idle.Store(true)
		defer c.idle.Store(false)
		if c.down.Load() {
			return nil, errShuttingDown
		}
	}
	armed := c.armRead(n)
	b, err := c.r.Peek(n)
	c.disarmRead(armed)
	return b, normalizeErr(err)
}

// Next returns the next n bytes and consumes them, waiting for them for
// up to the read timeout.
func (c *Conn) Next(n int) ([]byte, error) {
	c.fresh.Store(false)
	armed := c.armRead(n)
	b, err := c.r.Next(n)
	c.disarmRead(armed)
	return b, normalizeErr(err)
}

// Skip consumes the next n bytes, waiting for them for up to the read
// timeout.
func (c *Conn) Skip(n int) error {
	c.fresh.Store(false)
	armed := c.armRead(n)
	err := c.r.Skip(n)
	c.disarmRead(armed)
	return normalizeErr(err)
}

// ReadByte returns the next byte and consumes it.
func (c *Conn) ReadByte() (byte, error) {
	b, err := c.Next(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

// ReadBinary returns a copy of the next n bytes and consumes them.
func (c *Conn) ReadBinary(n int) ([]byte, error) {
	b, err := c.Next(n)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), b...), nil
}

// Release frees the input consumed so far; slices that Peek and Next
// returned become invalid.
func (c *Conn) Release() error {
	c.fresh.Store(true)
	return c.r.Release()
}

// Len returns the number of bytes readable without waiting.
func (c *Conn) Len() int { return c.r.Len() }

// Read copies input into p, waiting for some for up to the read timeout,
// and releases what it consumed, as Release does.
func (c *Conn) Read(p []byte) (int, error) {
	c.fresh.Store(false)
	armed := c.armRead(1)
	n, err := c.rc.Read(p)
	c.disarmRead(armed)
	return n, normalizeErr(err)
}

// Malloc returns n bytes of output buffer to fill before the next Flush.
func (c *Conn) Malloc(n int) ([]byte, error) { return c.w.Malloc(n) }

// WriteBinary appends b to the output. b must not change before Flush
// returns: large slices are sent from where they are, not copied.
func (c *Conn) WriteBinary(b []byte) (int, error) { return c.w.WriteBinary(b) }

// Flush sends the output written since the last Flush, within the write
// timeout.
func (c *Conn) Flush() error {
	c.armWrite()
	return c.w.Flush()
}

// Write sends what Malloc and WriteBinary gathered, then b, within the
// write timeout.
func (c *Conn) Write(b []byte) (int, error) {
	c.armWrite()
	if err := c.w.Flush(); err != nil {
		return 0, err
	}
	return c.rc.Write(b)
}

// Close closes the connection. Output already flushed is still sent.
func (c *Conn) Close() error { return c.rc.Close() }

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr { return c.rc.LocalAddr() }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.rc.RemoteAddr() }

// SetReadTimeout bounds every later read's wait for input by t, as
// Hertz's netpoll connection does: a read that finds its bytes buffered
// never times out, one that waits fails after t with an error for which
// errors.Is(err, os.ErrDeadlineExceeded) holds. Zero or less means no
// timeout. It replaces a deadline SetReadDeadline set.
func (c *Conn) SetReadTimeout(t time.Duration) error {
	c.readTimeout.Store(int64(max(t, 0)))
	return c.rc.SetReadDeadline(time.Time{})
}

// SetWriteTimeout bounds every later Flush and Write by t. Zero or less
// means no timeout. It replaces a deadline SetWriteDeadline set.
func (c *Conn) SetWriteTimeout(t time.Duration) error {
	c.writeTimeout.Store(int64(max(t, 0)))
	return c.rc.SetWriteDeadline(time.Time{})
}

// SetDeadline sets the read and write deadlines, as net.Conn specifies,
// replacing the read and write timeouts.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for reads, replacing the read
// timeout.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.readTimeout.Store(0)
	return c.rc.SetReadDeadline(t)
}

// SetWriteDeadline sets the deadline for Flush and Write, replacing the
// write timeout.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.writeTimeout.Store(0)
	return c.rc.SetWriteDeadline(t)
}

// armRead sets the read deadline for a read of n bytes that will have to
// wait, if a read timeout is set, and reports whether it did. A read that
// needs no wait is left alone: ringpoll fails every read once a deadline
// passed, buffered bytes or not, so a deadline is only ever set while a
// read waits.
func (c *Conn) armRead(n int) bool {
	t := time.Duration(c.readTimeout.Load())
	if t <= 0 || c.r.Len() >= n {
		return false
	}
	c.rc.SetReadDeadline(time.Now().Add(t))
	return true
}

// disarmRead clears the deadline armRead set, unless SetReadDeadline
// replaced the timeout meanwhile.
func (c *Conn) disarmRead(armed bool) {
	if armed && c.readTimeout.Load() > 0 {
		c.rc.SetReadDeadline(time.Time{})
	}
}

// armWrite sets the write deadline for the next write, if a write timeout
// is set.
func (c *Conn) armWrite() {
	if t := time.Duration(c.writeTimeout.Load()); t > 0 {
		c.rc.SetWriteDeadline(time.Now().Add(t))
	}
}

// errShuttingDown ends the wait for a next request on a connection whose
// transport shuts down.
var errShuttingDown = errors.New("hertz transport: the server is shutting down")
