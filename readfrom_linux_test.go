//go:build linux

package ringpoll

// Conn.ReadFrom (sendfile, splice, the stall piece, the copy) and
// Conn.WriteTo, on every engine. The zero-copy paths are proven by the
// system calls they counted (LoopStats), never by timing.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// rfCounts are the ReadFrom counters, summed over an engine's loops.
type rfCounts struct {
	sendfiles, sendfileBytes, splices, spliceBytes, stalls, copied, rfCopied uint64
}

func rfCount(c *Conn) rfCounts {
	var n rfCounts
	for _, s := range loopStatsOf(c) {
		n.sendfiles += s.Sendfiles
		n.sendfileBytes += s.SendfileBytes
		n.splices += s.Splices
		n.spliceBytes += s.SpliceBytes
		n.stalls += s.SendStalls
		n.copied += s.SendCopied
		n.rfCopied += s.ReadFromCopied
	}
	return n
}

func (a rfCounts) sub(b rfCounts) rfCounts {
	return rfCounts{a.sendfiles - b.sendfiles, a.sendfileBytes - b.sendfileBytes, a.splices - b.splices,
		a.spliceBytes - b.spliceBytes, a.stalls - b.stalls, a.copied - b.copied, a.rfCopied - b.rfCopied}
}

func (a rfCounts) String() string {
	return fmt.Sprintf("sendfile %d calls %d B, splice %d calls %d B, %d stalls copied %d B, copied without zero-copy %d B",
		a.sendfiles, a.sendfileBytes, a.splices, a.spliceBytes, a.stalls, a.copied, a.rfCopied)
}

// rfFile writes data to a new file and returns it open for reading.
func rfFile(t testing.TB, data []byte) *os.File {
	t.Helper()
	name := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// rfBuffers sets SO_RCVBUF (if rcv) or SO_SNDBUF on the socket behind rc.
func rfBuffers(rc syscall.RawConn, rcv bool, n int) error {
	opt := unix.SO_SNDBUF
	if rcv {
		opt = unix.SO_RCVBUF
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt, n) }); err != nil {
		return err
	}
	return serr
}

// rfSmallBuf is the socket buffer size of the pairs whose output must back
// up: small beside the files sent, so a peer that does not read fills
// both buffers long before the end.
const rfSmallBuf = 16 << 10

