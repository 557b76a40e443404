package ringpoll

// Use after Close (issue 45, item 7): every exported method of a closed
// Conn, its Reader and Writer, a Reader from Slice, a LinkBuffer, a
// Listener, a PacketConn and its Batch, a PacketServer and a File is
// called with ordinary arguments, zero arguments and nil slices. None may
// panic; each that returns an error returns the one the table names. A
// reflection check makes sure the tables name every exported method, so
// that a method added later cannot be forgotten.

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/net/ipv4"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// muWant is what a method must do on a closed object.
type muWant int

const (
	// muClosed: fail with the object's closed error (net.ErrClosed;
	// os.ErrClosed for a File; ErrServerClosed for a PacketServer).
	muClosed muWant = iota
	// muEOF: fail with io.EOF, or the closed error.
	muEOF
	// muError: fail, with any error: a nil or zero argument that the
	// method may refuse before it looks at the object, as net's WriteTo
	// refuses a nil address with EINVAL even on a closed socket.
	muError
	// muOK: succeed, as documented: the method lets go of something, or
	// the object stands on its own (see the reason).
	muOK
	// muValue: the method has no error result. The call returns what it
	// found wrong with the result, or nil.
	muValue
)

// muCall is one call of one exported method.
type muCall[T any] struct {
	method string // the exported method called
	args   string // its arguments, for messages
	want   muWant
	why    string // for muOK: why succeeding is right after Close
	call   func(o T) error
}

// muCalled runs f and reports its error, or the panic it raised.
func muCalled(f func() error) (panicked any, err error) {
	defer func() { panicked = recover() }()
	return nil, f()
}

// muRun calls each of calls on an object from get (which may return the
// same closed object each time, or a new one), checks each call's result
// against its want, and checks that calls covers every exported method
// of T.
func muRun[T any](t *testing.T, closedErr error, get func() T, calls []muCall[T]) {
	t.Helper()
	typ := reflect.TypeFor[T]()
	listed := map[string]bool{}
	for _, c := range calls {
		if _, ok := typ.MethodByName(c.method); !ok {
			t.Errorf("the table lists %s.%s, which %v does not have", typ, c.method, typ)
		}
		if c.want == muOK && c.why == "" {
			t.Errorf("%s.%s(%s) may succeed after Close, but the table does not say why", typ, c.method, c.args)
		}
		listed[c.method] = true
	}
	for i := range typ.NumMethod() {
		if m := typ.Method(i).Name; !listed[m] {
			t.Errorf("%v.%s is not in the table: add it, with what it must do after Close", typ, m)
		}
	}
	for _, c := range calls {
		o := get()
		p, err := muCalled(func() error { return c.call(o) })
		name := fmt.Sprintf("%v.%s(%s)", typ, c.method, c.args)
		if p != nil {
			t.Errorf("%s after Close panicked: %v", name, p)
			continue
		}
		switch c.want {
		case muClosed:
			if !errors.Is(err, closedErr) {
				t.Errorf("%s after Close returned %v, want %v", name, err, closedErr)
			}
		case muEOF:
			if err != io.EOF && !errors.Is(err, closedErr) {
				t.Errorf("%s after Close returned %v, want io.EOF or %v", name, err, closedErr)
			}
		case muError:
			if err == nil {
				t.Errorf("%s after Close returned no error", name)
			}
		case muOK:
			if err != nil {
				t.Errorf("%s after Close returned %v, want nil (%s)", name, err, c.why)
			}
		case muValue:
			if err != nil {
				t.Errorf("%s after Close: %v", name, err)
			}
		}
	}
}

// muIs returns nil if ok, else an error saying what was found.
func muIs(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// muRaw checks SyscallConn after Close: it fails with closedErr, or, as
// net's does, returns a RawConn whose Control fails with it.
func muRaw(rc syscall.RawConn, err error, closedErr error) error {
	if err != nil {
		return muIs(errors.Is(err, closedErr), "SyscallConn returned %v, want %v", err, closedErr)
	}
	cerr := rc.Control(func(uintptr) {})
	return muIs(errors.Is(cerr, closedErr), "SyscallConn returned a RawConn whose Control returned %v, want %v", cerr, closedErr)
}

// TestMisuseAfterClose: every method of every closed object fails, or
// does what the table says, and none panics.
func TestMisuseAfterClose(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			t.Run("Conn/"+string(side), func(t *testing.T) { muConn(t, e, side) })
		}
		t.Run("LinkBuffer", muLinkBuffer)
		t.Run("Listener", func(t *testing.T) { muListener(t, e) })
		for _, v := range []string{"unused", "joined", "dialed"} {
			t.Run("PacketConn/"+v, func(t *testing.T) { muPacketConn(t, e, v) })
		}
		for _, how := range []string{"Shutdown", "Close"} {
			t.Run("PacketServer/"+how, func(t *testing.T) { muPacketServer(t, e, how) })
		}
		t.Run("File", func(t *testing.T) { muFile(t, e) })
	})
}

