package ringpoll

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// Conn is a stream connection served by a ringpoll engine: a net.Conn (Read
// blocks, deadlines work) and a syscall.Conn, with a nocopy Reader and Writer
// on the side. Its methods are safe for concurrent use except Reader and
// Writer, whose methods must be used by one goroutine at a time.
type Conn struct {
	fd *poll.FD
	// laddr is LocalAddr's answer in one word: a *net.TCPAddr on the TCP
	// networks, a *net.UnixAddr on unix; nil if there is none, or if it
	// is of another type (then it is in extra).
	laddr unsafe.Pointer
	// peerIP and peerPort are a TCP connection's remote address, as a
	// value (connPeer4 or connPeer6 says which family; neither: none):
	// RemoteAddr makes the *net.TCPAddr on first use and keeps it in
	// extra, so an idle connection carries no address object. Other
	// networks' remote addresses, and IPv6 ones with a zone, are in extra
	// from the start.
	peerIP [16]byte
	reader Reader
	writer Writer
	eng    *engineRef

	// The small fields, together so that they share two words.
	network  netIndex // index into networks
	bits     uint8    // connInline, connPeer4, connPeer6; set before the Conn is shared
	peerPort uint16   // see peerIP
	// stallAt is, while connStalled is set, the low 32 bits of the input
	// total (consumed plus readable) when the handler last returned
	// without progress: Server.Shutdown tells by it input the handler
	// has seen from input the loop has just linked (drained).
	stallAt atomic.Uint32
	flags   atomic.Uint32 // connProcessing, connHeldBack, connDraining, connStalled
	// inputSeq is bumped by the loop on each input batch of a Server's
	// connection; serve compares it for change only, so it may wrap.
	inputSeq atomic.Uint32
	// srvIdx is 1 + the connection's place in its Server's connSet, 0
	// while it is in none; under the Server's mu.
	srvIdx int32
	// viewLen and viewTaken are the length of the Reader's view and the
	// bytes it took from it (see Reader); the Reader's goroutine's alone.
	viewLen, viewTaken uint16

	// extra is the state few connections use (close callbacks, Shutdown's
	// linger, the remote address once asked for), made on first use so
	// that an idle connection stays small.
	extra atomic.Pointer[connExtra]

	srv *Server // set for connections a Server runs
}

// A Conn's flags.
const (
	// connProcessing: a Server's handler runs or is scheduled (claim).
	connProcessing uint32 = 1 << iota
	// connHeldBack: an inline handler waits for output above the
	// high-water mark to drain.
	connHeldBack
	// connDraining: set by Server.Shutdown; the handler is called only
	// for input that arrived before (connExtra.cutoff), and the rest is
	// dropped.
	connDraining
	// connStalled: the handler's last run ended when a call consumed
	// nothing, with input left (stallAt), and no run began since.
	connStalled
)

// A Conn's bits, set by newConn.
const (
	// connInline: WithInlineHandler, the loop runs the handler.
	connInline uint8 = 1 << iota
	// connPeer4 and connPeer6: peerIP and peerPort hold the peer's
	// address, IPv4 or IPv6 (an IPv4-mapped one included).
	connPeer4
	connPeer6
)

func (c *Conn) inline() bool { return c.bits&connInline != 0 }

func (c *Conn) flagSet(f uint32) bool { return c.flags.Load()&f != 0 }
func (c *Conn) setFlag(f uint32)      { c.flags.Or(f) }

// takeFlag clears f and reports whether it was set.
func (c *Conn) takeFlag(f uint32) bool { return c.flags.And(^f)&f != 0 }

// claim sets connProcessing and reports whether it was clear: whether the
// caller is the one to run the handler. The load first spares the cache
// line a write when a handler runs already, as a failed compare-and-swap
// of a flag of its own did.
func (c *Conn) claim() bool {
	for {
		f := c.flags.Load()
		if f&connProcessing != 0 {
			return false
		}
		if c.flags.CompareAndSwap(f, f|connProcessing) {
			return true
		}
	}
}

// unclaim clears connProcessing: no handler runs any more.
func (c *Conn) unclaim() { c.flags.And(^connProcessing) }

