package ringpoll

import (
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"unsafe"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// Reader is a connection's nocopy reader, in the style of cloudwego/netpoll:
// it hands out slices of the connection's input buffer instead of copying.
// Slices it returns are valid until Release (or a Conn.Read, which releases;
// in a Server handler, also until the handler returns), and are read-only:
// a Writer may send straight from them after its Flush returned (see
// Writer.WriteBinary). Its methods block until enough input arrived,
// honouring the read deadline, and must be used by one goroutine at a
// time, which is also the only one reading the Conn (Read, WriteTo) while
// it uses the Reader: bytes a Reader took from its current input buffer
// are consumed for the connection with its next call that blocks, fails
// or releases (a Conn.Read included), not at once, which is what spares
// Peek and Next a lock.
//
// A slice never shows another connection's bytes, even when its connection
// is closed under it (by Close from another goroutine, Server.Shutdown,
// the idle or drain timeout): memory a reader can still see is never given
// back to the kernel or a pool before Release, or before the handler
// returns. A reader that keeps slices past Close without calling Release
// costs memory, not correctness: the buffers under them are retired rather
// than recycled (Stats.BuffersRetired counts them), so calling Release
// when done, before or after Close, is still the cheaper way.
//
// A Reader that Slice returns, or that a LinkBuffer reads through, stands
// on its own: it holds a fixed set of bytes, never blocks, and fails with
// io.EOF, as a connection's Reader does once its input ended, when asked
// for more bytes than it holds. Slices it returns are valid until its
// Release.
type Reader struct {
	// c is the connection, for a connection's Reader; nil for a
	// standalone one.
	c *Conn
	// p is a standalone Reader's bytes, a *buf.LinkBuffer. A
	// connection's Reader has none and keeps its view there instead (a
	// union, so that a Conn stays in its size class): the first byte of
	// the readable bytes of the input's read node, as its last locked
	// call found them. The Reader takes bytes from the view without the
	// input's lock, and the input learns how many with the next locked
	// call (see poll.FD.NextView). The view's length and the count taken
	// are c.viewLen and c.viewTaken.
	p unsafe.Pointer
}

// sliced is the c of a Reader that Slice made: a standalone Reader that
// owns its bytes, all of which its Release lets go. It is never used as a
// connection.
var sliced Conn

// own returns a standalone Reader's bytes, nil for a connection's Reader.
func (r *Reader) own() *buf.LinkBuffer {
	if r.c != nil && r.c != &sliced {
		return nil
	}
	return (*buf.LinkBuffer)(r.p)
}

// setView makes v, which a locked call returned, r's view, with nothing
// taken yet. A longer view than a uint16 counts is cut: any prefix of the
// read node's bytes will do.
func (r *Reader) setView(v []byte) {
	v = v[:min(len(v), math.MaxUint16)]
	r.p = nil
	if len(v) > 0 {
		r.p = unsafe.Pointer(unsafe.SliceData(v))
	}
	r.c.viewLen, r.c.viewTaken = uint16(len(v)), 0
}

// fromView returns the next n bytes from r's view, if it holds them and
// the connection may still be read.
func (r *Reader) fromView(n int) ([]byte, bool) {
	c := r.c
	taken := int(c.viewTaken)
	end := taken + n
	if n <= 0 || end > int(c.viewLen) || !c.fd.ViewUsable() {
		return nil, false
	}
	return unsafe.Slice((*byte)(r.p), c.viewLen)[taken:end:end], true
}

// settle tells the connection's input of the bytes r took from its view,
// and gives the view up: before a read that does not go through the view.
func (r *Reader) settle() {
	if n := r.settled(); n > 0 {
		r.c.fd.Consume(n)
	}
}

// settled gives r's view up and returns the bytes it took from it, for a
// call that passes them on to the input itself.
func (r *Reader) settled() int {
	c := r.c
	n := int(c.viewTaken)
	if c.viewLen != 0 {
		r.p = nil
		c.viewLen, c.viewTaken = 0, 0
	}
	return n
}

// Next returns the next n bytes and consumes them.
func (r *Reader) Next(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("ringpoll: Reader.Next(%d): %w", n, errNegativeCount)
	}
	if lb := r.own(); lb != nil {
		if n > lb.Len() {
			return nil, io.EOF
		}
		return lb.Next(n), nil
	}
	if b, ok := r.fromView(n); ok {
		r.c.viewTaken += uint16(n)
		return b, nil
	}
	b, view, err := r.c.fd.NextView(int(r.c.viewTaken), n)
	if err != nil {
		return nil, r.c.opError("read", err)
	}
	r.setView(view)
	return b, nil
}

