//go:build linux

package ringpoll

// The readers of TestTorture's ends (torture_ends_test.go): every call of
// the nocopy Reader and of Readers from Slice, each result checked against
// the stream, and the slices they hold checked again until released.

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
)

// ttHeld is a slice a reader holds, and the stream offset of its first
// byte; src is the Reader from Slice that returned it (nil: the
// connection's Reader).
type ttHeld struct {
	b   []byte
	off int64
	src *ttSliced
	op  string
}

// ttSliced is a Reader from Slice with the stream offset of its next byte
// and the bytes it has left.
type ttSliced struct {
	r   *Reader
	off int64
	rem int
}

// ttReading is a reader's state.
type ttReading struct {
	x      *ttEnd
	rng    *rand.Rand
	off    int64
	held   []ttHeld
	sliced []*ttSliced
	slow   int   // calls left in slow mode
	stopAt int64 // -1, or the offset at which the reader closes its end
	stall  int64 // -1, or the offset at which it waits for unstall
	buf    []byte
	stop   bool // a check failed
}

// ttHeldMax bounds the slices a reader holds, and ttHoldMax their size
// (each is checked again and again).
const (
	ttHeldMax = 8
	ttHoldMax = 16 << 10
)

// check verifies b as the stream's bytes at off, and fails the sequence
// (stopping the reader) if they are not.
func (rs *ttReading) check(b []byte, off int64, what string) bool {
	if i := ttCheck(b, rs.x.in, off); i >= 0 {
		rs.x.failf("%s: %d bytes at stream offset %d: byte %d is %#x, want %#x (got %x...); end: %s; peer: %s",
			what, len(b), off, i, b[i], ttByte(rs.x.in, off+int64(i)), b[i:min(len(b), i+16)], rs.x.flags(), rs.x.peer.flags())
		rs.stop = true
		return false
	}
	return true
}

// hold keeps b, maybe.
func (rs *ttReading) hold(b []byte, off int64, src *ttSliced, op string) {
	if len(b) == 0 || len(b) > ttHoldMax || len(rs.held) >= ttHeldMax || rs.rng.IntN(2) == 0 {
		return
	}
	rs.held = append(rs.held, ttHeld{b, off, src, op})
}

// checkHeld verifies the held slices from src (all, if all is set).
func (rs *ttReading) checkHeld(src *ttSliced, all bool, when string) {
	for _, h := range rs.held {
		if all || h.src == src {
			rs.x.nHeld.Add(1)
			if i := ttCheck(h.b, rs.x.in, h.off); i >= 0 {
				rs.x.failf("a held slice changed %s (from %s, %d bytes at stream offset %d): byte %d is %#x, want %#x (got %x...); end: %s; peer: %s",
					when, h.op, len(h.b), h.off, i, h.b[i], ttByte(rs.x.in, h.off+int64(i)), h.b[i:min(len(h.b), i+16)], rs.x.flags(), rs.x.peer.flags())
				rs.stop = true
				return
			}
		}
	}
}

// drop forgets the held slices from src, after checking them.
func (rs *ttReading) drop(src *ttSliced, when string) {
	rs.checkHeld(src, false, when)
	rs.forget(src)
}

// forget forgets the held slices from src.
func (rs *ttReading) forget(src *ttSliced) {
	kept := rs.held[:0]
	for _, h := range rs.held {
		if h.src != src {
			kept = append(kept, h)
		}
	}
	clear(rs.held[len(kept):])
	rs.held = kept
}

// advance records n bytes consumed.
func (rs *ttReading) advance(n int) {
	rs.off += int64(n)
	rs.x.rOff.Store(rs.off)
}

// size is a read size: at most what the peer will still send, mostly;
// sometimes more, which waits for the end of the stream.
func (rs *ttReading) size() int {
	rem := rs.x.inLen - rs.off
	n := ttChunk(rs.rng)
	if rs.slow > 0 {
		n = rs.rng.IntN(65)
	}
	if int64(n) > rem && rs.rng.IntN(16) != 0 {
		n = int(max(rem, 0))
	}
	return n
}

// pace runs before each read: slow mode, the planned stall and the
// planned early close.
func (rs *ttReading) pace() {
	x := rs.x
	if rs.slow > 0 {
		rs.slow--
		runtime.Gosched()
	} else if rs.rng.IntN(64) == 0 {
		rs.slow = 1 + rs.rng.IntN(200)
	}
	if rs.stall >= 0 && rs.off >= rs.stall {
		rs.stall = -1
		rs.releaseAll() // see ringOp
		x.rStalled.Store(true)
		<-x.stall
		x.rStalled.Store(false)
	}
	if rs.stopAt >= 0 && rs.off >= rs.stopAt {
		rs.stopAt = -1
		x.close()
	}
}