// rfPair returns a connected ringpoll Conn on e and its peer from package
// net, closed at the end of the test. With small, the peer's receive
// buffer (set before connecting, so the window is small from the start)
// and the Conn's send buffer are rfSmallBuf.
func rfPair(t *testing.T, e Engine, side tsSide, small bool) (*Conn, net.Conn) {
	t.Helper()
	ctl := func(_, _ string, rc syscall.RawConn) error {
		if !small {
			return nil
		}
		return rfBuffers(rc, true, rfSmallBuf)
	}
	var c *Conn
	var peer net.Conn
	if side == tsAccepted {
		ln := listen(t, e, "tcp")
		d := net.Dialer{Timeout: tsTimeout, Control: ctl}
		p, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		peer = p
		if c, err = ln.AcceptConn(); err != nil {
			peer.Close()
			t.Fatal(err)
		}
	} else {
		lc := net.ListenConfig{Control: ctl}
		sl, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer sl.Close()
		c = tsDialRing(t, e, "tcp", sl.Addr().String())
		if peer, err = sl.Accept(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	if small {
		rc, _ := c.SyscallConn()
		if err := rfBuffers(rc, false, rfSmallBuf); err != nil {
			t.Fatal(err)
		}
	}
	return c, peer
}

type rfRead struct {
	data []byte
	err  error
}

// rfReadAll reads peer to its end on a goroutine of its own, starting when
// start is closed (nil: at once).
func rfReadAll(peer net.Conn, start <-chan struct{}) <-chan rfRead {
	res := make(chan rfRead, 1)
	go func() {
		if start != nil {
			<-start
		}
		peer.SetReadDeadline(time.Now().Add(tsTimeout))
		b, err := io.ReadAll(peer)
		res <- rfRead{b, err}
	}()
	return res
}

// rfCheckData fails unless got is want, naming the first difference.
func rfCheckData(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got %d bytes, want %d; first difference at %d", what, len(got), len(want), firstDiff(got, want))
	}
}

// rfFinish waits for a ReadFrom of all of data to return it all, half-closes
// c, and checks that the peer read exactly data before EOF.
func rfFinish(t *testing.T, c *Conn, res <-chan rfResult, got <-chan rfRead, data []byte) {
	t.Helper()
	r := tsRecv(t, res, "ReadFrom")
	if r.err != nil || r.n != int64(len(data)) {
		t.Fatalf("ReadFrom returned (%d, %v), want (%d, nil)", r.n, r.err, len(data))
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	p := <-got
	if p.err != nil {
		t.Fatal(p.err)
	}
	rfCheckData(t, "the peer", p.data, data)
}

type rfResult struct {
	n   int64
	err error
}

// rfCase is one way to hand ReadFrom a file: prep positions f and returns
// the reader, start is the file offset of the first byte it yields, and
// after reads the state it leaves (the file offset, and a LimitedReader's
// N or a SectionReader's position) to compare with std net's.
type rfCase struct {
	name  string
	size  int
	start int64
	prep  func(f *os.File) io.Reader
	copy  func(dst net.Conn, r io.Reader) (int64, error) // nil: dst.ReadFrom
}

func rfState(f *os.File, r io.Reader) string {
	off, err := f.Seek(0, io.SeekCurrent)
	s := fmt.Sprintf("file offset %d (%v)", off, err)
	switch r := r.(type) {
	case *io.LimitedReader:
		s += fmt.Sprintf(", LimitedReader.N %d", r.N)
	case *io.SectionReader:
		pos, _ := r.Seek(0, io.SeekCurrent)
		s += fmt.Sprintf(", section position %d", pos)
	}
	return s
}

var rfCases = []rfCase{
	{name: "file", size: 3 << 20},
	{name: "io.Copy", size: 3 << 20, copy: func(dst net.Conn, r io.Reader) (int64, error) { return io.Copy(dst, r) }},
	{name: "offset", size: 3 << 20, start: 12345, prep: func(f *os.File) io.Reader {
		f.Seek(12345, io.SeekStart)
		return f
	}},
	{name: "limited", size: 3 << 20, prep: func(f *os.File) io.Reader { return io.LimitReader(f, 2<<20+3) }},
	{name: "limited-offset", size: 3 << 20, start: 777, prep: func(f *os.File) io.Reader {
		f.Seek(777, io.SeekStart)
		return io.LimitReader(f, 1<<20)
	}},
	{name: "short-file-larger-limit", size: 10000, prep: func(f *os.File) io.Reader { return io.LimitReader(f, 1<<20) }},
	{name: "empty", size: 0},
	{name: "empty-limited", size: 0, prep: func(f *os.File) io.Reader { return io.LimitReader(f, 100) }},
	{name: "section", size: 3 << 20, start: 4096 + 100, prep: func(f *os.File) io.Reader {
		s := io.NewSectionReader(f, 4096, 2<<20)
		s.Read(make([]byte, 100)) // start within the section
		return s
	}},
}

func (rc rfCase) reader(f *os.File) io.Reader {
	if rc.prep == nil {
		return f
	}
	return rc.prep(f)
}

func (rc rfCase) run(dst net.Conn, r io.Reader) (int64, error) {
	if rc.copy != nil {
		return rc.copy(dst, r)
	}
	return dst.(io.ReaderFrom).ReadFrom(r)
}

// rfStd runs rc with std net's TCPConn.ReadFrom: what ReadFrom returns and
// the state it leaves, for ringpoll's to match.
func rfStd(t *testing.T, rc rfCase, data []byte) (int64, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	src, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	got := rfReadAll(peer, nil)
	f := rfFile(t, data)
	r := rc.reader(f)
	n, err := rc.run(src, r)
	if err != nil {
		t.Fatalf("std: %v", err)
	}
	src.Close()
	if res := <-got; res.err != nil || int64(len(res.data)) != n {
		t.Fatalf("std: the peer read %d bytes (%v), ReadFrom returned %d", len(res.data), res.err, n)
	}
	return n, rfState(f, r)
}

// TestReadFromFile sends files with ReadFrom, every way std net's
// TCPConn.ReadFrom takes one: the peer gets every byte, ReadFrom returns
// and leaves what std's does (the count, the file offset, a
// LimitedReader's N, a SectionReader's position), and sendfile moved every
// byte: a full socket is waited for, not copied around.
func TestReadFromFile(t *testing.T) {
	data := pattern(3 << 20)
	type want struct {
		n     int64
		state string
	}
	wants := map[string]want{}
	for _, rc := range rfCases {
		n, state := rfStd(t, rc, data[:rc.size])
		wants[rc.name] = want{n, state}
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for i, rc := range rfCases {
			t.Run(rc.name, func(t *testing.T) {
				side := tsSides[i%len(tsSides)]
				c, peer := rfPair(t, e, side, false)
				f := rfFile(t, data[:rc.size])
				r := rc.reader(f)
				got := rfReadAll(peer, nil)
				before := rfCount(c)
				n, err := rc.run(c, r)
				d := rfCount(c).sub(before)
				if err != nil {
					t.Fatalf("ReadFrom: %v", err)
				}
				if err := c.CloseWrite(); err != nil {
					t.Fatalf("CloseWrite: %v", err)
				}
				res := <-got
				if res.err != nil {
					t.Fatalf("peer: %v", res.err)
				}
				w := wants[rc.name]
				if n != w.n {
					t.Errorf("ReadFrom returned %d, std net's %d", n, w.n)
				}
				if s := rfState(f, r); s != w.state {
					t.Errorf("after ReadFrom: %s; after std net's: %s", s, w.state)
				}
				rfCheckData(t, "the peer", res.data, data[rc.start:rc.start+n])
				t.Logf("%s side: %v", side, d)
				if d.sendfiles == 0 {
					t.Errorf("no sendfile call counted (%v)", d)
				}
				if d.sendfileBytes != uint64(n) || d.copied != 0 || d.spliceBytes != 0 || d.rfCopied != 0 {
					t.Errorf("counted %v; want %d bytes by sendfile, none copied", d, n)
				}
			})
		}
	})
}

// rfBlocked starts ReadFrom of data's file on c, whose peer does not
// read, and returns once the socket filled and ReadFrom waits for it to
// become writable: a stall counted, and the call parked.
func rfBlocked(t *testing.T, c *Conn, data []byte) <-chan rfResult {
	t.Helper()
	before := rfCount(c)
	res := rfStart(t, c, data)
	tsEventually(t, "ReadFrom to find the socket full", func() bool { return rfCount(c).sub(before).stalls > 0 })
	tsWaitBlocked(t, "poll.(*FD).await(", "ringpoll.(*Conn).ReadFrom(") // for the socket to become writable
	select {
	case r := <-res:
		t.Fatalf("ReadFrom to a peer that does not read returned (%d, %v)", r.n, r.err)
	default:
	}
	return res
}

// rfStart starts a ReadFrom of data's file on c.
func rfStart(t *testing.T, c *Conn, data []byte) <-chan rfResult {
	f := rfFile(t, data)
	res := make(chan rfResult, 1)
	go func() {
		n, err := c.ReadFrom(f)
		res <- rfResult{n, err}
	}()
	return res
}

// TestReadFromBackpressure: the peer does not read until ReadFrom has
// filled the socket (a small receive window and send buffer, a file 256
// times their size) and waits for room; then it reads everything, in
// order, every byte moved by sendfile (none copied around the full
// socket), and the zero-copy sends resumed after the stall.
func TestReadFromBackpressure(t *testing.T) {
	data := pattern(4 << 20)
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			t.Run(string(side), func(t *testing.T) {
				c, peer := rfPair(t, e, side, true)
				before := rfCount(c)
				res := rfBlocked(t, c, data)
				stalled := rfCount(c).sub(before)
				start := make(chan struct{})
				got := rfReadAll(peer, start)
				close(start)
				rfFinish(t, c, res, got, data)
				d := rfCount(c).sub(before)
				t.Logf("%v", d)
				if d.sendfileBytes != uint64(len(data)) || d.copied != 0 {
					t.Errorf("counted %v; want %d bytes by sendfile, none copied", d, len(data))
				}
				if d.sendfileBytes <= stalled.sendfileBytes {
					t.Errorf("no sendfile after the stall: %v at the stall, %v at the end", stalled, d)
				}
			})
		}
	})
}

