//go:build linux

package ringpoll

// Every way the Reader hands out input memory, zero lengths included, on
// every engine, for accepted, dialed and handler connections: the memory
// stays the reader's, whoever closes the connection, until the reader lets
// it go. Helpers are lifetime_test.go's (lt*) and stress_test.go's (ts*).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
)

// hpPath is one way a reader comes to hold a slice of its input. take
// returns the slice and a function that lets it go once it was checked;
// ready is closed once take holds its slice (WriteTo holds it inside its
// writer's Write, and take returns only after the check).
type hpPath struct {
	name string
	take func(c *Conn, held chan<- []byte, check <-chan struct{}) error
}

// hpHold sends b on held and waits for the check, then releases r.
func hpHold(r *Reader, b []byte, held chan<- []byte, check <-chan struct{}) error {
	held <- b
	<-check
	return r.Release()
}

var errHPStop = errors.New("test: the writer stops")

// hpWriter is WriteTo's writer: it holds the first chunk it is given until
// the check, as a writer whose Write is slow would.
type hpWriter struct {
	held  chan<- []byte
	check <-chan struct{}
}

func (w hpWriter) Write(p []byte) (int, error) {
	w.held <- p
	<-w.check
	return len(p), errHPStop
}

var hpPaths = []hpPath{
	{name: "next", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		r := c.Reader()
		b, err := r.Next(ltHeld)
		if err != nil {
			return err
		}
		return hpHold(r, b, held, check)
	}},
	{name: "next0", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		// Next(Len()) while nothing is readable, then the bytes: the
		// zero-length call hands out the view the next one reads from.
		r := c.Reader()
		if _, err := r.Next(0); err != nil {
			return err
		}
		b, err := r.Next(ltHeld)
		if err != nil {
			return err
		}
		return hpHold(r, b, held, check)
	}},
	{name: "peek", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		r := c.Reader()
		b, err := r.Peek(ltHeld)
		if err != nil {
			return err
		}
		return hpHold(r, b, held, check)
	}},
	{name: "peek0", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		r := c.Reader()
		if _, err := r.Peek(0); err != nil {
			return err
		}
		b, err := r.Peek(ltHeld)
		if err != nil {
			return err
		}
		return hpHold(r, b, held, check)
	}},
	{name: "skip0", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		r := c.Reader()
		if err := r.Skip(0); err != nil {
			return err
		}
		b, err := r.Next(ltHeld)
		if err != nil {
			return err
		}
		return hpHold(r, b, held, check)
	}},
	{name: "until", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		r := c.Reader()
		b, err := r.Until('\n')
		if err != nil {
			return err
		}
		return hpHold(r, b, held, check)
	}},
	{name: "slice", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		s, err := c.Reader().Slice(ltHeld)
		if err != nil {
			return err
		}
		b, err := s.Next(ltHeld)
		if err != nil {
			return err
		}
		return hpHold(s, b, held, check)
	}},
	{name: "slice0", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		r := c.Reader()
		s, err := r.Slice(0)
		if err != nil {
			return err
		}
		s.Release()
		b, err := r.Next(ltHeld)
		if err != nil {
			return err
		}
		return hpHold(r, b, held, check)
	}},
	{name: "writeto", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		_, err := c.WriteTo(hpWriter{held, check})
		if !errors.Is(err, errHPStop) {
			return fmt.Errorf("WriteTo returned %v, want the writer's error", err)
		}
		return nil
	}},
	{name: "readbinary", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		r := c.Reader()
		b, err := r.ReadBinary(ltHeld)
		if err != nil {
			return err
		}
		return hpHold(r, b, held, check)
	}},
	{name: "readstring", take: func(c *Conn, held chan<- []byte, check <-chan struct{}) error {
		r := c.Reader()
		s, err := r.ReadString(ltHeld)
		if err != nil {
			return err
		}
		return hpHold(r, []byte(s), held, check)
	}},
}

