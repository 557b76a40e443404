//go:build linux

package ringpoll

// Close, half-close and deadline tests. Helpers (ts*) are in stress_test.go.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestCloseListenerUnblocksAccept: Listener.Close wakes a blocked Accept
// with net.ErrClosed; a second Close and a later Accept fail with
// net.ErrClosed too.
func TestCloseListenerUnblocksAccept(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, network := range []string{"tcp", "unix"} {
			t.Run(network, func(t *testing.T) {
				ln := listen(t, e, network)
				done := make(chan error, 1)
				go func() {
					c, err := ln.Accept()
					if c != nil {
						c.Close()
					}
					done <- err
				}()
				tsWaitBlocked(t, tsFrameAccept, tsTestFrame(t))
				if err := ln.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				if err := tsRecv(t, done, "Accept to return after Close"); !errors.Is(err, net.ErrClosed) {
					t.Errorf("blocked Accept returned %v, want net.ErrClosed", err)
				}
				if err := ln.Close(); !errors.Is(err, net.ErrClosed) {
					t.Errorf("second Close returned %v, want net.ErrClosed", err)
				}
				if c, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
					t.Errorf("Accept after Close returned (%v, %v), want net.ErrClosed", c, err)
				}
			})
		}
	})
}

// TestCloseListenerRacesAccept closes listeners while their Accept is
// taking a queued connection. Accept must either fail with net.ErrClosed or
// return a working connection. A connection accepted as the listener drops
// the last reference to its engine must not be registered on the stopping
// engine: its loop would close the socket under the caller (Read then hangs
// for ever), or epoll_ctl would fail with EBADF, or the socket land on
// another loop's reused epoll descriptor (an index-out-of-range panic in
// dispatch).
//
// "between" replays the race deterministically: it takes the queued
// connection as Accept does, closes the listener, then registers it (plain
// and for a Server). "racing" races Accept and Close for real, four
// goroutines at once, each on an engine of its own (a distinct loop count)
// so that closing the listener stops that engine; it hits the window only
// now and then.
func TestCloseListenerRacesAccept(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, withServer := range []bool{false, true} {
			t.Run(fmt.Sprintf("between/server=%v", withServer), func(t *testing.T) {
				// No linger: closing the listener stops its engine at once,
				// racing the registration below.
				defer engineLinger.Store(engineLinger.Swap(0))
				var srv *Server
				if withServer {
					var err error
					if srv, err = NewServer(tsEchoHandler); err != nil {
						t.Fatal(err)
					}
					defer tsShutdown(srv, tsTimeout)
				}
				for round := range 50 {
					ln, err := Listen("tcp", "127.0.0.1:0", WithEngine(e), WithLoops(7))
					if err != nil {
						t.Fatal(err)
					}
					peer := tsDialStd(t, "tcp", ln.Addr().String())
					var sysfd int
					var raddr remote
					var aerr error
					if err := ln.rc.Read(func(fd uintptr) bool {
						sysfd, raddr, aerr = acceptSocket(int(fd), "tcp")
						return aerr != errAcceptAgain
					}); err != nil || aerr != nil {
						t.Fatalf("accept4: %v, %v", err, aerr)
					}
					ln.Close() // drops the engine's last reference
					cfg := ln.cfg
					if srv != nil {
						cfg = srv.connConfig(ln.cfg)
					}
					c, err := ln.newConn(sysfd, raddr, srv, cfg)
					if err == nil {
						// Acceptable only if the connection works (the
						// engine was still lingering). A Server's echo
						// handler answers the peer; a plain Conn reads.
						peer.Write([]byte("x"))
						var rerr error
						if srv != nil {
							peer.SetReadDeadline(time.Now().Add(tsTimeout))
							_, rerr = io.ReadFull(peer, make([]byte, 1))
						} else {
							c.SetReadDeadline(time.Now().Add(tsTimeout))
							_, rerr = c.Read(make([]byte, 1))
						}
						c.Close()
						if rerr != nil {
							t.Fatalf("round %d: a connection registered after its listener closed is dead: %v", round, rerr)
						}
					} else if !errors.Is(err, net.ErrClosed) {
						t.Fatalf("round %d: registering after the listener's engine stopped failed with %v, want net.ErrClosed", round, err)
					}
					peer.Close()
					if srv != nil {
						// A closed connection leaves the Server once its
						// loop finalized it.
						tsEventually(t, "the Server to forget the connection", func() bool {
							return (&tsServer{srv: srv}).live() == 0
						})
					}
				}
			})
		}
		t.Run("racing", func(t *testing.T) {
			const workers, rounds = 4, 1000
			errs := make(chan error, workers)
			var done atomic.Int64 // rounds finished: SQPOLL rings are slow to come and go
			for w := range workers {
				go func() {
					errs <- tsAcceptCloseRounds(e, 3+w, rounds, &done)
				}()
			}
			for range workers {
				if err := tsRecvProgress(t, errs, &done, "the accept/close rounds"); err != nil {
					t.Error(err)
				}
			}
		})
	})
}

