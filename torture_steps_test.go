//go:build linux

package ringpoll

// The steps of TestTorture's sequences (torture_test.go): what the test
// does to a connection while its ends read and write, Shutdown, and the
// end of each connection.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"time"
)

// ttStep is one thing the test does to a connection: after a wait (yields,
// or until an end's reader reached an offset), an action on one end.
type ttStep struct {
	yields int
	who    int   // the end acted on: 0 the ringpoll end, 1 the peer
	until  int64 // -1, or the offset the waited-on reader must reach first
	waitOn int   // the end whose reader is waited on
	act    string
	which  int // deadline: read (0), write (1), both (2)
	d      time.Duration
}

func (st ttStep) String() string {
	w := fmt.Sprintf("%d yields", st.yields)
	if st.until >= 0 {
		w = fmt.Sprintf("reader %d at %d", st.waitOn, st.until)
	}
	a := st.act
	if a == "deadline" {
		a = fmt.Sprintf("deadline %s %v", []string{"read", "write", "both"}[st.which], st.d)
	}
	return fmt.Sprintf("{%s; %s end %d}", w, a, st.who)
}

var ttActions = []string{"close", "reset", "closewrite", "deadline", "deadline", "deadline", "deadline", "unstall", "unstall"}

func ttSteps(rng *rand.Rand, cn *ttConn) []ttStep {
	var steps []ttStep
	for range rng.IntN(8) {
		st := ttStep{who: rng.IntN(2), until: -1, act: ttActions[rng.IntN(len(ttActions))]}
		if rng.IntN(4) == 0 {
			st.yields = rng.IntN(2000)
		} else {
			st.waitOn = rng.IntN(2)
			st.until = rng.Int64N([]int64{cn.ring.inLen, cn.peer.inLen}[st.waitOn] + 1)
		}
		if st.act == "deadline" {
			st.which = []int{0, 0, 1, 2}[rng.IntN(4)]
			st.d = time.Duration(rng.IntN(4000)-2000) * time.Microsecond // half passed already
		}
		steps = append(steps, st)
	}
	return steps
}

func (cn *ttConn) end(who int) *ttEnd {
	if who == 0 {
		return cn.ring
	}
	return cn.peer
}

// wait waits as st says: a waited-on reader stops counting once it ended,
// stalls, or its peer's writer is done short of the offset.
func (cn *ttConn) wait(st ttStep) {
	if st.until < 0 {
		for range st.yields {
			runtime.Gosched()
		}
		return
	}
	x := cn.end(st.waitOn)
	bound := time.Now().Add(2 * time.Second)
	for x.rOff.Load() < st.until && !ttDone(x.readerDone) && !x.rStalled.Load() &&
		!(ttDone(x.peer.writerDone) && x.peer.wTried.Load() < st.until) && time.Now().Before(bound) {
		time.Sleep(100 * time.Microsecond)
	}
}

func ttDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// act does st's action.
func (cn *ttConn) act(st ttStep) {
	x := cn.end(st.who)
	if x.closing.Load() {
		return
	}
	switch st.act {
	case "close":
		x.close()
	case "reset":
		x.resetClose()
	case "closewrite":
		// A ringpoll CloseWrite waits for the queued output to go.
		cn.s.wg.Add(1)
		go func() {
			defer cn.s.wg.Done()
			x.closeWrite()
		}()
	case "deadline":
		x.setDeadline(st.which, st.d)
	case "unstall":
		x.unstall()
	}
}

// drive runs cn's steps, then ends it: the stalled readers go on,
// deadlines are cleared, the writers finish, each end that is still open
// half-closes, the readers read to the end, and both ends close. It
// reports false if something did not end in time.
func (cn *ttConn) drive() bool {
	for _, st := range cn.steps {
		cn.wait(st)
		cn.act(st)
	}
	ends := []*ttEnd{cn.ring, cn.peer}
	for _, x := range ends {
		x.unstall()
		if !x.closing.Load() {
			x.nc().SetDeadline(time.Time{})
		}
	}
	for _, x := range ends {
		if !cn.s.await(x.writerDone, fmt.Sprintf("conn %d's %s end's writer to finish", cn.i, x.name)) {
			return false
		}
	}
	for _, x := range ends {
		// Again if a step's CloseWrite failed (at a passed deadline).
		if !x.closing.Load() && !x.wdone.Load() {
			x.closeWrite()
		}
	}
	for _, x := range ends {
		if !cn.s.await(x.readerDone, fmt.Sprintf("conn %d's %s end's reader to finish", cn.i, x.name)) {
			return false
		}
	}
	for _, x := range ends {
		if !x.closing.Load() {
			x.close()
		}
	}
	return true
}

