//go:build linux

package ringpoll

// The ends of TestTorture's connections (torture_test.go): the model of
// what each may see, and the reader and writer that drive it.
//
// Each direction of a connection carries a stream whose byte i is a hash
// of (stream, i), so a receiver checks every byte it gets by its offset
// alone. What an end may see, besides bytes in order and unchanged:
//
//   - io.EOF only once its peer closed, half-closed or was shut down;
//     net.ErrClosed only once the end itself was closed; a passed deadline
//     only once one was set on it, and no bytes consumed by it;
//     ECONNRESET or EPIPE only once its peer was closed, and on a read only
//     if that close could reset (SO_LINGER 0, or input that could still
//     reach the peer unread: the peer is then "dirty"), or, for a write,
//     once the end itself was closed or half-closed. A call made after the
//     test's Close returned fails with net.ErrClosed, even one of no bytes.
//   - a clean EOF comes after every byte the peer's writes reported
//     written, unless the peer is dirty (the kernel's reset then drops
//     what it had not delivered yet, and a send may take the reset's
//     error, leaving the read a plain EOF).
//   - a slice from Next, Peek or Until (of the connection's Reader or of a
//     Reader from Slice) keeps its bytes until the Reader that returned it
//     is released (Release, or a Read or Slice, which release), whoever
//     closes what meanwhile: the rule of docs/ARCHITECTURE.md, Connection
//     lifetime, which holds a Peek's slice to that too.
//   - no hang: every wait is bounded by tsTimeout; at the end of each
//     sequence the connections are destroyed and, on the engines with a
//     buffer ring, every buffer is back.

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ttWord is word w of stream s (splitmix64 of both).
func ttWord(s, w uint64) uint64 {
	z := s ^ (w * 0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// ttByte is byte i of stream s.
func ttByte(s uint64, i int64) byte {
	return byte(ttWord(s, uint64(i)>>3) >> (8 * (uint64(i) & 7)))
}

// ttFill fills p with stream s from offset off.
func ttFill(p []byte, s uint64, off int64) {
	var w uint64
	for i := range p {
		j := uint64(off) + uint64(i)
		if i == 0 || j&7 == 0 {
			w = ttWord(s, j>>3)
		}
		p[i] = byte(w >> (8 * (j & 7)))
	}
}

// ttCheck returns the index of the first byte of p that is not stream s's
// byte at off plus that index, or -1.
func ttCheck(p []byte, s uint64, off int64) int {
	var w uint64
	for i, b := range p {
		j := uint64(off) + uint64(i)
		if i == 0 || j&7 == 0 {
			w = ttWord(s, j>>3)
		}
		if b != byte(w>>(8*(j&7))) {
			return i
		}
	}
	return -1
}

// ttScribble overwrites p, which the library was given to send, once it
// may be reused: a library that still read it would send these bytes.
func ttScribble(p []byte) {
	for i := range p {
		p[i] = 0xa5
	}
}

// ttKind is what an error means to the model.
type ttKind int

const (
	ttOK ttKind = iota
	ttEOF
	ttClosed
	ttDeadline
	ttReset // ECONNRESET or EPIPE
	ttBufferFull
	ttStopped // ErrServerClosed: Shutdown stopped the handler's waits
	ttOther
)

var ttKindNames = [...]string{"nil", "io.EOF", "net.ErrClosed", "deadline", "reset", "ErrBufferFull", "ErrServerClosed", "other"}

func (k ttKind) String() string { return ttKindNames[k] }

func ttClassify(err error) ttKind {
	switch {
	case err == nil:
		return ttOK
	case errors.Is(err, io.EOF):
		return ttEOF
	case errors.Is(err, net.ErrClosed):
		return ttClosed
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ttDeadline
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return ttReset
	case errors.Is(err, ErrBufferFull):
		return ttBufferFull
	case errors.Is(err, ErrServerClosed):
		return ttStopped
	}
	return ttOther
}

// ttEnd is one end of a torture connection: a ringpoll Conn or a std
// net.Conn, with its reader and writer and what the model knows of it.
type ttEnd struct {
	cn   *ttConn
	name string
	peer *ttEnd
	ring *Conn    // a ringpoll end (set in the handler, for a Server's)
	std  net.Conn // a std end
	// handler: the ringpoll end of a Server, run by the handler.
	handler bool
	// in and out are the streams this end reads and writes; inLen and
	// outLen their planned lengths; sent0 the bytes of out the setup
	// wrote before the writer started.
	in, out       uint64
	inLen, outLen int64
	sent0         int64
	endAction     string // after the last write: "none", "closewrite", "close"
	rngBase       uint64

	// What the test did to this end, each set before the action.
	closing  atomic.Bool // Close (or a reset, or a Server's close) was called
	closed   atomic.Bool // the test's own Close returned
	wclosed  atomic.Bool // CloseWrite was called
	wdone    atomic.Bool // a CloseWrite returned nil
	shutdown atomic.Bool // its Server began Shutdown
	deadline atomic.Bool // a deadline was set
	reset    atomic.Bool // closed with SO_LINGER 0
	dirty    atomic.Bool // closed while input could still reach it unread

	// The reader's progress: bytes consumed, a clean EOF's offset (-1:
	// none), whether it read a reset, whether it is stalled.
	rOff     atomic.Int64
	rEOF     atomic.Int64
	rReset   atomic.Bool
	rStalled atomic.Bool
	// The writer's: bytes handed to the library, bytes it reported
	// written, and whether it wrote all of outLen without an error.
	wTried, wAcked atomic.Int64
	wOK            atomic.Bool

	// Counts, for the run's summary: deadline errors met, held slices
	// checked.
	nDeadline, nHeld atomic.Int64

	stall      chan struct{}
	stallOnce  sync.Once
	started    chan struct{} // a handler end: the handler runs
	readerDone chan struct{}
	writerDone chan struct{}
	handled    atomic.Bool // a handler end: the handler was called
}

func newTTEnd(cn *ttConn, name string) *ttEnd {
	x := &ttEnd{cn: cn, name: name, stall: make(chan struct{}), started: make(chan struct{}),
		readerDone: make(chan struct{}), writerDone: make(chan struct{})}
	x.rEOF.Store(-1)
	return x
}

// opened reports whether x has its connection: a handler end has it once
// the handler ran (and x.ring may be read only then).
func (x *ttEnd) opened() bool {
	if x.handler {
		return ttDone(x.started)
	}
	return x.nc() != nil
}

// nc is the end as a net.Conn.
func (x *ttEnd) nc() net.Conn {
	if x.ring != nil {
		return x.ring
	}
	return x.std
}

func (x *ttEnd) rng(role uint64) *rand.Rand {
	return rand.New(rand.NewPCG(x.rngBase, role))
}

func (x *ttEnd) failf(format string, args ...any) {
	x.cn.s.failf("conn %d, %s end: %s", x.cn.i, x.name, fmt.Sprintf(format, args...))
}

// flags describes what the test did to x, for failure messages.
func (x *ttEnd) flags() string {
	return fmt.Sprintf("closing=%v closed=%v wclosed=%v (done %v) shutdown=%v deadline=%v reset=%v dirty=%v",
		x.closing.Load(), x.closed.Load(), x.wclosed.Load(), x.wdone.Load(), x.shutdown.Load(), x.deadline.Load(), x.reset.Load(), x.dirty.Load())
}

// unstall lets a stalled reader go on.
func (x *ttEnd) unstall() { x.stallOnce.Do(func() { close(x.stall) }) }

// markClose records that x is about to be closed, and whether input could
// still reach it unread: unless its peer's writer wrote everything and x
// read all of it, the close may reset the connection.
func (x *ttEnd) markClose() {
	p := x.peer
	if !(p.wOK.Load() && x.rOff.Load() >= p.wTried.Load()) {
		x.dirty.Store(true)
	}
	x.closing.Store(true)
}

// close closes x, as the test does.
func (x *ttEnd) close() {
	x.markClose()
	x.nc().Close()
	x.closed.Store(true)
}

// resetClose closes x with SO_LINGER 0: the peer reads a reset.
func (x *ttEnd) resetClose() {
	x.reset.Store(true)
	x.dirty.Store(true)
	x.markClose()
	tsResetOnClose(x.nc())
	x.nc().Close()
	x.closed.Store(true)
}

// closeWrite half-closes x. A ringpoll CloseWrite waits for the queued
// output to go.
func (x *ttEnd) closeWrite() {
	x.wclosed.Store(true)
	var err error
	if x.ring != nil {
		err = x.ring.CloseWrite()
	} else {
		err = tsCloseWrite(x.std)
	}
	if err == nil {
		x.wdone.Store(true)
	}
}

// setDeadline sets a deadline d from now (d <= 0: passed) on x's reads
// (which 0), writes (1) or both (2).
func (x *ttEnd) setDeadline(which int, d time.Duration) {
	x.deadline.Store(true)
	t := time.Now().Add(d)
	switch which {
	case 0:
		x.nc().SetReadDeadline(t)
	case 1:
		x.nc().SetWriteDeadline(t)
	default:
		x.nc().SetDeadline(t)
	}
}

// readErr judges a read's error; it reports whether the reader stops.
// closedBefore says whether the test's Close had returned before the
// call.
func (x *ttEnd) readErr(op string, off int64, err error, closedBefore bool) (stop bool) {
	p := x.peer
	k := ttClassify(err)
	if closedBefore && k != ttClosed {
		x.failf("%s at offset %d after Close returned: %v (%s), want net.ErrClosed", op, off, err, k)
		return true
	}
	switch k {
	case ttEOF:
		if !(p.closing.Load() || p.wclosed.Load() || p.shutdown.Load()) {
			x.failf("%s at offset %d: io.EOF, but the peer neither closed nor half-closed (peer: %s)", op, off, p.flags())
		}
		return true
	case ttClosed:
		if !x.closing.Load() {
			x.failf("%s at offset %d: %v, but the end was not closed", op, off, err)
		}
		return true
	case ttDeadline:
		x.nDeadline.Add(1)
		if !x.deadline.Load() {
			x.failf("%s at offset %d: %v, but no deadline was set", op, off, err)
			return true
		}
		if x.closing.Load() {
			return true // SetReadDeadline fails from now on
		}
		x.nc().SetReadDeadline(time.Time{})
		return false
	case ttReset:
		x.rReset.Store(true)
		if !(p.closing.Load() || p.shutdown.Load()) {
			x.failf("%s at offset %d: %v, but the peer was not closed (peer: %s)", op, off, err, p.flags())
		}
		return true
	case ttStopped:
		// Shutdown makes a handler's reads fail rather than wait for
		// input (Handler): only a handler's end, once it began.
		if !x.handler || !x.shutdown.Load() {
			x.failf("%s at offset %d: %v, but no Shutdown stopped the end's waits (end: %s)", op, off, err, x.flags())
		}
		return true
	}
	x.failf("%s at offset %d: unexpected error %v (%s)", op, off, err, k)
	return true
}

// writeErr judges a write's error; it reports whether the writer may go
// on (a passed deadline: the call's count says what was written).
func (x *ttEnd) writeErr(op string, off int64, err error, closedBefore bool) (goOn bool) {
	p := x.peer
	k := ttClassify(err)
	if closedBefore && k != ttClosed {
		x.failf("%s at offset %d after Close returned: %v (%s), want net.ErrClosed", op, off, err, k)
		return false
	}
	switch k {
	case ttClosed:
		if !x.closing.Load() {
			x.failf("%s at offset %d: %v, but the end was not closed", op, off, err)
		}
	case ttReset:
		if !(p.closing.Load() || p.shutdown.Load() || x.wclosed.Load() || x.closing.Load()) {
			x.failf("%s at offset %d: %v, but neither end was closed (end: %s; peer: %s)", op, off, err, x.flags(), p.flags())
		}
	case ttDeadline:
		x.nDeadline.Add(1)
		if !x.deadline.Load() {
			x.failf("%s at offset %d: %v, but no deadline was set", op, off, err)
			return false
		}
		if x.closing.Load() {
			return false
		}
		x.nc().SetWriteDeadline(time.Time{})
		return true
	default:
		x.failf("%s at offset %d: unexpected error %v (%s)", op, off, err, k)
	}
	return false
}

// ttChunk is a random write or read size: mostly small, sometimes over
// the 4 KiB at which WriteBinary links instead of copying, sometimes
// large.
func ttChunk(rng *rand.Rand) int {
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1, 2, 3:
		return 1 + rng.IntN(512)
	case 4, 5, 6:
		return 1 + rng.IntN(8<<10)
	case 7, 8:
		return 4<<10 + rng.IntN(28<<10)
	}
	return 32<<10 + rng.IntN(96<<10)
}

// write runs x's writer: outLen bytes of x.out in random calls, then the
// planned end action. It stops at an error it may not go on after.
func (x *ttEnd) write() {
	defer close(x.writerDone)
	rng := x.rng(1)
	scratch := make([]byte, 128<<10)
	off := x.sent0
	x.wTried.Store(off)
	x.wAcked.Store(off)
	for off < x.outLen {
		n := int(min(int64(ttChunk(rng)), x.outLen-off))
		closedBefore := x.closed.Load()
		x.wTried.Store(off + int64(n))
		var (
			k   int
			err error
			op  string
		)
		if x.ring != nil && rng.IntN(2) == 0 {
			op = "Writer.Flush"
			err = x.writeNocopy(rng, scratch[:n], off)
			if err == nil {
				k = n
			}
		} else {
			op = "Write"
			p := scratch[:n]
			ttFill(p, x.out, off)
			k, err = x.nc().Write(p)
			ttScribble(p)
			if err == nil && closedBefore {
				// As net's: a Write after Close fails, even of no bytes.
				x.failf("Write of %d bytes at offset %d after Close returned: no error, want net.ErrClosed", n, off)
				return
			}
		}
		if err == nil && k != n {
			x.failf("%s of %d bytes at offset %d wrote %d without an error", op, n, off, k)
			return
		}
		if err != nil {
			if op == "Writer.Flush" {
				// What it sent is unknown: the writer stops.
				x.writeErr(op, off, err, closedBefore)
				return
			}
			off += int64(k) // written, the call says, deadline or not
			x.wAcked.Store(off)
			if x.writeErr(op, off, err, closedBefore) {
				continue
			}
			return
		}
		off += int64(n)
		x.wAcked.Store(off)
		if rng.IntN(8) == 0 {
			runtime.Gosched()
		}
	}
	x.wOK.Store(true)
	switch x.endAction {
	case "closewrite":
		x.closeWrite()
	case "close":
		x.close()
	}
}

// writeNocopy writes p, filled with x.out from off, through the Writer in
// one to three pieces (WriteBinary, WriteString, Malloc, WriteByte), then
// flushes; once Flush returned, p may be reused.
func (x *ttEnd) writeNocopy(rng *rand.Rand, p []byte, off int64) error {
	w := x.ring.Writer()
	ttFill(p, x.out, off)
	rest := p
	for len(rest) > 0 {
		n := len(rest)
		if rng.IntN(2) == 0 {
			n = 1 + rng.IntN(len(rest))
		}
		piece := rest[:n]
		rest = rest[n:]
		switch rng.IntN(6) {
		case 0:
			w.WriteString(string(piece))
		case 1:
			b, err := w.Malloc(n)
			if err != nil {
				return err
			}
			copy(b, piece)
		case 2:
			for _, c := range piece[:min(n, 16)] {
				w.WriteByte(c)
			}
			if n > 16 {
				w.WriteBinary(piece[16:])
			}
		default:
			w.WriteBinary(piece) // linked from 4 KiB: p must stay until Flush returns
		}
	}
	if rng.IntN(8) == 0 {
		w.WriteBinary(nil)
	}
	err := w.Flush()
	ttScribble(p)
	return err
}
