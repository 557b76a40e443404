//go:build linux

package hertz

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	errs "github.com/cloudwego/hertz/pkg/common/errors"
	"github.com/ringpoll/ringpoll"
	"golang.org/x/net/nettest"
)

// pair returns two connected Conns over ringpoll connections, without a
// Server, closed at the end of the test.
func pair(t *testing.T, opts []ringpoll.Option) (a, b *Conn) {
	t.Helper()
	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rb, err := ringpoll.Dial("tcp", ln.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := ln.AcceptConn()
	if err != nil {
		rb.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { ra.Close(); rb.Close() })
	return newConn(ra, nil), newConn(rb, nil)
}

// TestNettestConn runs x/net/nettest's net.Conn conformance suite on
// Conn: Hertz has no suite for a third-party transport's connections.
func TestNettestConn(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
			ln, err := ringpoll.Listen("tcp", "127.0.0.1:0", opts...)
			if err != nil {
				return nil, nil, nil, err
			}
			defer ln.Close()
			rb, err := ringpoll.Dial("tcp", ln.Addr().String(), opts...)
			if err != nil {
				return nil, nil, nil, err
			}
			ra, err := ln.AcceptConn()
			if err != nil {
				rb.Close()
				return nil, nil, nil, err
			}
			return newConn(ra, nil), newConn(rb, nil), func() { ra.Close(); rb.Close() }, nil
		})
	})
}

// TestReadTimeoutPerRead: a read timeout bounds each wait for input, and
// only waits: bytes already buffered are read whatever the timeout.
func TestReadTimeoutPerRead(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		a, b := pair(t, opts)
		a.SetReadTimeout(time.Millisecond)
		_, err := a.Peek(1)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Peek with nothing to read and a 1ms timeout: %v; want a deadline error", err)
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("Peek's timeout error %v is not a net.Error with Timeout true, which Hertz answers with 408", err)
		}
		if got := a.ToHertzError(err); got != errs.ErrTimeout {
			t.Fatalf("ToHertzError(%v) = %v; want errs.ErrTimeout", err, got)
		}

		a.SetReadTimeout(bound)
		b.WriteBinary([]byte("abc"))
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		if p, err := a.Peek(3); err != nil || string(p) != "abc" {
			t.Fatalf("Peek(3): %q %v", p, err)
		}
		// A timeout far too short to wait with does not matter to bytes
		// that are there: no deadline is left set between reads.
		a.SetReadTimeout(time.Nanosecond)
		if c, err := a.ReadByte(); err != nil || c != 'a' {
			t.Fatalf("ReadByte on buffered input: %q %v", c, err)
		}
		if p, err := a.ReadBinary(2); err != nil || string(p) != "bc" {
			t.Fatalf("ReadBinary(2) on buffered input: %q %v", p, err)
		}
		a.Release()
	})
}

// TestWriteTimeout: Flush to a peer that reads nothing fails after the
// write timeout, as Hertz's timeout.
func TestWriteTimeout(t *testing.T) {
	// More than the sender's output queue, both socket buffers (at most
	// net.ipv4.tcp_wmem's and tcp_rmem's maximum, 4 and 32 MiB here) and
	// the receiver's input buffer can hold.
	big := make([]byte, 64<<20)
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		a, _ := pair(t, append(opts, ringpoll.WithOutputHighWater(1<<20), ringpoll.WithInputHighWater(64<<10)))
		a.SetWriteTimeout(10 * time.Millisecond)
		a.WriteBinary(big)
		err := a.Flush()
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Flush of 64 MiB to a peer that does not read: %v; want a deadline error", err)
		}
		if got := a.ToHertzError(err); got != errs.ErrTimeout {
			t.Fatalf("ToHertzError(%v) = %v; want errs.ErrTimeout", err, got)
		}
	})
}

// TestReadErrors: the peer's close reads as a bare io.EOF, its reset as a
// bare syscall.ECONNRESET, as Hertz compares them with ==; a closed
// connection's errors are Hertz's ErrConnectionClosed, and not logged.
func TestReadErrors(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		t.Run("eof", func(t *testing.T) {
			a, b := pair(t, opts)
			b.Close()
			if _, err := a.Peek(1); err != io.EOF {
				t.Fatalf("Peek after the peer closed: %v; want io.EOF", err)
			}
		})
		t.Run("reset", func(t *testing.T) {
			ln, err := ringpoll.Listen("tcp", "127.0.0.1:0", opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			peer, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			rc, err := ln.AcceptConn()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			peer.(*net.TCPConn).SetLinger(0)
			peer.Close() // a reset
			c := newConn(rc, nil)
			c.SetReadTimeout(bound)
			if _, err := c.Peek(1); err != syscall.ECONNRESET {
				t.Fatalf("Peek after the peer reset: %v; want syscall.ECONNRESET", err)
			}
			if !c.HandleSpecificError(syscall.ECONNRESET, "peer") {
				t.Fatal("HandleSpecificError would log a reset")
			}
		})
		t.Run("closed", func(t *testing.T) {
			a, _ := pair(t, opts)
			a.Close()
			a.WriteBinary([]byte("late"))
			err := a.Flush()
			if err == nil {
				t.Fatal("Flush after Close succeeded")
			}
			if got := a.ToHertzError(err); got != errs.ErrConnectionClosed {
				t.Fatalf("ToHertzError(%v) = %v; want errs.ErrConnectionClosed", err, got)
			}
			if !a.HandleSpecificError(err, "peer") {
				t.Fatalf("HandleSpecificError would log %v", err)
			}
			other := errors.New("something else")
			if a.ToHertzError(other) != other || a.HandleSpecificError(other, "peer") {
				t.Fatal("an unrelated error was mapped or hidden")
			}
		})
	})
}
