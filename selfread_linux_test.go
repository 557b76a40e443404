//go:build linux

package ringpoll

import (
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/poll/epoll"
)

// selfReadHooks reports, for fd alone, each time its reader is about to
// wait for input (waiting), the loop left it a read (left), the reader is
// about to make that read (reading) and input was linked (linked).
type selfReadHooks struct {
	waiting, left, reading, linked chan struct{}
}

// hookSelfRead sets the hooks. At the first read the loop leaves, onLeft
// (if set) runs on the loop's goroutine; at the first read the reader
// makes, the reader stops until hold is closed (if hold is not nil).
func hookSelfRead(t *testing.T, fd *poll.FD, hold <-chan struct{}, onLeft func()) *selfReadHooks {
	t.Helper()
	t.Cleanup(epoll.SetLeaveTurn(1)) // a turn of one socket leaves reads too
	h := &selfReadHooks{
		waiting: make(chan struct{}, 64),
		left:    make(chan struct{}, 64),
		reading: make(chan struct{}, 64),
		linked:  make(chan struct{}, 64),
	}
	note := func(c chan struct{}) {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	var leftOnce, readOnce sync.Once
	restore := poll.SetTestHook(func(p poll.HookPoint, at *poll.FD) {
		if at != fd {
			return
		}
		switch p {
		case poll.HookInputWait:
			note(h.waiting)
		case poll.HookReadLeft:
			if onLeft != nil {
				leftOnce.Do(onLeft)
			}
			note(h.left)
		case poll.HookSelfRead:
			note(h.reading)
			if hold != nil {
				readOnce.Do(func() { <-hold })
			}
		case poll.HookInputLinked:
			note(h.linked)
		}
	})
	t.Cleanup(restore)
	return h
}

// readResult is what readN read and the error that ended it.
type readResult struct {
	b   []byte
	err error
}

// readN reads from c until it has n bytes or an error, on a goroutine of
// its own, and sends what it read.
func readN(c *Conn, n int) <-chan readResult {
	done := make(chan readResult, 1)
	go func() {
		var got []byte
		p := make([]byte, 64)
		for len(got) < n {
			k, err := c.Read(p)
			got = append(got, p[:k]...)
			if err != nil {
				done <- readResult{got, err}
				return
			}
		}
		done <- readResult{got, nil}
	}()
	return done
}

// TestSelfReadInOrder: on epoll a reader blocked for input reads its
// socket itself when it becomes readable (poll.ReadOrLeave; the loop
// leaves reads in long turns, here in every turn). The reader
// is held just before that read (HookSelfRead) while more bytes arrive:
// the loop must leave that readiness to the reader too (HookReadLeft
// again) rather than read the new bytes ahead of those the reader is
// about to read. Every byte arrives, in order.
func TestSelfReadInOrder(t *testing.T) {
	for _, side := range tsSides {
		t.Run(string(side), func(t *testing.T) {
			c, peer := tsPair(t, EngineEpoll, "tcp", side)
			hold := make(chan struct{})
			h := hookSelfRead(t, c.fd, hold, nil)
			const first, second = "first-", "second"
			got := readN(c, len(first+second))
			tsRecv(t, h.waiting, "the reader to wait for input")
			if _, err := peer.Write([]byte(first)); err != nil {
				t.Fatalf("peer Write: %v", err)
			}
			tsRecv(t, h.left, "the loop to leave the read to the reader")
			tsRecv(t, h.reading, "the reader to take the read")
			if _, err := peer.Write([]byte(second)); err != nil {
				t.Fatalf("peer Write: %v", err)
			}
			tsRecv(t, h.left, "the loop to leave the readiness that came during the reader's read to the reader")
			close(hold)
			r := tsRecv(t, got, "the reader")
			if r.err != nil || string(r.b) != first+second {
				t.Fatalf("read %q, %v; want %q", r.b, r.err, first+second)
			}
			if in := c.fd.Loop.Stats().BytesIn.Load(); in < uint64(len(first+second)) {
				t.Errorf("Stats.BytesIn = %d, want at least %d: the reader's reads are counted", in, len(first+second))
			}
		})
	}
}

// TestSelfReadHandedBack: a reader whose deadline passes after the loop
// left it a read, before it made it, gives the read back: the loop reads
// the bytes into the connection's input, where a later read finds them.
// Without that, nothing would read them until more bytes came (edge
// triggering reports a readiness once), which would leave a Server's
// connection without its handler.
func TestSelfReadHandedBack(t *testing.T) {
	for _, side := range tsSides {
		t.Run(string(side), func(t *testing.T) {
			c, peer := tsPair(t, EngineEpoll, "tcp", side)
			// The loop, having left the read, ends the wait by the
			// reader's deadline before the reader can take it.
			expire := func() { c.SetReadDeadline(time.Unix(1, 0)) }
			h := hookSelfRead(t, c.fd, nil, expire)
			const msg = "late"
			got := readN(c, len(msg))
			tsRecv(t, h.waiting, "the reader to wait for input")
			if _, err := peer.Write([]byte(msg)); err != nil {
				t.Fatalf("peer Write: %v", err)
			}
			tsRecv(t, h.left, "the loop to leave the read to the reader")
			r := tsRecv(t, got, "the reader")
			if !errors.Is(r.err, os.ErrDeadlineExceeded) || len(r.b) != 0 {
				t.Fatalf("Read: %q, %v; want nothing and a deadline error", r.b, r.err)
			}
			tsRecv(t, h.linked, "the loop to read the bytes the reader gave back")
			if n := c.Reader().Len(); n != len(msg) {
				t.Fatalf("Reader().Len() = %d, want %d", n, len(msg))
			}
			c.SetReadDeadline(time.Time{})
			r = tsRecv(t, readN(c, len(msg)), "the second read")
			if r.err != nil || string(r.b) != msg {
				t.Fatalf("second read %q, %v; want %q", r.b, r.err, msg)
			}
		})
	}
}

// TestSelfReadClosed: a connection closed while its reader is about to
// read its socket itself: the read fails with net.ErrClosed, as any read
// after Close does, and reads nothing.
func TestSelfReadClosed(t *testing.T) {
	for _, side := range tsSides {
		t.Run(string(side), func(t *testing.T) {
			c, peer := tsPair(t, EngineEpoll, "tcp", side)
			hold := make(chan struct{})
			h := hookSelfRead(t, c.fd, hold, nil)
			got := readN(c, 1)
			tsRecv(t, h.waiting, "the reader to wait for input")
			if _, err := peer.Write([]byte("x")); err != nil {
				t.Fatalf("peer Write: %v", err)
			}
			tsRecv(t, h.reading, "the reader to take the read")
			if err := c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			close(hold)
			r := tsRecv(t, got, "the reader")
			if !errors.Is(r.err, net.ErrClosed) || len(r.b) != 0 {
				t.Fatalf("Read: %q, %v; want nothing and net.ErrClosed", r.b, r.err)
			}
		})
	}
}

// TestSelfReadNettestConn runs nettest.TestConn (I/O, ping-pong, racy
// reads and writes, deadlines, Close) on epoll with every read left to
// its blocked reader (a turn of one socket leaves reads): the net.Conn
// contract holds on that path too.
func TestSelfReadNettestConn(t *testing.T) {
	t.Cleanup(epoll.SetLeaveTurn(1))
	addr := addrSource(t, "tcp4")
	for _, v := range pipeVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			nettest.TestConn(t, makePipe(EngineEpoll, "tcp4", addr, v))
		})
	}
}
