package ringpoll

import (
	"unsafe"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// LinkBuffer is a nocopy buffer that belongs to no connection, after
// netpoll's LinkBuffer: a codec builds a message in it with the Writer's
// methods and hands it to a connection with Writer.Append, or decodes one
// with the Reader's methods. Bytes written become readable at Flush: Len
// counts the flushed bytes, MallocLen the others. Reading never blocks; a
// read of more bytes than Len fails with io.EOF.
//
// Slices the reading methods return are valid until Release; a Malloc'ed
// slice until Flush. Memory given to WriteBinary (from 4 KiB) and
// WriteDirect is linked, not copied, and must not change until Flush
// copies it or, after Append, the connection's Flush returns.
//
// The zero value is an empty buffer, ready to use. A LinkBuffer is not
// safe for concurrent use, and must not be copied.
type LinkBuffer struct {
	in  buf.LinkBuffer // flushed: what the reading methods read
	out buf.LinkBuffer // written since the last Flush
	r   Reader         // the Reader over in, made by Reader
}

// NewLinkBuffer returns an empty LinkBuffer. The optional size, which
// netpoll's NewLinkBuffer takes as the initial capacity, is a hint for the
// size of the nodes the buffer takes for writes (at most 64 KiB).
func NewLinkBuffer(size ...int) *LinkBuffer {
	b := new(LinkBuffer)
	if len(size) > 0 {
		b.out.SetGrowHint(size[0])
	}
	return b
}

// Reader returns a Reader over the buffer's flushed bytes, for code
// written against *Reader; reading through it is reading the LinkBuffer.
func (b *LinkBuffer) Reader() *Reader {
	if b.r.p == nil {
		b.r.p = unsafe.Pointer(&b.in)
	}
	return &b.r
}

// Next returns the next n bytes and consumes them, as Reader.Next does.
func (b *LinkBuffer) Next(n int) ([]byte, error) { return b.Reader().Next(n) }

// Peek returns the next n bytes without consuming them, as Reader.Peek
// does.
func (b *LinkBuffer) Peek(n int) ([]byte, error) { return b.Reader().Peek(n) }

// Skip consumes the next n bytes, as Reader.Skip does.
func (b *LinkBuffer) Skip(n int) error { return b.Reader().Skip(n) }

// Until returns the bytes up to and including the first delim and consumes
// them, as Reader.Until does.
func (b *LinkBuffer) Until(delim byte) ([]byte, error) { return b.Reader().Until(delim) }

// ReadBinary returns a copy of the next n bytes, as Reader.ReadBinary
// does.
func (b *LinkBuffer) ReadBinary(n int) ([]byte, error) { return b.Reader().ReadBinary(n) }

// ReadString returns the next n bytes as a string, as Reader.ReadString
// does.
func (b *LinkBuffer) ReadString(n int) (string, error) { return b.Reader().ReadString(n) }

// ReadByte returns the next byte and consumes it (io.ByteReader).
func (b *LinkBuffer) ReadByte() (byte, error) { return b.Reader().ReadByte() }

// Slice returns a Reader over the next n bytes without copying them, as
// Reader.Slice does.
func (b *LinkBuffer) Slice(n int) (*Reader, error) { return b.Reader().Slice(n) }

// Release frees the bytes consumed so far; slices returned before become
// invalid.
func (b *LinkBuffer) Release() error { return b.Reader().Release() }

// Len returns the number of flushed bytes not yet read.
func (b *LinkBuffer) Len() int { return b.in.Len() }

// Malloc returns n bytes for the caller to fill before the next Flush.
func (b *LinkBuffer) Malloc(n int) ([]byte, error) { return malloc(&b.out, "LinkBuffer", n) }

// WriteBinary appends p, linked rather than copied from 4 KiB, as
// Writer.WriteBinary does: p must not change until Flush.
func (b *LinkBuffer) WriteBinary(p []byte) (int, error) {
	if len(p) > 0 {
		writeBinary(&b.out, p)
	}
	return len(p), nil
}

// WriteString appends s (a copy).
func (b *LinkBuffer) WriteString(s string) (int, error) {
	b.out.Append([]byte(s))
	return len(s), nil
}

// WriteByte appends one byte (io.ByteWriter).
func (b *LinkBuffer) WriteByte(c byte) error {
	writeByte(&b.out, c)
	return nil
}

// WriteDirect inserts p, without copying it, before the last remainLen
// bytes written since the last Flush, as Writer.WriteDirect does.
func (b *LinkBuffer) WriteDirect(p []byte, remainLen int) error {
	if err := checkWritten("LinkBuffer.WriteDirect", remainLen, b.out.Len()); err != nil {
		return err
	}
	b.out.InsertRef(p, remainLen, nil)
	return nil
}

// MallocAck keeps the first n bytes written since the last Flush and
// drops the rest, as Writer.MallocAck does.
func (b *LinkBuffer) MallocAck(n int) error {
	if err := checkWritten("LinkBuffer.MallocAck", n, b.out.Len()); err != nil {
		return err
	}
	b.out.Truncate(n)
	return nil
}

// MallocLen returns the number of bytes written since the last Flush.
func (b *LinkBuffer) MallocLen() int { return b.out.Len() }

// Append moves other's bytes, flushed or not, to the end of what was
// written since the last Flush, without copying, and leaves other empty,
// as Writer.Append does.
func (b *LinkBuffer) Append(other *LinkBuffer) error {
	if other != nil && other != b {
		other.moveTo(&b.out)
	}
	return nil
}

// Flush makes the bytes written since the last Flush readable. Small
// writes are gathered into the nodes they follow, and bytes linked from
// caller memory (WriteBinary, WriteDirect) are copied, so that memory may
// be reused once Flush returns.
func (b *LinkBuffer) Flush() error {
	b.in.Splice(&b.out)
	return nil
}

// Close frees the buffer's memory and empties it: slices it returned
// become invalid. The buffer is usable after.
func (b *LinkBuffer) Close() error {
	b.in.Discard()
	b.out.Discard()
	return nil
}

// moveTo moves every byte of b, flushed ones first, to the end of dst.
func (b *LinkBuffer) moveTo(dst *buf.LinkBuffer) {
	dst.Concat(&b.in)
	dst.Concat(&b.out)
}