// networks are the networks a Conn can be on (checkNetwork); a Conn keeps
// the index, a byte, where the name would take sixteen.
var networks = [...]string{"tcp", "tcp4", "tcp6", "unix"}

// netUnix is unix's index in networks.
const netUnix netIndex = 3

type netIndex uint8

func networkIndex(network string) netIndex {
	for i, n := range networks {
		if n == network {
			return netIndex(i)
		}
	}
	panic("ringpoll: unchecked network " + network)
}

func (i netIndex) String() string { return networks[i] }

var _ interface {
	net.Conn
	syscall.Conn
	io.ReaderFrom
	io.WriterTo
} = (*Conn)(nil)

// newConn wraps the non-blocking socket sysfd and registers it with the
// engine r, taking a reference that the connection's final close drops. If
// srv is set, the connection's input runs srv's handler. On error the socket
// is closed.
func newConn(sysfd int, network string, laddr net.Addr, raddr remote, cfg *config, r *engineRef, srv *Server) (*Conn, error) {
	c := &Conn{fd: poll.NewFD(sysfd, cfg.pc), network: networkIndex(network), eng: r}
	c.setLocal(laddr)
	c.setPeer(raddr)
	c.reader.c = c
	c.writer.c = c
	if srv != nil {
		if !srv.admit() {
			closeSocket(sysfd)
			return nil, ErrServerClosed
		}
		c.srv = srv
		if cfg.inline {
			c.bits |= connInline
			c.fd.NoBlock = true
		}
	}
	if !r.retain() {
		// The engine stopped: registering would hand the socket to a loop
		// that is shutting down, which would close it under the caller.
		closeSocket(sysfd)
		c.setupFailed()
		return nil, net.ErrClosed
	}
	c.fd.Hooks = (*connHooks)(c)
	if err := r.eng.Register(c.fd); err != nil {
		closeSocket(sysfd)
		r.release()
		c.setupFailed()
		return nil, err
	}
	c.fd.StartIdleTimer()
	// The Server tracks the connection only once it is registered:
	// Shutdown may close it at once, from another goroutine. Until then
	// Shutdown waits for it as one being set up.
	if srv != nil {
		if !srv.adopt(c) {
			c.Close()
			return nil, ErrServerClosed
		}
		// A handler may have closed the connection, and the FD been
		// destroyed, before adopt: its forget came too early, so forget
		// it here. (The FD counts as finalized before Hooks.Finalized runs, so
		// one of the two forgets comes after adopt.)
		if c.fd.Finalized() {
			srv.forget(c)
		}
	}
	return c, nil
}

// setupFailed ends a Server's admission of c when c could not be set up.
func (c *Conn) setupFailed() {
	if c.srv != nil {
		c.srv.adopt(nil)
	}
}

// Read reads up to len(b) bytes, blocking until some arrive. It returns
// io.EOF after the peer closed its side and the buffered bytes were read.
// Read releases the input it consumed: slices from Reader become invalid.
func (c *Conn) Read(b []byte) (int, error) {
	c.reader.settle()
	n, err := c.fd.Read(b)
	return n, c.opError("read", err)
}

// Write writes b, returning once every byte is in the kernel or in the
// connection's output queue (which then sends it); it blocks while that queue
// is above the output high-water mark. b may be reused when Write returns.
func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.fd.Write(b)
	return n, c.opError("write", err)
}