// tsAcceptCloseRounds runs rounds of: listen, connect, Accept racing
// Close, and counts those it finished in done.
func tsAcceptCloseRounds(e Engine, loops, rounds int, done *atomic.Int64) error {
	b := make([]byte, 1)
	for i := range rounds {
		if i > 0 {
			done.Add(1)
		}
		ln, err := Listen("tcp", "127.0.0.1:0", WithEngine(e), WithLoops(loops))
		if err != nil {
			return err
		}
		peer, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			ln.Close()
			return err
		}
		// Closed by a reset, the connection leaves no TIME_WAIT socket
		// behind: 20,000 rounds of them would hold every ephemeral port
		// for a minute, and later listens and dials would fail.
		peer.(*net.TCPConn).SetLinger(0)
		type result struct {
			c   *Conn
			err error
		}
		got := make(chan result, 1)
		go func() {
			c, err := ln.AcceptConn()
			got <- result{c, err}
		}()
		ln.Close()
		r := <-got
		if r.c == nil {
			peer.Close()
			if !errors.Is(r.err, net.ErrClosed) {
				return fmt.Errorf("round %d: Accept racing Close returned %v, want net.ErrClosed", i, r.err)
			}
			continue
		}
		peer.Write([]byte("x"))
		r.c.SetReadDeadline(time.Now().Add(tsTimeout))
		n, err := r.c.Read(b)
		peer.Close()
		r.c.Close()
		if n != 1 {
			return fmt.Errorf("round %d: a connection accepted while the listener closed is dead: Read = %d, %v", i, n, err)
		}
	}
	return nil
}

// TestCloseUnblocks: Conn.Close wakes a blocked Read, Reader.Next, Write and
// Writer.Flush (blocked on the output high-water mark) with net.ErrClosed,
// on accepted and dialed connections; a second Close fails with
// net.ErrClosed.
func TestCloseUnblocks(t *testing.T) {
	cases := []struct {
		name  string
		frame string
		op    func(c *Conn) error
	}{
		{"Read", tsFrameRead, func(c *Conn) error {
			_, err := c.Read(make([]byte, 10))
			return err
		}},
		{"ReaderNext", tsFrameRead, func(c *Conn) error {
			_, err := c.Reader().Next(10)
			return err
		}},
		{"ReaderUntil", tsFrameRead, func(c *Conn) error {
			_, err := c.Reader().Until('\n')
			return err
		}},
		{"Write", tsFrameWrite, func(c *Conn) error {
			_, err := c.Write(tsBig)
			return err
		}},
		{"WriterFlush", tsFrameWrite, func(c *Conn) error {
			w := c.Writer()
			w.WriteBinary(tsBig)
			return w.Flush()
		}},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			for _, tc := range cases {
				t.Run(string(side)+"/"+tc.name, func(t *testing.T) {
					c, peer := tsPair(t, e, "tcp", side, WithOutputHighWater(4096), WithDrainTimeout(10*time.Millisecond))
					done := make(chan error, 1)
					go func() { done <- tc.op(c) }()
					tsWaitBlocked(t, tc.frame, tsTestFrame(t))
					if err := c.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
					if err := tsRecv(t, done, tc.name+" to return after Close"); !errors.Is(err, net.ErrClosed) {
						t.Errorf("blocked %s returned %v, want net.ErrClosed", tc.name, err)
					}
					if err := c.Close(); err == nil || !errors.Is(err, net.ErrClosed) {
						t.Errorf("second Close returned %v, want net.ErrClosed", err)
					}
					// The peer sees the connection end: EOF after whatever
					// was sent, or a reset.
					peer.SetReadDeadline(time.Now().Add(tsTimeout))
					if _, err := io.Copy(io.Discard, peer); err != nil && !tsReadReset(err) {
						t.Errorf("peer read after Close: %v", err)
					}
				})
			}
		}
	})
}

