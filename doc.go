// Package ringpoll is a network library for servers and clients that need
// more than net gives: event loops that spread connections, handlers on
// pooled goroutines, and a nocopy Reader and Writer, after ByteDance's
// cloudwego/netpoll, with the I/O engine chosen at run time.
//
// There are two ways to program it, one connection type underneath.
//
// Like net: Listen returns a *Listener, a net.Listener whose Accept returns
// a *Conn, a net.Conn whose Read blocks and whose deadlines work; Dial and
// Dialer give the client side. crypto/tls, net/http and gRPC run on them
// unmodified.
//
//	ln, err := ringpoll.Listen("tcp", "127.0.0.1:8080")
//	...
//	http.Serve(ln, handler)
//
// Like netpoll: NewServer takes a Handler, which a Server runs on a pooled
// goroutine whenever a connection has input, and which reads through the
// connection's nocopy Reader and writes through its Writer:
//
//	srv, _ := ringpoll.NewServer(func(ctx context.Context, c *ringpoll.Conn) error {
//		r, w := c.Reader(), c.Writer()
//		b, _ := r.Next(r.Len())
//		w.WriteBinary(b)
//		return w.Flush()
//	})
//	srv.Serve(ln)
//
// With WithInlineHandler, a Server calls the handler on the event loop
// itself, as gnet does: no hand-off to a goroutine, for handlers that are
// quick and never wait. Their reads of input that has not arrived fail with
// ErrWouldBlock, which, returned, makes the Server call again when more
// comes.
//
// The Reader and Writer have netpoll's methods with netpoll's meaning
// (Slice, WriteDirect, MallocAck and Append among them), LinkBuffer is
// netpoll's standalone buffer, and Conn has IsActive and
// AddCloseCallback, so a codec written for netpoll runs on ringpoll with
// its types changed: Reader and Writer are concrete types here, Slice
// returns a *Reader and Append takes a *LinkBuffer. The Handler is
// netpoll's OnRequest: called when a connection has input, never twice at
// once for one connection, and again while it consumes input; unlike
// OnRequest it is not called again for input it left unread until more
// arrives, and it may return an error, which closes the connection. What
// else differs:
//
//   - Blocking: a connection's Reader waits for input as netpoll's does,
//     bounded by the read deadline (netpoll's read timeout); in an inline
//     handler it fails with ErrWouldBlock instead. Flush returns once the
//     bytes are in the kernel or queued for the loop, waiting only while
//     the output queue is above its high-water mark (never inline);
//     netpoll's waits until they are written. A Reader from Slice and a
//     LinkBuffer never wait: a read past their bytes fails with io.EOF.
//   - Validity: slices from Next are valid until Release (or the handler's
//     return) and from Malloc until Flush, as in netpoll, but from Peek
//     only until the next Release or consuming call (netpoll's until
//     Release). WriteString copies, and WriteBinary links only
//     from 4 KiB (netpoll links both); linked memory (WriteBinary,
//     WriteDirect) must not change until Flush returns. Until at the end
//     of the input returns no bytes, where netpoll's returns them with
//     the error.
//   - Slice shares the connection's memory rather than copying, as
//     netpoll's does; release the Reader it returns, since until then it
//     holds input buffers that the input high-water mark does not count.
//   - Concurrency: a Reader or Writer is for one goroutine at a time, as in
//     netpoll, and while a connection's Reader is in use its goroutine is
//     the only one reading the Conn (Read, WriteTo): Peek and Next take
//     bytes within one input buffer without a lock, and the connection
//     counts them with the Reader's next call that locks. A Reader from
//     Slice may be read on another goroutine than the connection's and
//     released after the connection closed.
//   - Close callbacks run once after the connection is finished, whoever
//     closed it, on a goroutine of their own; a connection from Dial is
//     closed only by Close or by its idle timeout (WithIdleTimeout).
//
// # Datagrams
//
// ListenPacket and DialPacket return a *PacketConn, a net.PacketConn with
// working deadlines, which also reads and writes batches of datagrams, many
// per system call and without allocating per datagram (Batch, ReadBatch,
// WriteBatch, with GSO and, by WithGRO, GRO). A PacketServer reads one
// socket, or a SO_REUSEPORT group of them (WithReusePort, WithCPUSteering),
// and calls a PacketHandler with every batch.
//
// # Engines
//
// WithEngine selects the engine: EngineEpoll, the classic reactor, or one
// of the io_uring engines (EngineUring, EngineUringHybrid,
// EngineUringReactor, EngineUringSQPoll). EngineAuto (the default) picks
// EngineUring where io_uring works and EngineEpoll otherwise; the
// environment variable RINGPOLL_ENGINE overrides it.
//
// # Limits
//
// Every connection has an input high-water mark (the loop stops reading the
// socket above it, so TCP flow control slows the peer) and an output
// high-water mark (writers block above it), so no peer can make a server
// buffer without bound. See WithInputHighWater and WithOutputHighWater.
//
// # Slices and Close
//
// A slice the Reader hands out stays valid until Release (or, in a
// handler, until the handler returns), and it never shows another
// connection's bytes, even if its connection is closed meanwhile by
// another goroutine, Server.Shutdown or a timeout: memory a reader can
// still see is never reused. Close ends the socket for the peer at once;
// only recycling the memory waits.
//
// To find code that reads a slice after its Release (or after its Batch
// was read into again), build with the ringpoison tag (go test -tags
// ringpoison): memory going back to a pool or to the kernel is first
// overwritten with the byte 0xDB, so such a read shows garbage at once
// instead of, now and then, another connection's bytes. The tag costs a
// fill of every buffer given back; without it the library is unchanged.
//
// # Errors
//
// Errors are those of net: *net.OpError wrapping an *os.SyscallError, or
// net.ErrClosed after Close (ErrIdleTimeout, which matches it, after the
// idle timeout), or os.ErrDeadlineExceeded after a deadline;
// io.EOF as is. The package's own errors (errors.go) are exported values,
// or wrap one, for errors.Is.
//
// docs/ARCHITECTURE.md in the repository describes the loops and the
// contract every engine implements.
package ringpoll
