//go:build linux

package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"
)

// cconn is one client connection with its byte stream: the generator of
// what it writes and the verifier of what comes back.
type cconn struct {
	c     *net.TCPConn
	kind  clientKind
	seed  uint64
	start time.Time
	ports *portBook
	io    time.Duration // deadline of every Read and Write
	wgen  *rand.ChaCha8
	wbuf  []byte
	ver   verifier
	rbuf  []byte
	sent  atomic.Int64
}

// dial connects a client of kind whose stream is seeded by seed, with
// buffers for Writes of up to wbuf bytes and Reads of up to rbuf.
func (e *clientEnv) dial(kind clientKind, seed uint64, wbuf, rbuf int) (*cconn, error) {
	c, err := e.dialer.Dial("tcp", e.addr)
	if err != nil {
		return nil, &dialError{err}
	}
	cc := &cconn{
		c:     c.(*net.TCPConn),
		kind:  kind,
		seed:  seed,
		start: time.Now(),
		ports: e.ports,
		io:    e.cfg.ioTimeout,
		wgen:  newStream(seed),
		wbuf:  make([]byte, wbuf),
		ver:   newVerifier(seed),
		rbuf:  make([]byte, rbuf),
	}
	cc.note("open")
	return cc, nil
}

// note records what the client is at in the port book.
func (cc *cconn) note(what string) {
	if cc.ports == nil {
		return
	}
	if a, ok := cc.c.LocalAddr().(*net.TCPAddr); ok {
		cc.ports.record(a.Port, fmt.Sprintf("%s (seed %#x) %s: sent %d, verified %d, %s after %s",
			cc.kind, cc.seed, cc.c.LocalAddr(), cc.sent.Load(), cc.ver.off, what, roundDur(time.Since(cc.start))))
	}
}

// write sends the next n bytes of the stream, in Writes of up to len(wbuf)
// bytes (one Write for a message up to the maximum message size).
func (cc *cconn) write(n int) error {
	for n > 0 {
		b := cc.wbuf[:min(n, len(cc.wbuf))]
		cc.wgen.Read(b)
		cc.c.SetWriteDeadline(time.Now().Add(cc.io))
		m, err := cc.c.Write(b)
		cc.sent.Add(int64(m))
		if err != nil {
			return err
		}
		n -= len(b)
	}
	return nil
}

// readVerify reads and verifies the next n bytes of the echo, in Reads of
// up to chunk bytes.
func (cc *cconn) readVerify(n int64, chunk int) error {
	for n > 0 {
		cc.c.SetReadDeadline(time.Now().Add(cc.io))
		m, err := cc.c.Read(cc.rbuf[:min(int64(chunk), n, int64(len(cc.rbuf)))])
		if m > 0 {
			if verr := cc.ver.check(cc.rbuf[:m]); verr != nil {
				return verr
			}
			n -= int64(m)
		}
		if err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// expectEOF wants the end of the echo now: EOF, no more bytes.
func (cc *cconn) expectEOF() error {
	cc.c.SetReadDeadline(time.Now().Add(cc.io))
	m, err := cc.c.Read(cc.rbuf[:1])
	if m > 0 {
		return &mismatchError{Off: cc.ver.off, Extra: true}
	}
	if err == io.EOF {
		return nil
	}
	return err
}

// finish closes the connection and fills in r's byte counts. Clients
// defer it on their named result.
func (cc *cconn) finish(r *result) {
	cc.c.Close()
	cc.note("closed")
	r.sent = cc.sent.Load()
	r.verified = cc.ver.off
}

// writeMessages writes one message per size. With gate it waits for a
// token before each message after the first (ping-pong); done ends the
// wait. With halfClose it shuts the writing side after the last message.
// On an error it closes the connection, so the reader stops too.
func (cc *cconn) writeMessages(sizes []int, gate, done <-chan struct{}, halfClose bool) error {
	for i, s := range sizes {
		if i > 0 && gate != nil {
			select {
			case <-gate:
			case <-done:
				return nil
			}
		}
		if err := cc.write(s); err != nil {
			cc.c.Close()
			return err
		}
	}
	if halfClose {
		if err := cc.c.CloseWrite(); err != nil {
			cc.c.Close()
			return err
		}
	}
	return nil
}
