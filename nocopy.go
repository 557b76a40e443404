package ringpoll

import (
	"fmt"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// Reader is a connection's nocopy reader, in the style of cloudwego/netpoll:
// it hands out slices of the connection's input buffer instead of copying.
// Slices it returns are valid until Release (or a Conn.Read, which releases;
// in a Server handler, also until the handler returns), and are read-only:
// a Writer may send straight from them after its Flush returned (see
// Writer.WriteBinary). Its methods block until enough input arrived,
// honouring the read deadline, and must be used by one goroutine at a
// time.
//
// A slice never shows another connection's bytes, even when its connection
// is closed under it (by Close from another goroutine, Server.Shutdown,
// the idle or drain timeout): memory a reader can still see is never given
// back to the kernel or a pool before Release, or before the handler
// returns. A reader that keeps slices past Close without calling Release
// costs memory, not correctness: the buffers under them are retired rather
// than recycled (LoopStats.BuffersRetired counts them), so calling Release
// when done, before or after Close, is still the cheaper way.
type Reader struct{ c *Conn }

// Next returns the next n bytes and consumes them.
func (r *Reader) Next(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("ringpoll: Reader.Next(%d): %w", n, ErrNegativeCount)
	}
	b, err := r.c.fd.Next(n)
	return b, r.c.opError("read", err)
}

// Peek returns the next n bytes without consuming them. The slice is valid
// until the next Release or consuming call.
func (r *Reader) Peek(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("ringpoll: Reader.Peek(%d): %w", n, ErrNegativeCount)
	}
	b, err := r.c.fd.Peek(n)
	return b, r.c.opError("read", err)
}

// Skip consumes the next n bytes.
func (r *Reader) Skip(n int) error {
	if n < 0 {
		return fmt.Errorf("ringpoll: Reader.Skip(%d): %w", n, ErrNegativeCount)
	}
	return r.c.opError("read", r.c.fd.Skip(n))
}

// Until returns the input up to and including the first delim and consumes
// it. It fails if the input high-water mark of bytes holds no delim.
func (r *Reader) Until(delim byte) ([]byte, error) {
	b, err := r.c.fd.Until(delim)
	return b, r.c.opError("read", err)
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
// the connection may read more. Slices returned before become invalid.
func (r *Reader) Release() error {
	r.c.fd.Release()
	return nil
}

// Len returns the number of bytes readable without blocking.
func (r *Reader) Len() int { return r.c.fd.Len() }

// nocopyThreshold is the size from which WriteBinary links a slice instead
// of copying it: below it, the copy is cheaper than the bookkeeping.
const nocopyThreshold = 4096

// Writer is a connection's nocopy writer, in the style of cloudwego/netpoll:
// bytes are gathered with Malloc and WriteBinary, then sent by Flush. Its
// methods must be used by one goroutine at a time.
type Writer struct {
	c   *Conn
	buf *buf.LinkBuffer
}

func (w *Writer) pending() *buf.LinkBuffer {
	if w.buf == nil {
		w.buf = buf.New()
	}
	return w.buf
}

// Malloc returns n bytes of output buffer for the caller to fill before the
// next Flush.
func (w *Writer) Malloc(n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("ringpoll: Writer.Malloc(%d): %w", n, ErrNegativeCount)
	}
	if n == 0 {
		return []byte{}, nil
	}
	b := w.pending()
	p := b.WriteSpace(n)[:n]
	b.Commit(n)
	return p, nil
}

// WriteBinary appends b to the output. Slices of 4 KiB or more are linked,
// not copied: the caller must not modify b before Flush returns. Flush sends
// or copies them before it returns, so b may then be reused or released,
// which makes the netpoll echo (Next, WriteBinary, Flush, Release) safe.
// One exception saves the copy: a slice the connection's Reader returned
// from an incrementally consumed receive buffer (the io_uring engines'
// default, WithBufferRing) is queued as it is, and its buffer stays out of
// the kernel's hands until the send completed, whenever the reader
// releases it; such slices are read-only anyway (LoopStats.BuffersShared
// counts them).
func (w *Writer) WriteBinary(b []byte) (int, error) {
	if len(b) >= nocopyThreshold {
		w.pending().AppendRef(b, nil)
	} else if len(b) > 0 {
		w.pending().Append(b)
	}
	return len(b), nil
}

// WriteString appends s to the output (a copy).
func (w *Writer) WriteString(s string) (int, error) {
	w.pending().Append([]byte(s))
	return len(s), nil
}

// WriteByte appends one byte to the output (io.ByteWriter).
func (w *Writer) WriteByte(c byte) error {
	p := w.pending().WriteSpace(1)
	p[0] = c
	w.buf.Commit(1)
	return nil
}

// MallocLen returns the number of bytes written since the last Flush.
func (w *Writer) MallocLen() int {
	if w.buf == nil {
		return 0
	}
	return w.buf.Len()
}

// Flush sends what was written since the last Flush. It returns once every
// byte is in the kernel or copied into the connection's output queue,
// blocking while that queue is above the output high-water mark (bounded by
// the write deadline). On error the unsent bytes are dropped.
func (w *Writer) Flush() error {
	if w.buf == nil || w.buf.Len() == 0 {
		return nil
	}
	return w.c.opError("write", w.c.fd.WriteBuffer(w.buf))
}