// hpSides are the connections a reader holds slices of: accepted by a
// ringpoll Listener and read on a goroutine of its own, dialed by
// ringpoll, and served by a Server's handler.
var hpSides = []string{"accepted", "dialed", "handler"}

// TestHeldSlicePaths: a reader holds input memory by each path; its
// connection is closed from another goroutine and the loop lets go of it;
// four other connections of the same loop then cycle every provided
// buffer of its small ring many times. The held bytes must still be the
// reader's own, and once it lets go every buffer must be back.
func TestHeldSlicePaths(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, ring := range ltRings {
			for _, side := range hpSides {
				for _, p := range hpPaths {
					t.Run(ring.name+"/"+side+"/"+p.name, func(t *testing.T) { hpRun(t, e, ring.opts(e), side, p) })
				}
			}
		}
	})
}

func hpRun(t *testing.T, e Engine, ring []Option, side string, p hpPath) {
	othersLn := listen(t, e, "tcp", ring...)
	tsServeHandler(t, othersLn, tsEchoHandler, ring...)

	held := make(chan []byte, 1)
	check := make(chan struct{})
	conns := make(chan *Conn, 1)
	result := make(chan error, 1)
	// arrived lets the reader start once all its bytes are buffered, so
	// that a zero-length call finds them and hands out its view.
	arrived := make(chan struct{})
	run := func(c *Conn) {
		conns <- c
		<-arrived
		err := p.take(c, held, check)
		if err != nil {
			held <- nil
		}
		result <- err
	}

	var peer net.Conn
	var ln *Listener // whose engine's stats tell of the buffers
	switch side {
	case "accepted":
		ln = listen(t, e, "tcp", ring...)
		go func() {
			c, err := ln.AcceptConn()
			if err != nil {
				result <- err
				return
			}
			run(c)
		}()
		peer = tsDialStd(t, "tcp", ln.Addr().String())
	case "handler":
		ln = listen(t, e, "tcp", ring...)
		var once bool
		tsServeHandler(t, ln, func(ctx context.Context, c *Conn) error {
			if once {
				return nil
			}
			once = true
			run(c)
			return nil
		}, ring...)
		peer = tsDialStd(t, "tcp", ln.Addr().String())
	case "dialed":
		ln = othersLn
		std, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer std.Close()
		d := Dialer{Timeout: tsTimeout, Options: append([]Option{WithEngine(e)}, ring...)}
		c, err := d.Dial("tcp", std.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if peer, err = std.Accept(); err != nil {
			t.Fatal(err)
		}
		defer peer.Close()
		go run(c)
	}

	want := append(bytes.Repeat([]byte{'v'}, ltHeld-1), '\n')
	if _, err := peer.Write(want); err != nil {
		t.Fatal(err)
	}
	c := tsRecv(t, conns, "the connection")
	tsEventually(t, "the bytes to arrive", func() bool {
		n, _, _ := c.fd.InputState()
		return n == ltHeld
	})
	close(arrived)
	b := tsRecv(t, held, "the reader to hold its slice")
	if b == nil {
		t.Fatal(<-result)
	}
	heldCopy := bytes.Clone(b)
	if !bytes.Equal(b, want[:len(b)]) {
		t.Fatalf("the reader holds %q..., want its own bytes", b[:min(len(b), 16)])
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	ltLetGo(t, c)
	// 256 KiB a client: the small rings' every buffer many times over.
	ltEchoOthersN(t, othersLn.Addr().String(), 256<<10)
	if err := ltCompare(b, heldCopy); err != nil {
		t.Error(err)
	}
	close(check)
	if err := tsRecv(t, result, "the reader to let go"); err != nil {
		t.Error(err)
	}
	tsEventually(t, "the closed connection to be finalized", c.fd.Finalized)
	if isProactor(e) {
		ufBuffersBack(t, ln)
	}
	if n := c.Reader().Len(); n != 0 {
		t.Errorf("Reader.Len() after Close = %d, want 0", n)
	}
}