// TestReadFromOrder: bytes written before ReadFrom (Write, and a Writer's
// Flush) go out before the file's, even while the loop still holds them
// queued, and a Write after it follows it.
func TestReadFromOrder(t *testing.T) {
	head := tsRandom(1, 1<<20)
	mid := tsRandom(2, 1000)
	file := pattern(2 << 20)
	tail := tsRandom(3, 70000)
	want := bytes.Join([][]byte{head, mid, file, tail}, nil)
	forEachEngine(t, func(t *testing.T, e Engine) {
		c, peer := rfPair(t, e, tsDialed, true)
		if _, err := c.Write(head); err != nil {
			t.Fatal(err)
		}
		c.Writer().WriteBinary(mid)
		if err := c.Writer().Flush(); err != nil {
			t.Fatal(err)
		}
		if c.fd.OutputQueued() == 0 {
			t.Fatal("nothing queued after 1 MiB into a 16 KiB window: the test proves nothing")
		}
		before := rfCount(c)
		res := make(chan rfResult, 1)
		go func() {
			n, err := c.ReadFrom(rfFile(t, file))
			res <- rfResult{n, err}
		}()
		// It waits for the queue to drain before it sends.
		tsWaitBlocked(t, "poll.(*FD).await(", "ringpoll.(*Conn).ReadFrom(") // for the socket to become writable
		got := rfReadAll(peer, nil)
		if r := tsRecv(t, res, "ReadFrom"); r.err != nil || r.n != int64(len(file)) {
			t.Fatalf("ReadFrom returned (%d, %v)", r.n, r.err)
		}
		if _, err := c.Write(tail); err != nil {
			t.Fatal(err)
		}
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		p := <-got
		if p.err != nil {
			t.Fatal(p.err)
		}
		rfCheckData(t, "the peer", p.data, want)
		if d := rfCount(c).sub(before); d.sendfiles == 0 {
			t.Errorf("no sendfile counted: %v", d)
		}
	})
}