// TestCloseDrainsOutput: output queued when Close is called is still sent
// (the peer, reading only after Close, gets every byte, then EOF); with a
// peer that never reads, the socket is closed once the drain timeout
// passes.
func TestCloseDrainsOutput(t *testing.T) {
	// Under the output high-water mark: Write queues what the kernel does
	// not take, and returns.
	const size, high = 16 << 20, 32 << 20
	data := tsRandom(11, size)
	sum := sha256.Sum256(data)
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			t.Run(string(side)+"/drained", func(t *testing.T) {
				c, peer := tsPair(t, e, "tcp", side, WithOutputHighWater(high))
				c.SetWriteDeadline(time.Now().Add(tsTimeout))
				if _, err := c.Write(data); err != nil {
					t.Fatalf("Write: %v", err)
				}
				queued := c.fd.OutputQueued()
				if queued == 0 {
					t.Errorf("the kernel took all %d bytes; nothing left to drain", size)
				}
				if err := c.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				peer.SetReadDeadline(time.Now().Add(tsTimeout))
				got, err := io.ReadAll(peer)
				if h := sha256.Sum256(got); err != nil || !bytes.Equal(h[:], sum[:]) {
					t.Errorf("peer read %d bytes (%v) after Close with %d queued; want all %d", len(got), err, queued, size)
				}
				select {
				case <-c.fd.Done():
				case <-time.After(tsTimeout):
					t.Errorf("the descriptor was not closed after the output drained")
				}
			})
			t.Run(string(side)+"/drain-timeout", func(t *testing.T) {
				const drain = 100 * time.Millisecond
				c, peer := tsPair(t, e, "tcp", side, WithDrainTimeout(drain), WithOutputHighWater(high))
				c.SetWriteDeadline(time.Now().Add(tsTimeout))
				if _, err := c.Write(data); err != nil {
					t.Fatalf("Write: %v", err)
				}
				if c.fd.OutputQueued() == 0 {
					t.Fatalf("the kernel took all %d bytes; nothing left to drain", size)
				}
				expired := func() (n uint64) {
					for _, s := range loopStatsOf(c) {
						n += s.DrainsExpired
					}
					return n
				}
				before := expired()
				start := time.Now()
				c.Close()
				select {
				case <-c.fd.Done():
					if el := time.Since(start); el < drain/2 {
						t.Errorf("closed after %v, before the %v drain timeout although the peer reads nothing", el, drain)
					}
					if after := expired(); after <= before {
						t.Errorf("LoopStats.DrainsExpired went from %d to %d: the cut-short drain was not counted", before, after)
					}
				case <-time.After(tsTimeout):
					t.Fatalf("the descriptor was not closed %v after Close with a %v drain timeout", tsTimeout, drain)
				}
				// The bytes dropped when the drain gave up are not a
				// complete stream: the peer, reading only now, must be
				// told by a reset, never by a clean EOF.
				peer.SetReadDeadline(time.Now().Add(tsTimeout))
				got, err := io.Copy(io.Discard, peer)
				if !errors.Is(err, syscall.ECONNRESET) {
					t.Errorf("the peer read %d of %d bytes, then %v; want ECONNRESET after an expired drain", got, size, err)
				}
			})
		}
	})
}