func (x *ttEnd) newReading() *ttReading {
	rs := &ttReading{x: x, rng: x.rng(2), stopAt: -1, stall: -1, buf: make([]byte, 128<<10)}
	plan := x.rng(3)
	if plan.IntN(4) == 0 {
		rs.stall = plan.Int64N(x.inLen + 1)
	}
	if plan.IntN(8) == 0 {
		rs.stopAt = plan.Int64N(x.inLen + 1)
	}
	return rs
}

// read runs x's reader until its stream ends or fails, and returns its
// state (the slices it still holds).
func (x *ttEnd) read() *ttReading {
	rs := x.newReading()
	for !rs.stop {
		rs.pace()
		var stop bool
		if x.ring != nil {
			stop = rs.ringOp()
		} else {
			stop = rs.stdOp()
		}
		if stop {
			break
		}
	}
	x.rOff.Store(rs.off)
	return rs
}

// stdOp makes one Read and reports whether the reader stops.
func (rs *ttReading) stdOp() bool {
	x := rs.x
	p := rs.buf[:rs.size()]
	closedBefore := x.closed.Load()
	n, err := x.nc().Read(p)
	if n > 0 {
		if !rs.check(p[:n], rs.off, "Read") {
			return true
		}
		rs.advance(n)
	}
	if err == nil {
		if n == 0 && len(p) > 0 {
			x.failf("Read of %d bytes at offset %d returned 0 bytes and no error", len(p), rs.off)
			return true
		}
		return false
	}
	stop := x.readErr("Read", rs.off, err, closedBefore)
	if ttClassify(err) == ttEOF {
		x.rEOF.Store(rs.off)
	}
	return stop
}

// ringOp makes one call of the connection's Reader (or of a Reader from
// Slice) and reports whether the reader stops.
func (rs *ttReading) ringOp() bool {
	x := rs.x
	r := x.ring.Reader()
	if rs.rng.IntN(16) == 0 {
		rs.checkHeld(nil, true, "while held")
	}
	if len(rs.sliced) > 0 && rs.rng.IntN(6) == 0 {
		rs.slicedOp(rs.sliced[rs.rng.IntN(len(rs.sliced))])
		return rs.stop
	}
	n := rs.size()
	c := rs.rng.IntN(20)
	need := max(n, 1)
	if c >= 8 && c < 10 {
		need = ttUntilMax // Until's delimiter is at most this far
	}
	if len(rs.sliced) > 0 && r.Len() < need {
		// A Reader from Slice pins receive buffers that no mark counts:
		// held while this reader waits, they could starve the ring that
		// the wait needs.
		rs.releaseAll()
	}
	closedBefore := x.closed.Load()
	var (
		op  string
		err error
	)
	switch {
	case c < 5:
		op = fmt.Sprintf("Next(%d)", n)
		var b []byte
		if b, err = r.Next(n); err == nil {
			if len(b) != n {
				x.failf("%s returned %d bytes", op, len(b))
				return true
			}
			if rs.check(b, rs.off, op) {
				rs.hold(b, rs.off, nil, op)
				rs.advance(n)
			}
		}
	case c < 7:
		op = fmt.Sprintf("Peek(%d)", n)
		var b []byte
		if b, err = r.Peek(n); err == nil {
			if len(b) != n {
				x.failf("%s returned %d bytes", op, len(b))
				return true
			}
			if rs.check(b, rs.off, op) {
				rs.hold(b, rs.off, nil, op)
			}
		}
	case c < 8:
		op = fmt.Sprintf("Skip(%d)", n)
		if err = r.Skip(n); err == nil {
			rs.advance(n)
		}
	case c < 10:
		return rs.until(r, closedBefore)
	case c < 11:
		op = fmt.Sprintf("Slice(%d)", n)
		rs.checkHeld(nil, false, "before a Slice")
		var s *Reader
		if s, err = r.Slice(n); err == nil {
			rs.forget(nil) // Slice released them
			if got := s.Len(); got != n {
				x.failf("%s: the new Reader holds %d bytes", op, got)
			}
			rs.sliced = append(rs.sliced, &ttSliced{r: s, off: rs.off, rem: n})
			rs.advance(n)
			if len(rs.sliced) > 3 {
				rs.releaseSliced(rs.sliced[0])
			}
		}
	case c < 12:
		op = fmt.Sprintf("ReadBinary(%d)", n)
		var b []byte
		if b, err = r.ReadBinary(n); err == nil && rs.check(b, rs.off, op) {
			rs.advance(n)
		}
	case c < 13:
		op = fmt.Sprintf("ReadString(%d)", n)
		var s string
		if s, err = r.ReadString(n); err == nil && rs.check([]byte(s), rs.off, op) {
			rs.advance(n)
		}
	case c < 15:
		op = "Release"
		rs.drop(nil, "before Release")
		err = r.Release()
	case c < 17:
		op = fmt.Sprintf("Read(%d)", n)
		rs.drop(nil, "before the Read that released it")
		var k int
		p := rs.buf[:n]
		k, err = x.ring.Read(p)
		if k > 0 && rs.check(p[:k], rs.off, op) {
			rs.advance(k)
		}
		if err == nil && k == 0 && n > 0 {
			x.failf("%s at offset %d returned 0 bytes and no error", op, rs.off)
			return true
		}
	default:
		l := r.Len()
		op = fmt.Sprintf("Next(Len()=%d)", l)
		var b []byte
		if b, err = r.Next(l); err == nil && rs.check(b, rs.off, op) {
			rs.hold(b, rs.off, nil, op)
			rs.advance(l)
		}
	}
	if rs.stop {
		return true
	}
	if err != nil {
		return rs.ringErr(op, err, closedBefore)
	}
	return false
}