// Peek returns the next n bytes without consuming them. The slice is valid
// until the next Release or consuming call.
func (r *Reader) Peek(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("ringpoll: Reader.Peek(%d): %w", n, errNegativeCount)
	}
	if lb := r.own(); lb != nil {
		if n > lb.Len() {
			return nil, io.EOF
		}
		return lb.Peek(n), nil
	}
	if b, ok := r.fromView(n); ok {
		return b, nil
	}
	b, view, err := r.c.fd.PeekView(int(r.c.viewTaken), n)
	if err != nil {
		return nil, r.c.opError("read", err)
	}
	r.setView(view)
	return b, nil
}

// Skip consumes the next n bytes.
func (r *Reader) Skip(n int) error {
	if n < 0 {
		return fmt.Errorf("ringpoll: Reader.Skip(%d): %w", n, errNegativeCount)
	}
	if lb := r.own(); lb != nil {
		if n > lb.Len() {
			return io.EOF
		}
		lb.Skip(n)
		return nil
	}
	if _, ok := r.fromView(n); ok {
		r.c.viewTaken += uint16(n)
		return nil
	}
	if err := r.c.fd.Skip(int(r.c.viewTaken) + n); err != nil {
		return r.c.opError("read", err)
	}
	r.settled()
	return nil
}

// Until returns the input up to and including the first delim and consumes
// it. It fails if the input high-water mark of bytes holds no delim, or
// with io.EOF if the input ends first (a standalone Reader's bytes hold no
// delim); unlike netpoll's Until it then returns no bytes and consumes
// none, so Next(Len()) still reads them.
func (r *Reader) Until(delim byte) ([]byte, error) {
	if lb := r.own(); lb != nil {
		if i := lb.IndexByte(delim); i >= 0 {
			return lb.Next(i + 1), nil
		}
		return nil, io.EOF
	}
	r.settle()
	b, err := r.c.fd.Until(delim)
	return b, r.c.opError("read", err)
}

// Slice returns a Reader over the next n bytes, which it consumes, then
// releases r as Release does (slices r returned before become invalid),
// as netpoll's Slice does. It waits for the bytes as Next does. They are
// not copied: the new Reader shows r's memory, which is reused only once
// both released it, so each may be read and released at its own pace, on
// different goroutines, and the new one may outlive the connection.
//
// Release the new Reader once done with its bytes: until then it holds
// the connection's input memory (on the io_uring engines the provided
// buffers that the loop receives into, which the high-water mark does not
// count). One dropped without a Release is cleaned up when the garbage
// collector finds it, its buffers retired for good rather than reused.
func (r *Reader) Slice(n int) (*Reader, error) {
	if n < 0 {
		return nil, fmt.Errorf("ringpoll: Reader.Slice(%d): %w", n, errNegativeCount)
	}
	slb := buf.New()
	s := &Reader{c: &sliced, p: unsafe.Pointer(slb)}
	var owned bool
	if lb := r.own(); lb != nil {
		if n > lb.Len() {
			return nil, io.EOF
		}
		owned = lb.Share(slb, n)
		lb.Release() // what r consumed; a sliced r keeps the rest
		lb.Shrink()
	} else {
		r.settle()
		var err error
		if owned, err = r.c.fd.Slice(n, slb); err != nil {
			return nil, r.c.opError("read", err)
		}
	}
	if owned {
		// Abandon, not Discard: slices s returned may outlive s itself.
		runtime.AddCleanup(s, (*buf.LinkBuffer).Abandon, slb)
	}
	return s, nil
}