// rfStdPair returns the two ends of a connection from package net on
// network ("tcp" or "unix"), closed at the end of the test.
func rfStdPair(t *testing.T, network string) (net.Conn, net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestReadFromSocket: ReadFrom a socket of package net splices through a
// pipe (counted), whole or limited; from another ringpoll Conn it copies
// (its input is in memory already). Every byte arrives in order.
func TestReadFromSocket(t *testing.T) {
	data := tsRandom(7, 3<<20)
	type source struct {
		name   string
		src    func(t *testing.T, e Engine) (w, r net.Conn)
		limit  int64 // 0: all
		splice bool
	}
	sources := []source{
		{"tcp", func(t *testing.T, _ Engine) (net.Conn, net.Conn) { return rfStdPair(t, "tcp") }, 0, true},
		{"unix", func(t *testing.T, _ Engine) (net.Conn, net.Conn) { return rfStdPair(t, "unix") }, 0, true},
		{"tcp-limited", func(t *testing.T, _ Engine) (net.Conn, net.Conn) { return rfStdPair(t, "tcp") }, 1<<20 + 5, true},
		{"ringpoll", func(t *testing.T, e Engine) (net.Conn, net.Conn) {
			c, peer := rfPair(t, e, tsAccepted, false)
			return peer, c
		}, 0, false},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, s := range sources {
			t.Run(s.name, func(t *testing.T) {
				c, peer := rfPair(t, e, tsDialed, false)
				w, r := s.src(t, e)
				sent := make(chan error, 1)
				go func() {
					err := <-tsWriteAsync(w, data)
					if err == nil {
						err = tsCloseWrite(w) // the source's end
					}
					sent <- err
				}()
				got := rfReadAll(peer, nil)
				var src io.Reader = r
				want := data
				if s.limit > 0 {
					src = io.LimitReader(r, s.limit)
					want = data[:s.limit]
				}
				before := rfCount(c)
				r.SetReadDeadline(time.Now().Add(tsTimeout))
				n, err := c.ReadFrom(src)
				d := rfCount(c).sub(before)
				if err != nil || n != int64(len(want)) {
					t.Fatalf("ReadFrom returned (%d, %v), want (%d, nil)", n, err, len(want))
				}
				if s.limit > 0 {
					if lr := src.(*io.LimitedReader); lr.N != 0 {
						t.Errorf("LimitedReader.N = %d after ReadFrom, want 0", lr.N)
					}
					// The rest is still the source's.
					rest, err := io.ReadAll(r)
					if err != nil {
						t.Fatal(err)
					}
					rfCheckData(t, "the rest of the source", rest, data[s.limit:])
				}
				if err := <-sent; err != nil {
					t.Fatal(err)
				}
				c.CloseWrite()
				p := <-got
				if p.err != nil {
					t.Fatal(p.err)
				}
				rfCheckData(t, "the peer", p.data, want)
				t.Logf("%v", d)
				if s.splice {
					if d.splices == 0 || d.spliceBytes != uint64(n) || d.copied != 0 || d.rfCopied != 0 {
						t.Errorf("counted %v; want %d bytes by splice, none copied", d, n)
					}
				} else if d.rfCopied != uint64(n) || d.splices+d.sendfiles != 0 {
					t.Errorf("counted %v; want %d bytes copied", d, n)
				}
			})
		}
	})
}