// muConn checks a closed Conn, its Reader and Writer, and a Reader that
// Slice made before the Close.
func muConn(t *testing.T, e Engine, side tsSide) {
	c, peer := tsPair(t, e, "tcp", side)
	f := fileOpen(t, e, filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE)
	if _, err := f.WriteAt([]byte("file"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write([]byte("sliced, then unread input\n")); err != nil {
		t.Fatal(err)
	}
	s, err := c.Reader().Slice(len("sliced"))
	if err != nil {
		t.Fatal(err)
	}
	tsEventually(t, "the rest of the input to arrive", func() bool { return c.Reader().Len() > 0 })
	w := c.Writer()
	w.WriteString("written, never flushed")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	one := func() *Conn { return c }
	calls := []muCall[*Conn]{
		{method: "AddCloseCallback", args: "f", want: muOK, why: "documented: f runs at once", call: func(c *Conn) error {
			ran := make(chan struct{})
			err := c.AddCloseCallback(func(*Conn) error { close(ran); return nil })
			tsRecv(t, ran, "the close callback to run")
			return err
		}},
		{method: "AddCloseCallback", args: "nil", want: muOK, why: "documented: a nil f is ignored", call: func(c *Conn) error { return c.AddCloseCallback(nil) }},
		{method: "Close", want: muClosed, call: func(c *Conn) error { return c.Close() }},
		{method: "CloseRead", want: muClosed, call: func(c *Conn) error { return c.CloseRead() }},
		{method: "CloseWrite", want: muClosed, call: func(c *Conn) error { return c.CloseWrite() }},
		{method: "IsActive", want: muValue, call: func(c *Conn) error { return muIs(!c.IsActive(), "IsActive is true") }},
		{method: "LocalAddr", want: muValue, call: func(c *Conn) error { return muIs(c.LocalAddr() != nil, "LocalAddr is nil") }},
		{method: "RemoteAddr", want: muValue, call: func(c *Conn) error { return muIs(c.RemoteAddr() != nil, "RemoteAddr is nil") }},
		{method: "Read", args: "buf", want: muClosed, call: func(c *Conn) error { _, err := c.Read(make([]byte, 8)); return err }},
		{method: "Read", args: "nil", want: muClosed, call: func(c *Conn) error { _, err := c.Read(nil); return err }},
		{method: "ReadFrom", args: "reader", want: muClosed, call: func(c *Conn) error { _, err := c.ReadFrom(strings.NewReader("x")); return err }},
		{method: "ReadFrom", args: "file", want: muClosed, call: func(c *Conn) error {
			of, err := os.Open(f.Name())
			if err != nil {
				return err
			}
			defer of.Close()
			_, err = c.ReadFrom(of)
			return err
		}},
		{method: "ReadFrom", args: "nil", want: muClosed, call: func(c *Conn) error { _, err := c.ReadFrom(nil); return err }},
		{method: "Reader", want: muValue, call: func(c *Conn) error { return muIs(c.Reader() != nil, "Reader is nil") }},
		{method: "SendFile", args: "f, 0, 4", want: muClosed, call: func(c *Conn) error { _, err := c.SendFile(f, 0, 4); return err }},
		{method: "SendFile", args: "nil, 0, 0", want: muError, call: func(c *Conn) error { _, err := c.SendFile(nil, 0, 0); return err }},
		{method: "SetDeadline", args: "now", want: muClosed, call: func(c *Conn) error { return c.SetDeadline(time.Now()) }},
		{method: "SetDeadline", args: "zero", want: muClosed, call: func(c *Conn) error { return c.SetDeadline(time.Time{}) }},
		{method: "SetReadDeadline", args: "now", want: muClosed, call: func(c *Conn) error { return c.SetReadDeadline(time.Now()) }},
		{method: "SetReadDeadline", args: "zero", want: muClosed, call: func(c *Conn) error { return c.SetReadDeadline(time.Time{}) }},
		{method: "SetWriteDeadline", args: "now", want: muClosed, call: func(c *Conn) error { return c.SetWriteDeadline(time.Now()) }},
		{method: "SetWriteDeadline", args: "zero", want: muClosed, call: func(c *Conn) error { return c.SetWriteDeadline(time.Time{}) }},
		{method: "SetNoDelay", args: "true", want: muClosed, call: func(c *Conn) error { return c.SetNoDelay(true) }},
		{method: "SetNoDelay", args: "false", want: muClosed, call: func(c *Conn) error { return c.SetNoDelay(false) }},
		{method: "SetKeepAlive", args: "true", want: muClosed, call: func(c *Conn) error { return c.SetKeepAlive(true) }},
		{method: "SetKeepAlivePeriod", args: "0", want: muClosed, call: func(c *Conn) error { return c.SetKeepAlivePeriod(0) }},
		{method: "SetKeepAliveConfig", args: "zero", want: muClosed, call: func(c *Conn) error { return c.SetKeepAliveConfig(net.KeepAliveConfig{}) }},
		{method: "SyscallConn", want: muValue, call: func(c *Conn) error { rc, err := c.SyscallConn(); return muRaw(rc, err, net.ErrClosed) }},
		{method: "Write", args: "buf", want: muClosed, call: func(c *Conn) error { _, err := c.Write([]byte("x")); return err }},
		{method: "Write", args: "nil", want: muClosed, call: func(c *Conn) error { _, err := c.Write(nil); return err }},
		{method: "WriteTo", args: "io.Discard", want: muClosed, call: func(c *Conn) error { _, err := c.WriteTo(io.Discard); return err }},
		{method: "WriteTo", args: "nil", want: muClosed, call: func(c *Conn) error { _, err := c.WriteTo(nil); return err }},
		{method: "Writer", want: muValue, call: func(c *Conn) error { return muIs(c.Writer() != nil, "Writer is nil") }},
	}
	t.Run("Conn", func(t *testing.T) { muRun(t, net.ErrClosed, one, calls) })
	t.Run("Reader", func(t *testing.T) { muRun(t, net.ErrClosed, c.Reader, muReaderCalls(0, false)) })
	t.Run("Writer", func(t *testing.T) { muRun(t, net.ErrClosed, c.Writer, muWriterCalls()) })
	t.Run("Slice", func(t *testing.T) {
		// Its connection closed, a Reader from Slice still holds its
		// bytes: reads past them fail with io.EOF, and its own bytes
		// are intact. Once released it holds none.
		if p, err := s.Peek(s.Len()); err != nil || string(p) != "sliced" {
			t.Errorf("the Reader from Slice holds %q, %v after Close, want %q", p, err, "sliced")
		}
		muRun(t, net.ErrClosed, func() *Reader { return s }, muReaderCalls(len("sliced"), true))
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
		muRun(t, net.ErrClosed, func() *Reader { return s }, muReaderCalls(0, true))
	})
}

// muReaderCalls are the calls of a Reader that holds held bytes: a
// connection's Reader after Close holds none; a standalone one (from
// Slice) holds its bytes until its Release. Every read of more than it
// holds must fail with io.EOF or net.ErrClosed. A read of zero bytes
// fails too on a connection's Reader, as net's Read of nothing does after
// Close, and succeeds on a standalone one, which stands on its own: a
// codec reading an empty field at the end of its bytes must not fail.
func muReaderCalls(held int, standalone bool) []muCall[*Reader] {
	n := held + 1
	zero, zeroWhy := muEOF, ""
	if standalone {
		zero, zeroWhy = muOK, "a Reader from Slice stands on its own, and zero bytes are there"
	}
	readByte, readByteWhy := muEOF, ""
	if held > 0 {
		readByte, readByteWhy = muOK, "a Reader from Slice outlives its connection, with its bytes"
	}
	return []muCall[*Reader]{
		{method: "Len", want: muValue, call: func(r *Reader) error { return muIs(r.Len() == held, "Len is %d, want %d", r.Len(), held) }},
		{method: "Next", args: fmt.Sprint(n), want: muEOF, call: func(r *Reader) error { _, err := r.Next(n); return err }},
		{method: "Next", args: "0", want: zero, why: zeroWhy, call: func(r *Reader) error { _, err := r.Next(0); return err }},
		{method: "Peek", args: fmt.Sprint(n), want: muEOF, call: func(r *Reader) error { _, err := r.Peek(n); return err }},
		{method: "Peek", args: "0", want: zero, why: zeroWhy, call: func(r *Reader) error { _, err := r.Peek(0); return err }},
		{method: "Skip", args: fmt.Sprint(n), want: muEOF, call: func(r *Reader) error { return r.Skip(n) }},
		{method: "Skip", args: "0", want: zero, why: zeroWhy, call: func(r *Reader) error { return r.Skip(0) }},
		{method: "Until", args: "'\\n'", want: muEOF, call: func(r *Reader) error { _, err := r.Until('\n'); return err }},
		{method: "ReadBinary", args: fmt.Sprint(n), want: muEOF, call: func(r *Reader) error { _, err := r.ReadBinary(n); return err }},
		{method: "ReadBinary", args: "0", want: zero, why: zeroWhy, call: func(r *Reader) error { _, err := r.ReadBinary(0); return err }},
		{method: "ReadString", args: fmt.Sprint(n), want: muEOF, call: func(r *Reader) error { _, err := r.ReadString(n); return err }},
		{method: "ReadString", args: "0", want: zero, why: zeroWhy, call: func(r *Reader) error { _, err := r.ReadString(0); return err }},
		{method: "Slice", args: fmt.Sprint(n), want: muEOF, call: func(r *Reader) error { _, err := r.Slice(n); return err }},
		{method: "Slice", args: "0", want: zero, why: zeroWhy, call: func(r *Reader) error {
			s, err := r.Slice(0)
			if s != nil {
				s.Release()
			}
			return err
		}},
		{method: "ReadByte", want: readByte, why: readByteWhy, call: func(r *Reader) error { _, err := r.ReadByte(); return err }},
		{method: "Release", want: muOK, why: "documented: Release after Close is how a reader lets go of its slices", call: func(r *Reader) error { return r.Release() }},
	}
}

// muWriterCalls are the calls of a closed connection's Writer: each fails
// with net.ErrClosed, since nothing written can ever be sent.
func muWriterCalls() []muCall[*Writer] {
	return []muCall[*Writer]{
		{method: "Malloc", args: "8", want: muClosed, call: func(w *Writer) error { _, err := w.Malloc(8); return err }},
		{method: "Malloc", args: "0", want: muClosed, call: func(w *Writer) error { _, err := w.Malloc(0); return err }},
		{method: "MallocAck", args: "0", want: muClosed, call: func(w *Writer) error { return w.MallocAck(0) }},
		{method: "MallocLen", want: muValue, call: func(w *Writer) error { w.MallocLen(); return nil }},
		{method: "WriteBinary", args: "8 KiB", want: muClosed, call: func(w *Writer) error { _, err := w.WriteBinary(make([]byte, 8<<10)); return err }},
		{method: "WriteBinary", args: "nil", want: muClosed, call: func(w *Writer) error { _, err := w.WriteBinary(nil); return err }},
		{method: "WriteString", args: `"x"`, want: muClosed, call: func(w *Writer) error { _, err := w.WriteString("x"); return err }},
		{method: "WriteString", args: `""`, want: muClosed, call: func(w *Writer) error { _, err := w.WriteString(""); return err }},
		{method: "WriteByte", want: muClosed, call: func(w *Writer) error { return w.WriteByte('x') }},
		{method: "WriteDirect", args: "8 KiB, 0", want: muClosed, call: func(w *Writer) error { return w.WriteDirect(make([]byte, 8<<10), 0) }},
		{method: "WriteDirect", args: "nil, 0", want: muClosed, call: func(w *Writer) error { return w.WriteDirect(nil, 0) }},
		{method: "Append", args: "lb", want: muClosed, call: func(w *Writer) error {
			lb := NewLinkBuffer()
			lb.WriteString("x")
			return w.Append(lb)
		}},
		{method: "Append", args: "nil", want: muClosed, call: func(w *Writer) error { return w.Append(nil) }},
		{method: "Flush", want: muClosed, call: func(w *Writer) error { return w.Flush() }},
	}
}

// muLinkBuffer checks a LinkBuffer after Close. It belongs to no
// connection, and Close documents it as empty and usable after: reads
// fail with io.EOF as on any empty LinkBuffer, writes succeed.
func muLinkBuffer(t *testing.T) {
	closed := func() *LinkBuffer {
		b := NewLinkBuffer()
		b.WriteString("flushed")
		b.Flush()
		b.Next(3)
		b.WriteString("not flushed")
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		return b
	}
	const usable = "documented: a LinkBuffer is empty and usable after Close"
	calls := []muCall[*LinkBuffer]{
		{method: "Len", want: muValue, call: func(b *LinkBuffer) error { return muIs(b.Len() == 0, "Len is %d", b.Len()) }},
		{method: "MallocLen", want: muValue, call: func(b *LinkBuffer) error { return muIs(b.MallocLen() == 0, "MallocLen is %d", b.MallocLen()) }},
		{method: "Reader", want: muValue, call: func(b *LinkBuffer) error {
			return muIs(b.Reader().Len() == 0, "its Reader holds %d bytes", b.Reader().Len())
		}},
		{method: "Next", args: "1", want: muEOF, call: func(b *LinkBuffer) error { _, err := b.Next(1); return err }},
		{method: "Next", args: "0", want: muOK, why: usable + ", and zero bytes are there", call: func(b *LinkBuffer) error { _, err := b.Next(0); return err }},
		{method: "Peek", args: "1", want: muEOF, call: func(b *LinkBuffer) error { _, err := b.Peek(1); return err }},
		{method: "Peek", args: "0", want: muOK, why: usable + ", and zero bytes are there", call: func(b *LinkBuffer) error { _, err := b.Peek(0); return err }},
		{method: "Skip", args: "1", want: muEOF, call: func(b *LinkBuffer) error { return b.Skip(1) }},
		{method: "Skip", args: "0", want: muOK, why: usable + ", and zero bytes are there", call: func(b *LinkBuffer) error { return b.Skip(0) }},
		{method: "Until", args: "'\\n'", want: muEOF, call: func(b *LinkBuffer) error { _, err := b.Until('\n'); return err }},
		{method: "ReadBinary", args: "1", want: muEOF, call: func(b *LinkBuffer) error { _, err := b.ReadBinary(1); return err }},
		{method: "ReadString", args: "1", want: muEOF, call: func(b *LinkBuffer) error { _, err := b.ReadString(1); return err }},
		{method: "ReadByte", want: muEOF, call: func(b *LinkBuffer) error { _, err := b.ReadByte(); return err }},
		{method: "Slice", args: "1", want: muEOF, call: func(b *LinkBuffer) error { _, err := b.Slice(1); return err }},
		{method: "Slice", args: "0", want: muOK, why: usable + ", and zero bytes are there", call: func(b *LinkBuffer) error { _, err := b.Slice(0); return err }},
		{method: "ReadBinary", args: "0", want: muOK, why: usable + ", and zero bytes are there", call: func(b *LinkBuffer) error { _, err := b.ReadBinary(0); return err }},
		{method: "Release", want: muOK, why: usable, call: func(b *LinkBuffer) error { return b.Release() }},
		{method: "Close", want: muOK, why: usable, call: func(b *LinkBuffer) error { return b.Close() }},
		{method: "Flush", want: muOK, why: usable, call: func(b *LinkBuffer) error { return b.Flush() }},
		{method: "Malloc", args: "8", want: muOK, why: usable, call: func(b *LinkBuffer) error { _, err := b.Malloc(8); return err }},
		{method: "Malloc", args: "0", want: muOK, why: usable, call: func(b *LinkBuffer) error { _, err := b.Malloc(0); return err }},
		{method: "MallocAck", args: "0", want: muOK, why: usable, call: func(b *LinkBuffer) error { return b.MallocAck(0) }},
		{method: "WriteBinary", args: "nil", want: muOK, why: usable, call: func(b *LinkBuffer) error { _, err := b.WriteBinary(nil); return err }},
		{method: "WriteBinary", args: "8 KiB", want: muOK, why: usable, call: func(b *LinkBuffer) error { _, err := b.WriteBinary(make([]byte, 8<<10)); return err }},
		{method: "WriteString", args: `""`, want: muOK, why: usable, call: func(b *LinkBuffer) error { _, err := b.WriteString(""); return err }},
		{method: "WriteByte", want: muOK, why: usable, call: func(b *LinkBuffer) error { return b.WriteByte('x') }},
		{method: "WriteDirect", args: "nil, 0", want: muOK, why: usable, call: func(b *LinkBuffer) error { return b.WriteDirect(nil, 0) }},
		{method: "WriteDirect", args: "8 KiB, 0", want: muOK, why: usable, call: func(b *LinkBuffer) error { return b.WriteDirect(make([]byte, 8<<10), 0) }},
		{method: "Append", args: "nil", want: muOK, why: usable, call: func(b *LinkBuffer) error { return b.Append(nil) }},
		{method: "Append", args: "closed", want: muOK, why: usable, call: func(b *LinkBuffer) error { return b.Append(closed()) }},
		{method: "Append", args: "itself", want: muOK, why: usable, call: func(b *LinkBuffer) error { return b.Append(b) }},
	}
	muRun(t, net.ErrClosed, closed, calls)
}

// muListener checks a closed Listener.
func muListener(t *testing.T, e Engine) {
	ln := listen(t, e, "tcp")
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	calls := []muCall[*Listener]{
		{method: "Accept", want: muClosed, call: func(l *Listener) error { _, err := l.Accept(); return err }},
		{method: "AcceptConn", want: muClosed, call: func(l *Listener) error { _, err := l.AcceptConn(); return err }},
		{method: "Addr", want: muValue, call: func(l *Listener) error { return muIs(l.Addr() != nil, "Addr is nil") }},
		{method: "Close", want: muClosed, call: func(l *Listener) error { return l.Close() }},
		{method: "Stats", want: muValue, call: func(l *Listener) error {
			return muIs(l.Stats().Engine == e, "Stats().Engine is %v, want %v", l.Stats().Engine, e)
		}},
	}
	muRun(t, net.ErrClosed, func() *Listener { return ln }, calls)
}

// muPacketConn checks a closed PacketConn (never used, joined to Go's
// poller by a deadline, or connected by DialPacket) and a Batch it read
// into before.
func muPacketConn(t *testing.T, e Engine, how string) {
	peer := pcListen(t, e, "udp4", "127.0.0.1:0")
	var c *PacketConn
	if how == "dialed" {
		var err error
		if c, err = DialPacket("udp4", peer.LocalAddr().String(), WithEngine(e)); err != nil {
			t.Fatal(err)
		}
	} else {
		c = pcListen(t, e, "udp4", "127.0.0.1:0")
	}
	batch := pcBatch(t, 4, 2048)
	if how != "unused" {
		if _, err := peer.WriteToAddrPort([]byte("datagram"), pcAddrPort(c)); err != nil {
			t.Fatal(err)
		}
		pcDeadline(t, c)
		if _, err := c.ReadBatch(batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	to := pcAddrPort(peer)
	// An addressed write on a connected socket fails with
	// net.ErrWriteToConnected before it looks at the socket, as net's.
	addressed := muClosed
	if how == "dialed" {
		to = netip.AddrPort{}
		addressed = muError
	}
	calls := []muCall[*PacketConn]{
		{method: "Close", want: muClosed, call: func(c *PacketConn) error { return c.Close() }},
		{method: "LocalAddr", want: muValue, call: func(c *PacketConn) error { return muIs(c.LocalAddr() != nil, "LocalAddr is nil") }},
		{method: "RemoteAddr", want: muValue, call: func(c *PacketConn) error {
			return muIs((c.RemoteAddr() != nil) == (how == "dialed"), "RemoteAddr is %v", c.RemoteAddr())
		}},
		{method: "Read", args: "buf", want: muClosed, call: func(c *PacketConn) error { _, err := c.Read(make([]byte, 8)); return err }},
		{method: "Read", args: "nil", want: muClosed, call: func(c *PacketConn) error { _, err := c.Read(nil); return err }},
		{method: "ReadFrom", args: "buf", want: muClosed, call: func(c *PacketConn) error { _, _, err := c.ReadFrom(make([]byte, 8)); return err }},
		{method: "ReadFrom", args: "nil", want: muClosed, call: func(c *PacketConn) error { _, _, err := c.ReadFrom(nil); return err }},
		{method: "ReadFromAddrPort", args: "buf", want: muClosed, call: func(c *PacketConn) error { _, _, err := c.ReadFromAddrPort(make([]byte, 8)); return err }},
		{method: "ReadFromAddrPort", args: "nil", want: muClosed, call: func(c *PacketConn) error { _, _, err := c.ReadFromAddrPort(nil); return err }},
		{method: "ReadMsgUDP", args: "buf, oob", want: muClosed, call: func(c *PacketConn) error {
			_, _, _, _, err := c.ReadMsgUDP(make([]byte, 8), make([]byte, 64))
			return err
		}},
		{method: "ReadMsgUDP", args: "nil, nil", want: muClosed, call: func(c *PacketConn) error { _, _, _, _, err := c.ReadMsgUDP(nil, nil); return err }},
		{method: "ReadMsgUDPAddrPort", args: "buf, oob", want: muClosed, call: func(c *PacketConn) error {
			_, _, _, _, err := c.ReadMsgUDPAddrPort(make([]byte, 8), make([]byte, 64))
			return err
		}},
		{method: "WriteMsgUDP", args: "buf, nil, addr", want: addressed, call: func(c *PacketConn) error {
			_, _, err := c.WriteMsgUDP([]byte("x"), nil, net.UDPAddrFromAddrPort(pcAddrPort(peer)))
			return err
		}},
		{method: "WriteMsgUDPAddrPort", args: "buf, nil, addr", want: addressed, call: func(c *PacketConn) error {
			_, _, err := c.WriteMsgUDPAddrPort([]byte("x"), nil, pcAddrPort(peer))
			return err
		}},
		{method: "ReadBatch", args: "batch", want: muClosed, call: func(c *PacketConn) error { _, err := c.ReadBatch(batch); return err }},
		{method: "MessageConn", args: "ReadBatch", want: muClosed, call: func(c *PacketConn) error {
			_, err := c.MessageConn().ReadBatch([]ipv4.Message{{Buffers: [][]byte{make([]byte, 8)}}}, 0)
			return err
		}},
		{method: "MessageConn", args: "ReadBatch nil", want: muClosed, call: func(c *PacketConn) error { _, err := c.MessageConn().ReadBatch(nil, 0); return err }},
		{method: "ReadBatch", args: "nil", want: muError, call: func(c *PacketConn) error { _, err := c.ReadBatch(nil); return err }},
		{method: "SetDeadline", args: "now", want: muClosed, call: func(c *PacketConn) error { return c.SetDeadline(time.Now()) }},
		{method: "SetDeadline", args: "zero", want: muClosed, call: func(c *PacketConn) error { return c.SetDeadline(time.Time{}) }},
		{method: "SetReadDeadline", args: "now", want: muClosed, call: func(c *PacketConn) error { return c.SetReadDeadline(time.Now()) }},
		{method: "SetReadDeadline", args: "zero", want: muClosed, call: func(c *PacketConn) error { return c.SetReadDeadline(time.Time{}) }},
		{method: "SetWriteDeadline", args: "now", want: muClosed, call: func(c *PacketConn) error { return c.SetWriteDeadline(time.Now()) }},
		{method: "SetWriteDeadline", args: "zero", want: muClosed, call: func(c *PacketConn) error { return c.SetWriteDeadline(time.Time{}) }},
		{method: "SetReadBuffer", args: "64 KiB", want: muClosed, call: func(c *PacketConn) error { return c.SetReadBuffer(64 << 10) }},
		{method: "SetReadBuffer", args: "0", want: muClosed, call: func(c *PacketConn) error { return c.SetReadBuffer(0) }},
		{method: "SetWriteBuffer", args: "64 KiB", want: muClosed, call: func(c *PacketConn) error { return c.SetWriteBuffer(64 << 10) }},
		{method: "SetWriteBuffer", args: "0", want: muClosed, call: func(c *PacketConn) error { return c.SetWriteBuffer(0) }},
		{method: "Stats", want: muValue, call: func(c *PacketConn) error { c.Stats(); return nil }},
		{method: "SyscallConn", want: muValue, call: func(c *PacketConn) error { rc, err := c.SyscallConn(); return muRaw(rc, err, net.ErrClosed) }},
		{method: "Write", args: "buf", want: muClosed, call: func(c *PacketConn) error { _, err := c.Write([]byte("x")); return err }},
		{method: "Write", args: "nil", want: muClosed, call: func(c *PacketConn) error { _, err := c.Write(nil); return err }},
		{method: "WriteTo", args: "buf, addr", want: addressed, call: func(c *PacketConn) error {
			_, err := c.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(pcAddrPort(peer)))
			return err
		}},
		{method: "WriteTo", args: "nil, nil", want: muError, call: func(c *PacketConn) error { _, err := c.WriteTo(nil, nil); return err }},
		{method: "WriteToAddrPort", args: "buf, addr", want: addressed, call: func(c *PacketConn) error { _, err := c.WriteToAddrPort([]byte("x"), pcAddrPort(peer)); return err }},
		{method: "WriteToAddrPort", args: "nil, zero", want: muError, call: func(c *PacketConn) error { _, err := c.WriteToAddrPort(nil, netip.AddrPort{}); return err }},
		{method: "WriteBatch", args: "one packet", want: muClosed, call: func(c *PacketConn) error {
			_, err := c.WriteBatch([]Packet{{Data: []byte("x"), Addr: to}})
			return err
		}},
		{method: "WriteBatch", args: "nil", want: muClosed, call: func(c *PacketConn) error { _, err := c.WriteBatch(nil); return err }},
	}
	muRun(t, net.ErrClosed, func() *PacketConn { return c }, calls)
	muRun(t, net.ErrClosed, func() *Batch { return batch }, []muCall[*Batch]{
		{method: "Release", want: muValue, call: func(b *Batch) error { b.Release(); b.Release(); return nil }},
	})
}

// muPacketServer checks a PacketServer after Shutdown or Close: serving
// fails with ErrServerClosed (closing what it was given); Close and
// Shutdown may be called again, as net/http's Server's may.
func muPacketServer(t *testing.T, e Engine, how string) {
	s, err := NewPacketServer(psEcho, WithEngine(e))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(pcListen(t, e, "udp4", "127.0.0.1:0")) }()
	if how == "Close" {
		err = s.Close()
	} else {
		err = s.Shutdown(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := tsRecv(t, served, "Serve to return"); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v, want ErrServerClosed", err)
	}
	const again = "idempotent, as net/http's Server's Close and Shutdown are"
	calls := []muCall[*PacketServer]{
		{method: "Close", want: muOK, why: again, call: func(s *PacketServer) error { return s.Close() }},
		{method: "Shutdown", args: "ctx", want: muOK, why: again, call: func(s *PacketServer) error { return s.Shutdown(context.Background()) }},
		{method: "Serve", args: "conn", want: muClosed, call: func(s *PacketServer) error {
			c := pcListen(t, e, "udp4", "127.0.0.1:0")
			err := s.Serve(c)
			if cerr := c.Close(); !errors.Is(cerr, net.ErrClosed) {
				return fmt.Errorf("Serve returned %v and left its PacketConn open (Close: %v)", err, cerr)
			}
			return err
		}},
		{method: "Serve", args: "none", want: muClosed, call: func(s *PacketServer) error { return s.Serve() }},
		{method: "Serve", args: "nil", want: muClosed, call: func(s *PacketServer) error { return s.Serve(nil) }},
		{method: "ListenAndServe", args: `"udp4", addr`, want: muClosed, call: func(s *PacketServer) error { return s.ListenAndServe("udp4", "127.0.0.1:0") }},
		{method: "ListenAndServe", args: `"", ""`, want: muError, call: func(s *PacketServer) error { return s.ListenAndServe("", "") }},
		// nil if the Serve above was refused before it took its socket.
		{method: "Addr", want: muValue, call: func(s *PacketServer) error {
			a, ok := s.Addr().(*net.UDPAddr)
			return muIs(s.Addr() == nil || ok && a.Port != 0, "Addr is %v", s.Addr())
		}},
	}
	muRun(t, ErrServerClosed, func() *PacketServer { return s }, calls)
}

// muFile checks a closed File: every request fails with os.ErrClosed, as
// an os.File's do, empty ones included.
func muFile(t *testing.T, e Engine) {
	f := fileOpen(t, e, filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	calls := []muCall[*File]{
		{method: "Close", want: muClosed, call: func(f *File) error { return f.Close() }},
		{method: "Name", want: muValue, call: func(f *File) error { return muIs(f.Name() != "", "Name is empty") }},
		{method: "Read", args: "buf", want: muClosed, call: func(f *File) error { _, err := f.Read(buf); return err }},
		{method: "Read", args: "nil", want: muClosed, call: func(f *File) error { _, err := f.Read(nil); return err }},
		{method: "ReadAt", args: "buf, 0", want: muClosed, call: func(f *File) error { _, err := f.ReadAt(buf, 0); return err }},
		{method: "ReadAt", args: "nil, 0", want: muClosed, call: func(f *File) error { _, err := f.ReadAt(nil, 0); return err }},
		{method: "ReadAt", args: "buf, -1", want: muError, call: func(f *File) error { _, err := f.ReadAt(buf, -1); return err }},
		{method: "WriteAt", args: "buf, 0", want: muClosed, call: func(f *File) error { _, err := f.WriteAt(buf, 0); return err }},
		{method: "WriteAt", args: "nil, 0", want: muClosed, call: func(f *File) error { _, err := f.WriteAt(nil, 0); return err }},
		{method: "WriteAt", args: "buf, -1", want: muError, call: func(f *File) error { _, err := f.WriteAt(buf, -1); return err }},
		{method: "Sync", want: muClosed, call: func(f *File) error { return f.Sync() }},
	}
	muRun(t, os.ErrClosed, func() *File { return f }, calls)
}