// TestCloseThenUse: after Close every operation fails with net.ErrClosed.
func TestCloseThenUse(t *testing.T) {
	ops := []struct {
		name string
		op   func(c *Conn) error
	}{
		{"Read", func(c *Conn) error { _, err := c.Read(make([]byte, 1)); return err }},
		{"ReadEmpty", func(c *Conn) error { _, err := c.Read(nil); return err }},
		{"Write", func(c *Conn) error { _, err := c.Write([]byte("x")); return err }},
		{"WriteEmpty", func(c *Conn) error { _, err := c.Write(nil); return err }},
		{"ReaderNext", func(c *Conn) error { _, err := c.Reader().Next(1); return err }},
		{"ReaderPeek", func(c *Conn) error { _, err := c.Reader().Peek(1); return err }},
		{"ReaderSkip", func(c *Conn) error { return c.Reader().Skip(1) }},
		{"ReaderUntil", func(c *Conn) error { _, err := c.Reader().Until('\n'); return err }},
		{"WriterFlush", func(c *Conn) error {
			w := c.Writer()
			w.WriteString("x")
			return w.Flush()
		}},
		{"SetDeadline", func(c *Conn) error { return c.SetDeadline(time.Now().Add(time.Second)) }},
		{"SetReadDeadline", func(c *Conn) error { return c.SetReadDeadline(time.Now().Add(time.Second)) }},
		{"SetWriteDeadline", func(c *Conn) error { return c.SetWriteDeadline(time.Now().Add(time.Second)) }},
		{"CloseWrite", func(c *Conn) error { return c.CloseWrite() }},
		{"CloseRead", func(c *Conn) error { return c.CloseRead() }},
		{"Close", func(c *Conn) error { return c.Close() }},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			for _, expired := range []bool{false, true} {
				name := string(side)
				if expired {
					// Nor may a passed deadline: Close comes first.
					name += "/deadline-passed"
				}
				t.Run(name, func(t *testing.T) { ctUseAfterClose(t, e, side, expired, ops) })
			}
		}
	})
}

func ctUseAfterClose(t *testing.T, e Engine, side tsSide, expired bool, ops []struct {
	name string
	op   func(c *Conn) error
}) {
	c, peer := tsPair(t, e, "tcp", side)
	// Buffered input must not let reads succeed after Close.
	peer.Write([]byte("unread input\n"))
	tsEventually(t, "input to arrive", func() bool { return c.Reader().Len() > 0 })
	if expired {
		c.SetDeadline(time.Now().Add(-time.Second))
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, o := range ops {
		if err := o.op(c); !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s after Close returned %v, want net.ErrClosed", o.name, err)
		}
	}
}