// TestReadFromInterrupted: a ReadFrom blocked on a full socket returns when
// the write deadline passes (every byte it counted then reaches the peer),
// when the connection is closed (net.ErrClosed), or when the peer resets
// it (the error Write would return).
func TestReadFromInterrupted(t *testing.T) {
	data := pattern(4 << 20)
	forEachEngine(t, func(t *testing.T, e Engine) {
		t.Run("deadline", func(t *testing.T) {
			c, peer := rfPair(t, e, tsAccepted, true)
			res := rfBlocked(t, c, data)
			c.SetWriteDeadline(time.Now())
			r := tsRecv(t, res, "ReadFrom after the deadline")
			tsCheckDeadlineErr(t, "ReadFrom", r.err)
			rfCheckOp(t, r.err)
			if r.n <= 0 || r.n >= int64(len(data)) {
				t.Fatalf("ReadFrom returned n=%d, want 0 < n < %d", r.n, len(data))
			}
			// What it counted is sent or queued: the peer gets exactly that.
			c.SetWriteDeadline(time.Time{})
			got := rfReadAll(peer, nil)
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			p := <-got
			if p.err != nil {
				t.Fatal(p.err)
			}
			rfCheckData(t, "the peer", p.data, data[:r.n])
		})
		t.Run("close", func(t *testing.T) {
			c, _ := rfPair(t, e, tsAccepted, true)
			res := rfBlocked(t, c, data)
			c.Close()
			r := tsRecv(t, res, "ReadFrom after Close")
			if !errors.Is(r.err, net.ErrClosed) {
				t.Errorf("ReadFrom returned %v, want net.ErrClosed", r.err)
			}
			rfCheckOp(t, r.err)
		})
		t.Run("reset", func(t *testing.T) {
			c, peer := rfPair(t, e, tsDialed, true)
			res := rfBlocked(t, c, data)
			if err := tsResetOnClose(peer); err != nil {
				t.Fatal(err)
			}
			peer.Close()
			r := tsRecv(t, res, "ReadFrom after the peer's reset")
			if !tsWriteReset(r.err) {
				t.Errorf("ReadFrom returned %v, want ECONNRESET or EPIPE", r.err)
			}
			rfCheckOp(t, r.err)
			if _, err := c.Write([]byte("x")); !tsWriteReset(err) {
				t.Errorf("Write after the reset returned %v, want ECONNRESET or EPIPE", err)
			}
		})
	})
}

// rfCheckOp fails unless err is a *net.OpError for "readfrom".
func rfCheckOp(t *testing.T, err error) {
	t.Helper()
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "readfrom" {
		t.Errorf("ReadFrom's error %v (%T) is not a *net.OpError with Op readfrom", err, err)
	}
}

// TestReadFromInline: a handler run on the loop (WithInlineHandler) sends a
// file with ReadFrom: it never waits, queueing what the socket does not
// take, and the client gets every byte.
func TestReadFromInline(t *testing.T) {
	data := pattern(2 << 20)
	forEachEngine(t, func(t *testing.T, e Engine) {
		f := rfFile(t, data)
		ln := listen(t, e, "tcp")
		errs := make(chan error, 1)
		tsServeHandler(t, ln, func(ctx context.Context, c *Conn) error {
			if _, err := c.Reader().Next(2); err != nil {
				return err
			}
			n, err := c.ReadFrom(f)
			if err == nil && n != int64(len(data)) {
				err = fmt.Errorf("ReadFrom returned %d bytes, want %d", n, len(data))
			}
			errs <- err
			if err != nil {
				return err
			}
			return c.CloseWrite()
		}, WithInlineHandler())
		client := tsDialStd(t, "tcp", ln.Addr().String())
		got := rfReadAll(client, nil)
		client.Write([]byte("go"))
		if err := tsRecv(t, errs, "the handler's ReadFrom"); err != nil {
			t.Fatal(err)
		}
		p := <-got
		if p.err != nil {
			t.Fatal(p.err)
		}
		rfCheckData(t, "the client", p.data, data)
	})
}