// ReadFrom implements io.ReaderFrom, which io.Copy(c, r) uses: it writes
// what r yields, until r's end, and returns the bytes written. Bytes
// written before it go out first (a Writer's bytes once Flush queued
// them). As std net's TCPConn.ReadFrom does, it moves the bytes without
// copying them through user memory where r allows:
//
//   - a regular file (an *os.File, or any syscall.Conn and io.Reader over
//     one), alone or in an *io.LimitedReader, with sendfile(2) from the
//     file's offset, which it leaves after the last byte written, as
//     reading would; an *io.SectionReader over such a file, from the
//     section's position, which it advances. No write interleaves.
//   - a stream socket (a *net.TCPConn, a *net.UnixConn, or any
//     syscall.Conn over one whose RawConn.Read waits in Go's poller),
//     with splice(2) through a pooled pipe, waiting for the source's
//     input as its Read would (bounded by its read deadline, not by c's);
//     writes may come between what one splice brought and the next.
//
// When c's socket is full, ReadFrom waits for room as net's does, at the
// kernel's writable mark, which the event loop watches for; no thread
// waits in the kernel meanwhile. Stats counts the bytes of each path
// (ZeroCopyBytes, CopiedBytes). Any other r, another Conn among them, is
// copied through Write, with r's WriteTo if it has one (a Conn's hands
// over its input buffers).
//
// The write deadline bounds it as it bounds Write, and it then returns an
// error wrapping os.ErrDeadlineExceeded with the bytes written so far
// (sent, or queued to be sent); so do Close (net.ErrClosed) and a failed
// send (a peer's reset, as Write reports it). Errors come in a
// *net.OpError with Op "readfrom", r's own errors inside it as r returned
// them. On a connection whose handler runs inline (WithInlineHandler) it
// never waits for c's socket: once output is queued or the socket is
// full, the rest of r is copied into the output queue (reading r may
// still wait, as r does). Safe for concurrent use.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if c.fd.Closing() {
		// Before r is looked at: a nil r would panic in io.Copy.
		return 0, c.opError("readfrom", net.ErrClosed)
	}
	n, err, handled := c.zeroCopyFrom(r)
	if !handled {
		n, err = c.copyFrom(r)
	}
	return n, c.opError("readfrom", err)
}

// connWriter is a Conn's Write alone, without the *net.OpError: ReadFrom
// wraps the error once, and io.Copy must not call ReadFrom again.
type connWriter struct{ fd *poll.FD }

func (w connWriter) Write(p []byte) (int, error) { return w.fd.Write(p) }

// copyFrom is ReadFrom for a source without a zero-copy path: io.Copy
// through Write, taking the writer lock per write as Write does, so a
// source that waits for its input holds up no other writer.
func (c *Conn) copyFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(connWriter{c.fd}, r)
	c.fd.NoteCopied(n)
	return n, err
}

// WriteTo implements io.WriterTo, which io.Copy(w, c) uses: it writes
// the connection's input to w until the peer closes its side, and then
// returns nil, as io.Copy does at io.EOF. Each call of w.Write is given
// input as it sits in the connection's buffers, with no copy between
// (io.Copy without it copies through a 32 KiB buffer of its own); the
// slice is valid until that Write returns, and w must not keep it. It
// waits for input as Read does, bounded by the read deadline; errors come
// in a *net.OpError with Op "writeto" (w's own error inside it). It
// releases the input it consumed, as Read does: slices from Reader become
// invalid. Safe for concurrent use with other reads: each byte goes to one
// reader, and other reads wait while w holds input.
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	c.reader.settle()
	n, err := c.fd.WriteTo(w)
	return n, c.opError("writeto", err)
}

// Close closes the connection, as net's Close does, and never blocks.
// Blocked and later calls fail with net.ErrClosed. Besides Close, only
// the idle timer (WithIdleTimeout) closes a connection, the same way, its
// calls then failing with ErrIdleTimeout (which matches net.ErrClosed);
// and a Server closes those it serves. With no output queued,
// the writing side is shut down before Close returns, so the peer reads
// EOF at once; queued output is sent first, for up to the drain timeout
// (WithDrainTimeout), as the kernel sends what a closed net.Conn left in
// its buffer; if the drain timeout passes first, the rest is dropped and
// the connection reset, so that the peer does not take a cut stream for a
// complete one. The descriptor itself is closed as soon as the engine's
// requests on it have ended. Slices the Reader handed out stay valid and
// keep their bytes, whoever closes the connection and whenever (see
// Reader).
func (c *Conn) Close() error {
	return c.opError("close", c.fd.Close())
}

// CloseWrite waits until queued output is sent (bounded by the write
// deadline), then shuts down the writing side: the peer reads EOF.
func (c *Conn) CloseWrite() error {
	return c.opError("close", c.fd.CloseWrite())
}

// CloseRead shuts down the reading side of the socket.
func (c *Conn) CloseRead() error {
	return c.opError("close", c.fd.CloseRead())
}