// TestHalfClose: a peer's CloseWrite makes ringpoll read all data then
// io.EOF while it can still write a reply, in both server styles;
// ringpoll's CloseWrite (accepted and dialed) makes a package-net peer read
// all data then EOF while it can still write back; and ringpoll's CloseRead
// makes a blocked Read return io.EOF while writing still works.
func TestHalfClose(t *testing.T) {
	const size = 4 << 20
	data := tsRandom(42, size)
	sum := sha256.Sum256(data)
	type row struct {
		network string
		name    string
		run     func(t *testing.T, e Engine, network string)
	}
	// peerHalfClose: a package-net client sends data and CloseWrite; the
	// ringpoll server replies with the digest of what it read before EOF.
	peerHalfClose := func(style tsStyle) func(t *testing.T, e Engine, network string) {
		return func(t *testing.T, e Engine, network string) {
			ln := listen(t, e, network)
			tsServe(t, ln, style, func(c *Conn) {
				c.SetDeadline(time.Now().Add(tsTimeout))
				h := sha256.New()
				if _, err := io.Copy(h, c); err != nil { // io.Copy stops at io.EOF
					t.Errorf("server read: %v", err)
					return
				}
				// Read keeps returning io.EOF.
				if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
					t.Errorf("Read after EOF = %d, %v; want 0, io.EOF", n, err)
				}
				if _, err := c.Write(h.Sum(nil)); err != nil {
					t.Errorf("server write after the peer's CloseWrite: %v", err)
				}
			}, func(ctx context.Context, c *Conn) error {
				c.SetDeadline(time.Now().Add(tsTimeout))
				r, w := c.Reader(), c.Writer()
				h := sha256.New()
				for {
					if n := r.Len(); n > 0 {
						b, _ := r.Next(n)
						h.Write(b)
						r.Release()
					}
					_, err := r.Peek(1) // blocks for more input or its end
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Errorf("handler read: %v", err)
						return err
					}
				}
				w.WriteBinary(h.Sum(nil))
				if err := w.Flush(); err != nil {
					t.Errorf("handler write after the peer's CloseWrite: %v", err)
				}
				return nil
			})
			c := tsDialStd(t, network, ln.Addr().String())
			c.SetDeadline(time.Now().Add(tsTimeout))
			go func() {
				c.Write(data)
				tsCloseWrite(c)
			}()
			reply, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("client read: %v", err)
			}
			if !bytes.Equal(reply, sum[:]) {
				t.Errorf("server read %x before EOF, want sha256 %x", reply, sum)
			}
		}
	}
	// ringHalfClose: ringpoll sends data and CloseWrite; the package-net
	// peer reads it all and EOF, then replies with the digest.
	ringHalfClose := func(side tsSide) func(t *testing.T, e Engine, network string) {
		return func(t *testing.T, e Engine, network string) {
			c, peer := tsPair(t, e, network, side)
			c.SetDeadline(time.Now().Add(tsTimeout))
			peer.SetDeadline(time.Now().Add(tsTimeout))
			peerErr := make(chan error, 1)
			var got []byte // what the peer read before EOF; its own until peerErr
			go func() {
				var err error
				if got, err = io.ReadAll(peer); err != nil {
					peerErr <- err
					return
				}
				sum := sha256.Sum256(got)
				_, err = peer.Write(sum[:])
				peerErr <- err
			}()
			if _, err := c.Write(data); err != nil {
				t.Fatalf("Write: %v", err)
			}
			// CloseWrite waits for queued output: the peer must get it all.
			if err := c.CloseWrite(); err != nil {
				t.Fatalf("CloseWrite: %v", err)
			}
			if _, err := c.Write([]byte("x")); err == nil {
				t.Errorf("Write after CloseWrite succeeded")
			}
			if err := tsRecv(t, peerErr, "the peer"); err != nil {
				t.Fatalf("peer: %v", err)
			}
			if !bytes.Equal(got, data) {
				// Where they part, and where the bytes read there come
				// from: a send repeated, or skipped, or memory reused.
				i, from := firstDiff(got, data), -1
				if i < len(got) {
					from = bytes.Index(data, got[i:min(len(got), i+64)])
				}
				t.Errorf("peer read %d bytes before EOF, want the %d written; they differ from byte %d, where it read the bytes written at %d (-1: none, or nothing)",
					len(got), len(data), i, from)
			}
			reply := make([]byte, sha256.Size)
			if _, err := io.ReadFull(c, reply); err != nil {
				t.Fatalf("reading the reply after CloseWrite: %v", err)
			}
			if !bytes.Equal(reply, sum[:]) {
				t.Errorf("read the peer's digest as %x, want sha256 %x", reply, sum)
			}
		}
	}
	// ringCloseRead: after ringpoll's CloseRead, a blocked Read returns
	// io.EOF and writing still works.
	ringCloseRead := func(side tsSide) func(t *testing.T, e Engine, network string) {
		return func(t *testing.T, e Engine, network string) {
			c, peer := tsPair(t, e, network, side)
			c.SetDeadline(time.Now().Add(tsTimeout))
			peer.SetDeadline(time.Now().Add(tsTimeout))
			done := make(chan error, 1)
			go func() {
				_, err := c.Read(make([]byte, 1))
				done <- err
			}()
			tsWaitBlocked(t, tsFrameRead, tsTestFrame(t))
			if err := c.CloseRead(); err != nil {
				t.Fatalf("CloseRead: %v", err)
			}
			if err := tsRecv(t, done, "Read to return after CloseRead"); err != io.EOF {
				t.Errorf("Read blocked across CloseRead returned %v, want io.EOF", err)
			}
			if _, err := c.Write([]byte("still writing")); err != nil {
				t.Fatalf("Write after CloseRead: %v", err)
			}
			got := make([]byte, len("still writing"))
			if _, err := io.ReadFull(peer, got); err != nil || string(got) != "still writing" {
				t.Errorf("peer read %q, %v after CloseRead", got, err)
			}
		}
	}
	var rows []row
	for _, network := range []string{"tcp", "unix"} {
		rows = append(rows,
			row{network, "peer-closewrite/netconn", peerHalfClose(tsNetConn)},
			row{network, "peer-closewrite/handler", peerHalfClose(tsHandler)},
			row{network, "ringpoll-closewrite/accepted", ringHalfClose(tsAccepted)},
			row{network, "ringpoll-closewrite/dialed", ringHalfClose(tsDialed)},
			row{network, "ringpoll-closeread/accepted", ringCloseRead(tsAccepted)},
			row{network, "ringpoll-closeread/dialed", ringCloseRead(tsDialed)},
		)
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, r := range rows {
			t.Run(r.network+"/"+r.name, func(t *testing.T) { r.run(t, e, r.network) })
		}
	})
}

// tsCheckDeadlineErr fails the test unless err is a deadline error as net
// reports it.
func tsCheckDeadlineErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%s returned %v, want os.ErrDeadlineExceeded", what, err)
		return
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%s returned %v (%T), want a net.Error whose Timeout() is true", what, err, err)
	}
}