// TestReadFromServeFile: http.ServeFile on a ringpoll listener answers with
// the whole file, sent with sendfile (after the 512 bytes net/http sniffs
// by copying).
func TestReadFromServeFile(t *testing.T) {
	data := pattern(3<<20 + 17)
	forEachEngine(t, func(t *testing.T, e Engine) {
		f := rfFile(t, data)
		ln := listen(t, e, "tcp")
		// The handler counts its sends as it makes them, the last after
		// the peer may have its bytes: the counters are read once it
		// returned.
		handled := make(chan struct{}, 1)
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.ServeFile(w, r, f.Name())
				handled <- struct{}{}
			}),
			ReadHeaderTimeout: tsTimeout,
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), tsTimeout)
			defer cancel()
			srv.Shutdown(ctx)
			<-served
		}()
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", ln.Addr().String())
		}}
		defer tr.CloseIdleConnections()
		before := loopStatsOf(ln)
		resp, body, err := httpDo(&http.Client{Transport: tr, Timeout: tsTimeout}, mustGet(t, httpURL("/file")))
		if err != nil {
			t.Fatal(err)
		}
		if resp.ContentLength != int64(len(data)) {
			t.Errorf("Content-Length %d, want %d", resp.ContentLength, len(data))
		}
		rfCheckData(t, "the body", body, data)
		tsRecv(t, handled, "the handler to return")
		var d rfCounts
		for i, s := range loopStatsOf(ln) {
			d.sendfiles += s.Sendfiles - before[i].Sendfiles
			d.sendfileBytes += s.SendfileBytes - before[i].SendfileBytes
			d.copied += s.SendCopied - before[i].SendCopied
			d.stalls += s.SendStalls - before[i].SendStalls
		}
		t.Logf("%v", d)
		if d.sendfiles == 0 || d.sendfileBytes != uint64(len(data)-512) || d.copied != 0 {
			t.Errorf("counted %v; want %d bytes by sendfile, none copied", d, len(data)-512)
		}
	})
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// rfWriter records what it is given; after fail bytes it fails. If got
// is set, it sends there how many bytes it has recorded after each Write.
type rfWriter struct {
	buf  bytes.Buffer
	fail int
	err  error
	got  chan int
}

func (w *rfWriter) Write(p []byte) (int, error) {
	if w.got != nil {
		defer func() { w.got <- w.buf.Len() }()
	}
	if w.fail > 0 && w.buf.Len()+len(p) > w.fail {
		n := w.fail - w.buf.Len()
		w.buf.Write(p[:n])
		return n, w.err
	}
	return w.buf.Write(p)
}

// TestWriteTo: io.Copy(w, c) goes through Conn.WriteTo and delivers every
// byte, ending cleanly at the peer's EOF; the read deadline and w's error
// end it as they would end Read and io.Copy.
func TestWriteTo(t *testing.T) {
	data := tsRandom(11, 4<<20)
	forEachEngine(t, func(t *testing.T, e Engine) {
		t.Run("copy", func(t *testing.T) {
			c, peer := rfPair(t, e, tsAccepted, false)
			sent := tsWriteAsync(peer, data)
			go func() {
				if <-sent == nil {
					tsCloseWrite(peer)
				}
			}()
			var w rfWriter
			c.SetReadDeadline(time.Now().Add(tsTimeout))
			n, err := io.Copy(&w, c)
			if err != nil || n != int64(len(data)) {
				t.Fatalf("io.Copy returned (%d, %v), want (%d, nil)", n, err, len(data))
			}
			rfCheckData(t, "the copy", w.buf.Bytes(), data)
		})
		t.Run("deadline", func(t *testing.T) {
			c, peer := rfPair(t, e, tsDialed, false)
			peer.Write(data[:1000])
			c.SetReadDeadline(time.Now().Add(tsTimeout))
			res := make(chan rfResult, 1)
			w := rfWriter{got: make(chan int, 1000)}
			go func() {
				n, err := c.WriteTo(&w)
				res <- rfResult{n, err}
			}()
			// Every byte sent reached the writer before the deadline
			// passes (they may come in several Writes).
			for n := 0; n < 1000; {
				n = tsRecv(t, w.got, "the writer to get the 1000 bytes sent")
			}
			tsWaitBlocked(t, tsFrameRead, "ringpoll.(*Conn).WriteTo(")
			c.SetReadDeadline(time.Now())
			r := tsRecv(t, res, "WriteTo after the deadline")
			tsCheckDeadlineErr(t, "WriteTo", r.err)
			if r.n != 1000 {
				t.Errorf("WriteTo returned n=%d, want 1000", r.n)
			}
			rfCheckData(t, "the writer", w.buf.Bytes(), data[:1000])
		})
		t.Run("writer-error", func(t *testing.T) {
			c, peer := rfPair(t, e, tsAccepted, false)
			sent := tsWriteAsync(peer, data)
			defer func() { peer.Close(); <-sent }()
			errStop := errors.New("stop")
			w := rfWriter{fail: 100000, err: errStop}
			c.SetReadDeadline(time.Now().Add(tsTimeout))
			n, err := c.WriteTo(&w)
			if !errors.Is(err, errStop) || n != 100000 {
				t.Errorf("WriteTo returned (%d, %v), want (100000, %v)", n, err, errStop)
			}
			var oe *net.OpError
			if !errors.As(err, &oe) || oe.Op != "writeto" {
				t.Errorf("WriteTo's error %v is not a *net.OpError with Op writeto", err)
			}
		})
	})
}