// unacked returns the bytes written to the socket that the peer has not
// acknowledged yet, or 0 if that cannot be read.
func (c *Conn) unacked() int {
	n := 0
	c.fd.Control(func(s int) error {
		n = unackedBytes(s)
		return nil
	})
	return n
}

// SetDeadline sets the read and write deadlines, as net.Conn specifies.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for Read and the Reader's blocking
// methods; they then fail with an error that wraps os.ErrDeadlineExceeded.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.fd.Closing() {
		return c.opError("set", net.ErrClosed)
	}
	c.fd.SetReadDeadline(t)
	return nil
}

// SetWriteDeadline sets the deadline for Write and Writer.Flush.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.fd.Closing() {
		return c.opError("set", net.ErrClosed)
	}
	c.fd.SetWriteDeadline(t)
	return nil
}

// SetNoDelay controls TCP_NODELAY (Nagle's algorithm off when true). TCP
// connections from Listen and Dial start with it on, as in net.
func (c *Conn) SetNoDelay(noDelay bool) error {
	err := c.fd.Control(func(s int) error { return setNoDelay(s, noDelay) })
	return c.opError("set", err)
}

// SetKeepAlive turns TCP keep-alive probes on or off, as net's
// TCPConn.SetKeepAlive does. TCP connections from Listen and Dial start
// with them on, as net's do: the first probe after 15 s idle, then every
// 15 s, and after 9 unanswered the connection is dropped and its reads
// and writes fail, so a peer that vanished without a FIN or a reset does
// not hold it for ever.
func (c *Conn) SetKeepAlive(keepAlive bool) error {
	err := c.fd.Control(func(s int) error { return setKeepAlive(s, keepAlive) })
	return c.opError("set", err)
}

// SetKeepAlivePeriod sets how long the connection stays idle before TCP
// sends its first keep-alive probe, as net's TCPConn.SetKeepAlivePeriod
// does (whole seconds, rounded up; 0 is 15 s).
func (c *Conn) SetKeepAlivePeriod(d time.Duration) error {
	err := c.fd.Control(func(s int) error { return setKeepAliveIdle(s, d) })
	return c.opError("set", err)
}

// SetKeepAliveConfig configures TCP keep-alive probes as net's
// TCPConn.SetKeepAliveConfig does: zero fields take net's defaults (15 s,
// 15 s, 9), negative ones leave what the connection has.
func (c *Conn) SetKeepAliveConfig(config net.KeepAliveConfig) error {
	err := c.fd.Control(func(s int) error { return setKeepAliveConfig(s, config) })
	return c.opError("set", err)
}

// Reader returns the connection's nocopy reader.
func (c *Conn) Reader() *Reader { return &c.reader }

// Writer returns the connection's nocopy writer.
func (c *Conn) Writer() *Writer { return &c.writer }

// SyscallConn returns a raw connection for Control (socket options). Its
// Read and Write return an error wrapping errors.ErrUnsupported: the
// engine owns the socket's I/O.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	return rawConn{c}, nil
}

type rawConn struct{ c *Conn }

func (r rawConn) Control(f func(fd uintptr)) error {
	err := r.c.fd.Control(func(s int) error { f(uintptr(s)); return nil })
	return r.c.opError("raw-control", err)
}

func (r rawConn) Read(func(fd uintptr) bool) error  { return r.c.opError("raw-read", errRawIO) }
func (r rawConn) Write(func(fd uintptr) bool) error { return r.c.opError("raw-write", errRawIO) }

// errRawIO is the error of a rawConn's Read and Write.
var errRawIO = fmt.Errorf("ringpoll: the engine owns the socket's I/O, so a RawConn supports only Control: %w", errors.ErrUnsupported)

// opError wraps err as net does: io.EOF as is, everything else in a
// *net.OpError. On a connection its idle timer closed, net.ErrClosed
// becomes ErrIdleTimeout, which says why and still matches it; a read
// that Server.Shutdown stopped from waiting fails with ErrServerClosed.
func (c *Conn) opError(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	switch {
	case err == net.ErrClosed && c.fd.IdleClosed():
		err = ErrIdleTimeout
	case err == poll.ErrStopped:
		err = ErrServerClosed // the FD's Server stopped its waits (drain)
	}
	return &net.OpError{Op: op, Net: c.network.String(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
