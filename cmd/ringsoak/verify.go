//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
)

// newStream returns the deterministic byte stream of a connection: a ChaCha8
// generator seeded from seed. Successive Read calls continue one stream
// however they are sized, so the writer may cut it into messages and the
// reader check it in whatever pieces the socket returns.
func newStream(seed uint64) *rand.ChaCha8 {
	var s [32]byte
	for i := range 4 {
		binary.LittleEndian.PutUint64(s[8*i:], splitmix(seed+uint64(i)))
	}
	return rand.NewChaCha8(s)
}

// splitmix is SplitMix64's finalizer: it turns related seeds (a run index,
// a lane number) into unrelated ones.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// verifier checks the echo of a connection's stream byte for byte, in order.
type verifier struct {
	gen *rand.ChaCha8
	exp []byte // scratch for the expected bytes
	off int64  // bytes verified so far
}

// newVerifier returns a verifier for the stream of seed.
func newVerifier(seed uint64) verifier {
	return verifier{gen: newStream(seed), exp: make([]byte, 16<<10)}
}

// check verifies got, the next bytes of the echo. On a difference it
// returns a *mismatchError and counts only the matching prefix as verified.
func (v *verifier) check(got []byte) error {
	for len(got) > 0 {
		n := min(len(got), len(v.exp))
		exp := v.exp[:n]
		v.gen.Read(exp)
		for i := range n {
			if got[i] != exp[i] {
				v.off += int64(i)
				return &mismatchError{Off: v.off, Got: got[i], Want: exp[i]}
			}
		}
		v.off += int64(n)
		got = got[n:]
	}
	return nil
}

// mismatchError reports an echo that differs from what was sent: a wrong
// byte at Off, or, with Extra, bytes after the end of what was sent.
type mismatchError struct {
	Off       int64
	Got, Want byte
	Extra     bool
}

func (e *mismatchError) Error() string {
	if e.Extra {
		return fmt.Sprintf("verify: %d bytes echoed, then more than was sent", e.Off)
	}
	return fmt.Sprintf("verify: byte %d of the echo is %#02x, sent %#02x", e.Off, e.Got, e.Want)
}

// errWritesNeverBlocked is the error of a never-reading client whose writes
// never blocked: the server buffered more than its limits and the kernel's
// socket buffers allow.
var errWritesNeverBlocked = errors.New("writes never blocked: no backpressure")

// dialError wraps an error of the dial itself.
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// errKind names a class of client error, as counted in the verdict.
type errKind string

// The error kinds.
const (
	errReset          errKind = "reset"           // ECONNRESET
	errBrokenPipe     errKind = "broken-pipe"     // EPIPE
	errTimeout        errKind = "timeout"         // a deadline passed
	errEOF            errKind = "eof-early"       // EOF before the whole echo
	errMismatch       errKind = "verify-mismatch" // wrong or extra bytes
	errDial           errKind = "dial"            // the connect failed
	errClosedSelf     errKind = "closed-self"     // the client's own Close ended an operation
	errNoBackpressure errKind = "no-backpressure" // a never-reader's writes never blocked
	errOther          errKind = "other"
)

// classify returns err's kind.
func classify(err error) errKind {
	var me *mismatchError
	var de *dialError
	switch {
	case errors.As(err, &me):
		return errMismatch
	case errors.As(err, &de):
		return errDial
	case errors.Is(err, errWritesNeverBlocked):
		return errNoBackpressure
	case errors.Is(err, net.ErrClosed):
		return errClosedSelf
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errTimeout
	case errors.Is(err, syscall.ECONNRESET):
		return errReset
	case errors.Is(err, syscall.EPIPE):
		return errBrokenPipe
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errEOF
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errTimeout
	}
	return errOther
}