// rfHoldWriter holds the first chunk WriteTo gives it until released.
type rfHoldWriter struct {
	got     chan int
	release chan struct{}
	held    []byte
	buf     bytes.Buffer
}

func (w *rfHoldWriter) Write(p []byte) (int, error) {
	if w.held == nil {
		w.held = p
		w.got <- len(p)
		<-w.release
	}
	w.buf.Write(p)
	return len(p), nil
}

// TestWriteToConcurrentRead: while WriteTo's writer holds a chunk of the
// input, a Read on another goroutine waits, though input has arrived
// behind the chunk: its release would free the chunk's memory. Once the
// writer returns, each byte goes to one of the two, in order, and the
// chunk kept its bytes.
func TestWriteToConcurrentRead(t *testing.T) {
	first := tsRandom(21, 64<<10)
	second := tsRandom(22, 1<<20)
	all := append(bytes.Clone(first), second...)
	forEachEngine(t, func(t *testing.T, e Engine) {
		c, peer := rfPair(t, e, tsAccepted, false)
		if _, err := peer.Write(first); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(tsTimeout))
		tsEventually(t, "the first bytes to arrive", func() bool { return c.Reader().Len() == len(first) })
		w := &rfHoldWriter{got: make(chan int, 1), release: make(chan struct{})}
		wres := make(chan rfResult, 1)
		go func() {
			n, err := c.WriteTo(w)
			wres <- rfResult{n, err}
		}()
		k := tsRecv(t, w.got, "the writer's first chunk")
		if _, err := peer.Write(second[:1000]); err != nil {
			t.Fatal(err)
		}
		tsEventually(t, "input behind the held chunk", func() bool { return c.Reader().Len() > 0 })
		type read struct {
			b   []byte
			err error
		}
		rres := make(chan read, 1)
		go func() {
			b := make([]byte, 64<<10)
			n, err := c.Read(b)
			rres <- read{b[:n], err}
		}()
		tsWaitBlocked(t, tsFrameRead, tsTestFrame(t))
		select {
		case r := <-rres:
			t.Fatalf("Read returned (%d bytes, %v) while WriteTo's writer held its chunk", len(r.b), r.err)
		default:
		}
		rfCheckData(t, "the held chunk", bytes.Clone(w.held), first[:k])
		close(w.release)
		if _, err := peer.Write(second[1000:]); err != nil {
			t.Fatal(err)
		}
		tsCloseWrite(peer)
		wr := tsRecv(t, wres, "WriteTo")
		if wr.err != nil {
			t.Fatalf("WriteTo: %v", wr.err)
		}
		// Read took one run of bytes after the chunk, or met the end
		// if WriteTo took everything; WriteTo took the rest.
		r := tsRecv(t, rres, "the Read")
		at := bytes.Index(all, r.b)
		switch {
		case len(r.b) == 0 && r.err != io.EOF, len(r.b) > 0 && r.err != nil:
			t.Fatalf("Read returned (%d bytes, %v)", len(r.b), r.err)
		case len(r.b) > 0 && at < k, w.buf.Len()+len(r.b) != len(all):
			t.Fatalf("Read took %d bytes (at %d), WriteTo %d, of %d", len(r.b), at, w.buf.Len(), len(all))
		case len(r.b) == 0:
			at = len(all)
		}
		t.Logf("WriteTo took %d bytes, Read %d", w.buf.Len(), len(r.b))
		rfCheckData(t, "what WriteTo took", w.buf.Bytes(), append(bytes.Clone(all[:at]), all[at+len(r.b):]...))
	})
}