// await waits for c, bounded by tsTimeout; on time out it fails the
// sequence with the goroutines of ringpoll and of the test.
func (s *ttSeq) await(c <-chan struct{}, what string) bool {
	select {
	case <-c:
		return true
	case <-time.After(tsTimeout):
		s.failf("hang: timed out waiting for %s; state:\n%s\ngoroutines:\n%s", what, s.state(), ttStacks())
		return false
	}
}

// state describes every end and the loops, for a hang's message.
func (s *ttSeq) state() string {
	var b strings.Builder
	for _, cn := range s.conns {
		for _, x := range []*ttEnd{cn.ring, cn.peer} {
			fmt.Fprintf(&b, "  conn %d %s end: read %d of %d (EOF at %d, stalled %v, done %v), wrote %d (reported %d) of %d (done %v, ok %v); %s\n",
				cn.i, x.name, x.rOff.Load(), x.inLen, x.rEOF.Load(), x.rStalled.Load(), ttDone(x.readerDone),
				x.wTried.Load(), x.wAcked.Load(), x.outLen, ttDone(x.writerDone), x.wOK.Load(), x.flags())
			if x.opened() && x.ring != nil {
				c := x.ring
				fmt.Fprintf(&b, "    fd: readable %d, held %d, input ended %v, queued out %d, closing %v, detached %v\n",
					c.fd.Len(), c.fd.InputHeld(), c.fd.InputEnded(), c.fd.OutputQueued(), c.fd.Closing(), c.fd.Detached())
			}
		}
	}
	if s.ln != nil {
		for _, st := range loopStatsOf(s.ln) {
			fmt.Fprintf(&b, "  loop: %v\n", st)
		}
	}
	return b.String()
}

// ttStacks returns the stacks of the goroutines in ringpoll's code.
func ttStacks() string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var b strings.Builder
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "ringpoll") && !strings.Contains(g, "ttStacks") &&
			!strings.Contains(g, "testing.(*T).Run(") && !strings.Contains(g, "testing.(*M).Run(") {
			b.WriteString(g + "\n\n")
		}
		if b.Len() > 64<<10 {
			b.WriteString("...\n")
			break
		}
	}
	return b.String()
}

// shutdownStep shuts the Server down at some point, and at a later one
// may give up waiting (Shutdown then closes what is left under the
// handlers).
func (s *ttSeq) shutdownStep() {
	defer close(s.shutdownDone)
	rng := rand.New(rand.NewPCG(s.seed, 9))
	s.randomWait(rng, 4000).wait()
	for _, cn := range s.conns {
		cn.ring.shutdown.Store(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.srv.Shutdown(ctx) }()
	gaveUp := false
	if rng.IntN(3) != 0 {
		w := s.randomWait(rng, 20000)
		waited := make(chan struct{})
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			w.wait()
			close(waited)
		}()
		select {
		case err := <-done:
			// Done gracefully before the wait was over.
			if err != nil {
				s.failf("Shutdown: %v", err)
			}
			return
		case <-waited:
		}
		for _, cn := range s.conns {
			if !cn.ring.closing.Load() {
				cn.ring.markClose()
			}
		}
		cancel()
		gaveUp = true
	}
	select {
	case err := <-done:
		if err != nil && !(gaveUp && errors.Is(err, context.Canceled)) {
			s.failf("Shutdown: %v", err)
		}
	case <-time.After(2 * tsTimeout):
		s.failf("hang: Shutdown did not return; goroutines:\n%s", ttStacks())
	}
}

// ttWait is a wait of a connection's step, or of the Shutdown step.
type ttWait struct {
	cn *ttConn
	st ttStep
}

func (w ttWait) wait() { w.cn.wait(w.st) }

// randomWait draws a wait: up to yields yields, or until a ringpoll end's
// reader reached some offset.
func (s *ttSeq) randomWait(rng *rand.Rand, yields int) ttWait {
	cn := s.conns[rng.IntN(len(s.conns))]
	st := ttStep{yields: rng.IntN(yields), until: -1}
	if rng.IntN(2) == 0 {
		st.until = rng.Int64N(cn.ring.inLen + 1)
	}
	return ttWait{cn, st}
}

// release checks the slices the readers kept past their end again, now
// that both ends are closed and the loop let go of them, and releases
// them.
func (cn *ttConn) release() {
	for _, x := range []*ttEnd{cn.ring, cn.peer} {
		if x.ring != nil {
			bound := time.Now().Add(tsTimeout)
			for !x.ring.fd.Detached() && time.Now().Before(bound) {
				time.Sleep(time.Millisecond)
			}
			if !x.ring.fd.Detached() {
				x.failf("the loop did not let go of the connection after Close")
			}
		}
	}
	for _, rs := range cn.kept {
		rs.checkHeld(nil, true, "after both ends closed")
		for _, sl := range slices.Clone(rs.sliced) {
			rs.releaseSliced(sl)
		}
		if len(rs.held) > 0 {
			rs.x.ring.Reader().Release()
		}
	}
}