// TestDeadlines covers read and write deadlines on accepted and dialed
// connections: a deadline in the past fails at once; a future one fires
// while blocked; moving it while blocked (earlier or later) takes effect;
// clearing it lets a later call succeed. Writes block on a small output
// high-water mark with a peer that does not read. Reader.Next and
// Writer.Flush honour them too.
func TestDeadlines(t *testing.T) {
	read1 := func(c *Conn) error { _, err := c.Read(make([]byte, 1)); return err }
	next10 := func(c *Conn) error { _, err := c.Reader().Next(10); return err }
	writeBig := func(c *Conn) error { _, err := c.Write(tsBig[:16<<20]); return err }
	flushBig := func(c *Conn) error {
		w := c.Writer()
		w.WriteBinary(tsBig[:16<<20])
		return w.Flush()
	}
	type dir struct {
		name  string
		set   func(c *Conn, t time.Time) error
		op    func(c *Conn) error
		frame string
		// unblock makes a blocked op complete (peer sends or drains).
		unblock func(peer net.Conn) error
	}
	sendFrom := func(peer net.Conn) error { _, err := peer.Write([]byte("0123456789")); return err }
	drain := func(peer net.Conn) error {
		_, err := io.CopyN(io.Discard, peer, 16<<20)
		return err
	}
	dirs := []dir{
		{"Read", (*Conn).SetReadDeadline, read1, tsFrameRead, sendFrom},
		{"ReaderNext", (*Conn).SetReadDeadline, next10, tsFrameRead, sendFrom},
		{"Write", (*Conn).SetWriteDeadline, writeBig, tsFrameWrite, drain},
		{"WriterFlush", (*Conn).SetWriteDeadline, flushBig, tsFrameWrite, drain},
		{"SetDeadline/Read", (*Conn).SetDeadline, read1, tsFrameRead, sendFrom},
	}
	type scenario struct {
		name string
		// run gets its connection and peer from pair, which makes a new
		// pair on every call.
		run func(t *testing.T, pair func() (*Conn, net.Conn), d dir)
	}
	scenarios := []scenario{
		{"past", func(t *testing.T, pair func() (*Conn, net.Conn), d dir) {
			// The op would block for good (no input; a peer that does not
			// read): it must fail at once, not wait for anything. tsRecv
			// bounds that generously (tsTimeout), to tell a hang only.
			c, _ := pair()
			d.set(c, time.Now().Add(-time.Second))
			done := make(chan error, 1)
			go func() { done <- d.op(c) }()
			tsCheckDeadlineErr(t, d.name+" with a past deadline", tsRecv(t, done, d.name+" with a past deadline to return"))
		}},
		{"fires", func(t *testing.T, pair func() (*Conn, net.Conn), d dir) {
			c, _ := pair()
			const wait = 100 * time.Millisecond
			start := time.Now()
			d.set(c, start.Add(wait))
			done := make(chan error, 1)
			go func() { done <- d.op(c) }()
			err := tsRecv(t, done, d.name+" to time out")
			if el := time.Since(start); el < wait-10*time.Millisecond {
				t.Errorf("%s timed out after %v, before its %v deadline", d.name, el, wait)
			}
			tsCheckDeadlineErr(t, d.name+" past its deadline", err)
		}},
		{"moved-earlier", func(t *testing.T, pair func() (*Conn, net.Conn), d dir) {
			c, _ := pair()
			d.set(c, time.Now().Add(time.Hour))
			done := make(chan error, 1)
			go func() { done <- d.op(c) }()
			tsWaitBlocked(t, d.frame, tsTestFrame(t))
			d.set(c, time.Now().Add(20*time.Millisecond))
			tsCheckDeadlineErr(t, d.name+" after the deadline moved earlier", tsRecv(t, done, d.name+" to time out"))
		}},
		{"moved-to-past", func(t *testing.T, pair func() (*Conn, net.Conn), d dir) {
			c, _ := pair()
			done := make(chan error, 1)
			go func() { done <- d.op(c) }()
			tsWaitBlocked(t, d.frame, tsTestFrame(t))
			d.set(c, time.Now().Add(-time.Second))
			tsCheckDeadlineErr(t, d.name+" after a past deadline was set", tsRecv(t, done, d.name+" to time out"))
		}},
		{"moved-later", func(t *testing.T, pair func() (*Conn, net.Conn), d dir) {
			// The op must block past its first deadline once that was
			// moved an hour later. The move must be done before the first
			// deadline: if this goroutine was too slow for that (a loaded
			// machine), the op may have timed out rightly and the run
			// proves nothing, so it runs again, on a new pair, with a
			// first deadline twice as far.
			var (
				c     *Conn
				peer  net.Conn
				first time.Time
				done  chan error
			)
			for margin := 100 * time.Millisecond; ; margin *= 2 {
				c, peer = pair()
				first = time.Now().Add(margin)
				d.set(c, first)
				done = make(chan error, 1)
				go func(c *Conn, done chan<- error) { done <- d.op(c) }(c, done)
				tsWaitBlocked(t, d.frame, tsTestFrame(t))
				d.set(c, time.Now().Add(time.Hour))
				if time.Now().Before(first) {
					break // moved in time: the timer of first cannot fire
				}
				if margin >= 8*time.Second {
					t.Fatalf("moving the deadline took past the first deadline in every run, up to %v", margin)
				}
				t.Logf("moving the deadline took past the first deadline, %v away; again with %v", margin, 2*margin)
				d.set(c, time.Now().Add(-time.Second)) // end the op, whatever it did
				tsRecv(t, done, d.name+" to end")
			}
			select {
			case err := <-done:
				t.Fatalf("%s returned %v although its deadline was moved an hour later", d.name, err)
			case <-time.After(time.Until(first) + 100*time.Millisecond):
			}
			if err := d.unblock(peer); err != nil {
				t.Fatalf("peer: %v", err)
			}
			if err := tsRecv(t, done, d.name+" to complete"); err != nil {
				t.Errorf("%s after the deadline moved later: %v", d.name, err)
			}
		}},
		{"cleared", func(t *testing.T, pair func() (*Conn, net.Conn), d dir) {
			c, peer := pair()
			d.set(c, time.Now().Add(-time.Second))
			tsCheckDeadlineErr(t, d.name+" with a past deadline", d.op(c))
			d.set(c, time.Time{})
			done := make(chan error, 1)
			go func() { done <- d.op(c) }()
			tsWaitBlocked(t, d.frame, tsTestFrame(t))
			peerErr := make(chan error, 1)
			go func() { peerErr <- d.unblock(peer) }()
			if err := tsRecv(t, done, d.name+" to complete"); err != nil {
				t.Errorf("%s after the deadline was cleared: %v", d.name, err)
			}
			if err := tsRecv(t, peerErr, "the peer"); err != nil {
				t.Errorf("peer: %v", err)
			}
		}},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			for _, d := range dirs {
				for _, s := range scenarios {
					t.Run(string(side)+"/"+d.name+"/"+s.name, func(t *testing.T) {
						s.run(t, func() (*Conn, net.Conn) {
							c, peer := tsPair(t, e, "tcp", side, WithOutputHighWater(4096), WithDrainTimeout(10*time.Millisecond))
							peer.SetDeadline(time.Now().Add(tsTimeout))
							return c, peer
						}, d)
					})
				}
			}
		}
	})
}

// TestDeadlineNextKeepsInput: Reader.Next(n) that times out with fewer than
// n bytes buffered leaves them in place; after the deadline is cleared and
// the rest arrives, Next returns all n in order.
func TestDeadlineNextKeepsInput(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			t.Run(string(side), func(t *testing.T) {
				c, peer := tsPair(t, e, "tcp", side)
				peer.Write([]byte("0123456789"))
				tsEventually(t, "input to arrive", func() bool { return c.Reader().Len() == 10 })
				c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				if _, err := c.Reader().Next(20); err == nil {
					t.Fatal("Next(20) with 10 bytes buffered succeeded")
				} else {
					tsCheckDeadlineErr(t, "Next(20)", err)
				}
				if n := c.Reader().Len(); n != 10 {
					t.Fatalf("Len after a timed-out Next = %d, want 10", n)
				}
				c.SetReadDeadline(time.Time{})
				peer.Write([]byte("abcdefghij"))
				c.SetReadDeadline(time.Now().Add(tsTimeout))
				b, err := c.Reader().Next(20)
				if err != nil || string(b) != "0123456789abcdefghij" {
					t.Errorf("Next(20) = %q, %v", b, err)
				}
				c.Reader().Release()
			})
		}
	})
}