// TestReadFromWritableEdge: a zero-copy send that finds the socket full
// waits for the loop's next writable edge, and copies nothing. The loop
// hears every edge once a send asked it to watch (epoll from the start, a
// ring from the first stall on), whether or not a send waits for it. A
// first ReadFrom stalls once, so that the loop watches, and the peer reads
// all it sent; a second fills the socket again and is held where it found
// it full, before it says it waits, while the peer reads everything. It
// goes on only once the loop heard the socket become writable (that edge
// came before anybody waited for it, and none comes again while the
// socket stays writable), so a send that then only waited would wait for
// ever. Every byte must arrive, on every engine.
func TestReadFromWritableEdge(t *testing.T) {
	first, data := pattern(1<<20), pattern(4<<20)
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			t.Run(string(side), func(t *testing.T) {
				c, peer := rfPair(t, e, side, true)
				stalled, gate, edges := make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1)
				var stalls, holdAt atomic.Int32
				restore := poll.SetTestHook(func(p poll.HookPoint, at *poll.FD) {
					switch {
					case at != c.fd:
					case p == poll.HookWritableEdge:
						select {
						case edges <- struct{}{}:
						default:
						}
					case p == poll.HookSendWantsWritable:
						if stalls.Add(1) == holdAt.Load() {
							stalled <- struct{}{}
							<-gate
						}
					}
				})
				defer restore()
				var release sync.Once
				open := func() { release.Do(func() { close(gate) }) }
				defer open() // a failed check must not leave the writer held
				before := rfCount(c)
				res := rfBlocked(t, c, first) // a stall: the loop watches from here on
				head := make([]byte, len(first))
				if _, err := io.ReadFull(peer, head); err != nil {
					t.Fatal(err)
				}
				rfCheckData(t, "the first file at the peer", head, first)
				if r := tsRecv(t, res, "the first ReadFrom"); r.err != nil || r.n != int64(len(first)) {
					t.Fatalf("the first ReadFrom returned (%d, %v), want (%d, nil)", r.n, r.err, len(first))
				}
				// The socket is empty and nobody reads: the second
				// ReadFrom fills it and is held at its first stall.
				holdAt.Store(stalls.Load() + 1)
				res2 := rfStart(t, c, data)
				tsRecv(t, stalled, "the second ReadFrom to find the socket full")
				for len(edges) > 0 { // edges heard before the socket filled
					<-edges
				}
				got := rfReadAll(peer, nil)
				tsRecv(t, edges, "the loop to hear the socket writable again")
				open()
				rfFinish(t, c, res2, got, data)
				if d := rfCount(c).sub(before); d.copied != 0 || d.stalls < 2 || d.sendfileBytes != uint64(len(first)+len(data)) {
					t.Errorf("counted %v; want every byte by sendfile, two stalls or more and nothing copied", d)
				}
			})
		}
	})
}

// TestReadFromCloseBeforeWatch: a zero-copy send that found the socket
// full asks its loop to watch for room only after the connection was
// closed and its loop let it go (the writer is held before it asks, until
// the peer read the end of the stream). The ask must not arm anything on
// the gone connection, nor leave the send waiting: it returns
// net.ErrClosed, every engine (TestMain counts what leaked).
func TestReadFromCloseBeforeWatch(t *testing.T) {
	data := pattern(4 << 20)
	forEachEngine(t, func(t *testing.T, e Engine) {
		c, peer := rfPair(t, e, tsAccepted, true)
		stalled, gate := make(chan struct{}, 1), make(chan struct{})
		var once sync.Once
		restore := poll.SetTestHook(func(p poll.HookPoint, at *poll.FD) {
			if p == poll.HookSendWantsWritable && at == c.fd {
				once.Do(func() {
					stalled <- struct{}{}
					<-gate
				})
			}
		})
		defer restore()
		res := rfStart(t, c, data)
		tsRecv(t, stalled, "ReadFrom to find the socket full")
		got := rfReadAll(peer, nil)
		c.Close()
		if p := tsRecv(t, got, "the peer to read to the end"); p.err != nil {
			t.Fatalf("peer: %v", p.err)
		}
		close(gate)
		if r := tsRecv(t, res, "ReadFrom after Close"); !errors.Is(r.err, net.ErrClosed) {
			t.Errorf("ReadFrom returned (%d, %v), want net.ErrClosed", r.n, r.err)
		}
	})
}