// ringErr judges a failed call of the connection's Reader; at a clean
// EOF it reads what is left first (fewer bytes than the call asked for
// remain readable).
func (rs *ttReading) ringErr(op string, err error, closedBefore bool) bool {
	x := rs.x
	if errors.Is(err, errNegativeCount) {
		x.failf("%s: %v", op, err)
		return true
	}
	stop := x.readErr(op, rs.off, err, closedBefore)
	if ttClassify(err) == ttEOF {
		rs.readRest()
	}
	return stop
}

// readRest reads, after an io.EOF, the bytes still readable (fewer than
// the failed call asked for), then checks that the input stays ended.
func (rs *ttReading) readRest() {
	x := rs.x
	r := x.ring.Reader()
	for l := r.Len(); l > 0; l = r.Len() {
		b, err := r.Next(l)
		if err != nil {
			rs.restErr(fmt.Sprintf("Next(Len()=%d) after io.EOF", l), err, ttOK)
			return
		}
		if !rs.check(b, rs.off, "Next(Len()) after io.EOF") {
			return
		}
		rs.hold(b, rs.off, nil, "Next(Len()) after io.EOF")
		rs.advance(l)
	}
	_, err := r.Peek(1)
	rs.restErr("Peek(1) after io.EOF and the rest read", err, ttEOF)
	if ttClassify(err) == ttEOF {
		// Only then is the rest known read: a Close of this end between
		// the io.EOF and here drops what was left, by the test's hand.
		x.rEOF.Store(rs.off)
	}
}

// restErr judges an error of readRest's calls: want, or what a deadline
// or a Close set since may cause.
func (rs *ttReading) restErr(op string, err error, want ttKind) {
	x := rs.x
	switch k := ttClassify(err); {
	case k == want:
	case k == ttDeadline && x.deadline.Load():
	case k == ttClosed && x.closing.Load():
	default:
		x.failf("%s, at offset %d: %v, want %v", op, rs.off, err, want)
	}
}

// until reads up to a delimiter some way ahead in the stream: the first
// byte of the stream there that equals it is where Until must stop.
func (rs *ttReading) until(r *Reader, closedBefore bool) bool {
	x := rs.x
	rem := x.inLen - rs.off
	if rem <= 0 {
		_, err := r.Until(0)
		if err == nil {
			x.failf("Until at the stream's end (offset %d) returned no error", rs.off)
			return true
		}
		return rs.ringErr("Until at the end", err, closedBefore)
	}
	k := rs.rng.Int64N(min(rem, ttUntilMax))
	delim := ttByte(x.in, rs.off+k)
	j := int64(0)
	for ttByte(x.in, rs.off+j) != delim {
		j++
	}
	op := fmt.Sprintf("Until(%#x) (the delimiter %d bytes ahead)", delim, j)
	b, err := r.Until(delim)
	if err != nil {
		return rs.ringErr(op, err, closedBefore)
	}
	if int64(len(b)) != j+1 {
		x.failf("%s returned %d bytes at offset %d", op, len(b), rs.off)
		return true
	}
	if rs.check(b, rs.off, op) {
		rs.hold(b, rs.off, nil, "Until")
		rs.advance(len(b))
	}
	return rs.stop
}

// ttUntilMax bounds how far ahead Until's delimiter lies: under every
// input high-water mark the test sets, so Until never fails with
// ErrBufferFull.
const ttUntilMax = 4 << 10