// ReadBinary returns a copy of the next n bytes, which stays valid after
// Release.
func (r *Reader) ReadBinary(n int) ([]byte, error) {
	b, err := r.Next(n)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), b...), nil
}

// ReadString returns a copy of the next n bytes as a string and consumes
// them, as netpoll's Reader.ReadString does.
func (r *Reader) ReadString(n int) (string, error) {
	b, err := r.Next(n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// ReadByte returns the next byte and consumes it (io.ByteReader); at the
// end of the input it returns io.EOF.
func (r *Reader) ReadByte() (byte, error) {
	b, err := r.Next(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

// Release frees the input consumed so far, so its memory can be reused and
// the connection may read more. Slices returned before become invalid. A
// Reader that Slice returned lets go of all of its bytes, read or not,
// since nothing can be added to them: it holds none afterwards.
func (r *Reader) Release() error {
	if lb := r.own(); lb != nil {
		if r.c == &sliced {
			lb.Skip(lb.Len())
		}
		lb.Release()
		lb.Shrink()
		return nil
	}
	r.c.fd.ReleaseSkip(r.settled())
	return nil
}

// Len returns the number of bytes readable without blocking.
func (r *Reader) Len() int {
	if lb := r.own(); lb != nil {
		return lb.Len()
	}
	// The input still counts the bytes taken from the view (none once
	// the connection's buffers were freed).
	return max(r.c.fd.Len()-int(r.c.viewTaken), 0)
}

// nocopyThreshold is the size from which WriteBinary links a slice instead
// of copying it: below it, the copy is cheaper than the bookkeeping.
const nocopyThreshold = 4096

// Writer is a connection's nocopy writer, in the style of cloudwego/netpoll:
// bytes are gathered with Malloc and WriteBinary, then sent by Flush. Its
// methods must be used by one goroutine at a time. After the connection's
// Close every method that returns an error fails with net.ErrClosed (in a
// *net.OpError), writing nothing: nothing written then could be sent.
type Writer struct {
	c   *Conn
	buf *buf.LinkBuffer
}

// closed returns the error of a write on a closed connection, or nil.
func (w *Writer) closed() error {
	if w.c.fd.Closing() {
		return w.c.opError("write", net.ErrClosed)
	}
	return nil
}

// pending returns the buffer of what was written since the last Flush.
// Flush gives it back to a pool once empty, so that an idle connection
// does not keep it.
func (w *Writer) pending() *buf.LinkBuffer {
	if w.buf == nil {
		w.buf = buf.Get()
	}
	return w.buf
}

// Malloc returns n bytes of output buffer for the caller to fill before the
// next Flush.
func (w *Writer) Malloc(n int) ([]byte, error) {
	if err := w.closed(); err != nil {
		return nil, err
	}
	if n <= 0 {
		return malloc(nil, "Writer", n)
	}
	return malloc(w.pending(), "Writer", n)
}

// WriteBinary appends b to the output. Slices of 4 KiB or more are linked,
// not copied: the caller must not modify b before Flush returns. Flush sends
// or copies them before it returns, so b may then be reused or released,
// which makes the netpoll echo (Next, WriteBinary, Flush, Release) safe.
// One exception saves the copy: a slice the connection's Reader returned
// from an incrementally consumed receive buffer (the io_uring engines'
// default, WithBufferRing) is queued as it is, and its buffer stays out of
// the kernel's hands until the send completed, whenever the reader
// releases it; such slices are read-only anyway.
func (w *Writer) WriteBinary(b []byte) (int, error) {
	if err := w.closed(); err != nil {
		return 0, err
	}
	if len(b) > 0 {
		writeBinary(w.pending(), b)
	}
	return len(b), nil
}

// WriteString appends s to the output (a copy).
func (w *Writer) WriteString(s string) (int, error) {
	if err := w.closed(); err != nil {
		return 0, err
	}
	w.pending().Append([]byte(s))
	return len(s), nil
}

// WriteByte appends one byte to the output (io.ByteWriter).
func (w *Writer) WriteByte(c byte) error {
	if err := w.closed(); err != nil {
		return err
	}
	writeByte(w.pending(), c)
	return nil
}

// WriteDirect inserts p, without copying it, before the last remainLen
// bytes written since the last Flush, as netpoll's WriteDirect does: after
// Malloc(a+b), WriteDirect(p, b) puts p between the first a and the last
// b bytes of the Malloc'ed slice, which the caller may still fill after
// the call. The caller must not modify p before Flush returns (as with
// WriteBinary, Flush sends or copies it). remainLen must be in [0,
// MallocLen()].
func (w *Writer) WriteDirect(p []byte, remainLen int) error {
	if err := w.closed(); err != nil {
		return err
	}
	if err := checkWritten("Writer.WriteDirect", remainLen, w.MallocLen()); err != nil {
		return err
	}
	if len(p) > 0 {
		w.pending().InsertRef(p, remainLen, nil)
	}
	return nil
}

// MallocAck keeps the first n bytes written since the last Flush and drops
// the rest, as netpoll's MallocAck does: Malloc(8), fill 5 bytes, and
// MallocAck(MallocLen()-3) sends the 5. Memory of dropped bytes that the
// Writer owns is written over by later writes. n must be in [0,
// MallocLen()].
func (w *Writer) MallocAck(n int) error {
	if err := w.closed(); err != nil {
		return err
	}
	if err := checkWritten("Writer.MallocAck", n, w.MallocLen()); err != nil {
		return err
	}
	if w.buf != nil {
		w.buf.Truncate(n)
	}
	return nil
}

// Append moves lb's bytes, flushed or not, to the end of what was written
// since the last Flush, without copying, and leaves lb empty and usable,
// as netpoll's Append does with the LinkBuffer it takes: they go out with
// the next Flush. Slices that lb's Reader returned become invalid, and
// bytes lb linked rather than copied (WriteBinary, WriteDirect) stay
// linked: their memory must not change before that Flush returns.
func (w *Writer) Append(lb *LinkBuffer) error {
	if err := w.closed(); err != nil {
		return err // lb keeps its bytes
	}
	if lb != nil && lb.Len()+lb.MallocLen() > 0 {
		lb.moveTo(w.pending())
	}
	return nil
}

// MallocLen returns the number of bytes written since the last Flush.
func (w *Writer) MallocLen() int { return w.buf.Len() }

// Flush sends what was written since the last Flush. It returns once every
// byte is in the kernel or copied into the connection's output queue,
// blocking while that queue is above the output high-water mark (bounded by
// the write deadline). On error the unsent bytes are dropped.
func (w *Writer) Flush() error {
	if w.buf == nil {
		return w.closed()
	}
	var err error
	if w.buf.Len() > 0 {
		err = w.c.opError("write", w.c.fd.WriteBuffer(w.buf))
	}
	if buf.Put(w.buf) {
		w.buf = nil
	}
	return err
}

// The writing methods of Writer and LinkBuffer share these, on the buffer
// that holds what was written since the last Flush.

// malloc returns n bytes of b's space, committed: they count as written.
// b may be nil when n <= 0. who names the type in errors.
func malloc(b *buf.LinkBuffer, who string, n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("ringpoll: %s.Malloc(%d): %w", who, n, errNegativeCount)
	}
	if n == 0 {
		return []byte{}, nil
	}
	p := b.WriteSpace(n)[:n]
	b.Commit(n)
	return p, nil
}

// writeBinary links p (not empty) from nocopyThreshold bytes, or copies
// it.
func writeBinary(b *buf.LinkBuffer, p []byte) {
	if len(p) >= nocopyThreshold {
		b.AppendRef(p, nil)
	} else {
		b.Append(p)
	}
}

func writeByte(b *buf.LinkBuffer, c byte) {
	p := b.WriteSpace(1)
	p[0] = c
	b.Commit(1)
}

// checkWritten checks a count of bytes written since the last Flush.
func checkWritten(op string, n, written int) error {
	if n < 0 {
		return fmt.Errorf("ringpoll: %s(%d): %w", op, n, errNegativeCount)
	}
	if n > written {
		return fmt.Errorf("ringpoll: %s(%d) with %d bytes written since the last Flush: %w", op, n, written, errBeyondWritten)
	}
	return nil
}