// slicedOp makes one call of a Reader from Slice, whose bytes are fixed:
// each call has one right answer.
func (rs *ttReading) slicedOp(s *ttSliced) {
	x := rs.x
	if got := s.r.Len(); got != s.rem {
		x.failf("a Reader from Slice holds %d bytes, want %d (stream offset %d)", got, s.rem, s.off)
		rs.stop = true
		return
	}
	k := 0
	if s.rem > 0 {
		k = rs.rng.IntN(s.rem + 1)
	}
	switch rs.rng.IntN(8) {
	case 0:
		b, err := s.r.Next(k)
		if rs.slicedErr("Next", k, err) && rs.check(b, s.off, "a sliced Reader's Next") {
			rs.hold(b, s.off, s, "a sliced Reader's Next")
			s.off += int64(k)
			s.rem -= k
		}
	case 1:
		b, err := s.r.Peek(k)
		if rs.slicedErr("Peek", k, err) && rs.check(b, s.off, "a sliced Reader's Peek") {
			rs.hold(b, s.off, s, "a sliced Reader's Peek")
		}
	case 2:
		if err := s.r.Skip(k); rs.slicedErr("Skip", k, err) {
			s.off += int64(k)
			s.rem -= k
		}
	case 3:
		b, err := s.r.ReadBinary(k)
		if rs.slicedErr("ReadBinary", k, err) && rs.check(b, s.off, "a sliced Reader's ReadBinary") {
			s.off += int64(k)
			s.rem -= k
		}
	case 4:
		// Beyond its bytes: io.EOF, and nothing consumed.
		if _, err := s.r.Next(s.rem + 1); err != io.EOF {
			x.failf("Next(%d) of a sliced Reader holding %d: %v, want io.EOF", s.rem+1, s.rem, err)
			rs.stop = true
		}
	case 5:
		if s.rem == 0 {
			return
		}
		j := 0
		delim := ttByte(x.in, s.off+int64(rs.rng.IntN(s.rem)))
		for ttByte(x.in, s.off+int64(j)) != delim {
			j++
		}
		b, err := s.r.Until(delim)
		if err != nil || len(b) != j+1 {
			x.failf("a sliced Reader's Until(%#x), %d bytes ahead: %d bytes, %v", delim, j, len(b), err)
			rs.stop = true
			return
		}
		if rs.check(b, s.off, "a sliced Reader's Until") {
			rs.hold(b, s.off, s, "a sliced Reader's Until")
			s.off += int64(j + 1)
			s.rem -= j + 1
		}
	case 6:
		// Slice of a sliced Reader: the new one takes k bytes, and
		// slices s returned before are released.
		rs.checkHeld(s, false, "before a sliced Reader's Slice")
		n, err := s.r.Slice(k)
		if !rs.slicedErr("Slice", k, err) {
			return
		}
		rs.forget(s) // Slice released them
		rs.sliced = append(rs.sliced, &ttSliced{r: n, off: s.off, rem: k})
		s.off += int64(k)
		s.rem -= k
	default:
		rs.releaseSliced(s)
	}
}

// slicedErr fails the sequence for an error of a sliced Reader's call
// within its bytes.
func (rs *ttReading) slicedErr(op string, k int, err error) bool {
	if err != nil {
		rs.x.failf("a sliced Reader's %s(%d): %v", op, k, err)
		rs.stop = true
		return false
	}
	return true
}

// releaseSliced checks s's held slices and releases s.
func (rs *ttReading) releaseSliced(s *ttSliced) {
	rs.drop(s, "before its Reader's Release")
	s.r.Release()
	if l := s.r.Len(); l != 0 {
		rs.x.failf("a sliced Reader holds %d bytes after Release", l)
	}
	for i, t := range rs.sliced {
		if t == s {
			rs.sliced = append(rs.sliced[:i], rs.sliced[i+1:]...)
			break
		}
	}
}

// releaseAll releases every Reader from Slice.
func (rs *ttReading) releaseAll() {
	for len(rs.sliced) > 0 {
		rs.releaseSliced(rs.sliced[0])
	}
}

// finish checks the held slices at the reader's end, after yielding for
// a while (the connection may be closed by now, and its buffers reused
// by others' input), and releases those the connection's Reader returned
// unless keep is set.
func (rs *ttReading) finish(keep bool) {
	rs.checkHeld(nil, true, "by the reader's end")
	for range rs.rng.IntN(100) {
		runtime.Gosched()
	}
	rs.checkHeld(nil, true, "after the reader's end")
	if !keep && rs.x.ring != nil {
		rs.drop(nil, "before the last Release")
		rs.x.ring.Reader().Release()
	}
}
