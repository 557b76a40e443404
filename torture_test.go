//go:build linux

package ringpoll

// TestTorture: random sequences of reads (Read, and every call of the
// nocopy Reader, zero lengths included), writes (Write, and the Writer's
// calls then Flush), deadlines, half-closes, closes from either end,
// resets, Server.Shutdown and peers that stall or read slowly, on every
// engine, each checked against a model of what each end may see
// (torture_ends_test.go). The sequence and its checks at the end are
// here; what the test does meanwhile is in torture_steps_test.go, the
// ends' readers in torture_read_test.go. Helpers start with tt.
//
// A sequence is a seed: it picks the engine (seed mod the number of
// engines), the style (a Listener's AcceptConn, a Server's handler, or
// Dial), the buffer ring, the marks, one to four connections with their
// peers (package net, or another ringpoll Conn), the bytes each direction
// carries and what the test does to them meanwhile. Every goroutine's
// random choices come from the seed, so a replay makes the same choices;
// the interleaving differs, which the model allows for.
//
//	go test -race -run TestTorture .                      the short run (CI)
//	go test -race -run TestTorture -torture.seed=N .      replay seed N
//	go test -race -run TestTorture -torture.long .        many more, from a random seed
//	go test -race -run TestTorture -torture.n=N .         N sequences per engine

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	ttSeedFlag = flag.Int64("torture.seed", -1, "TestTorture: replay this sequence only")
	ttNFlag    = flag.Int("torture.n", 0, "TestTorture: sequences per engine (0: 60, or 400 with -torture.long)")
	ttLongFlag = flag.Bool("torture.long", false, "TestTorture: run many sequences, from a random first seed")
)

// The sequences per engine of the short run and of the long one.
const (
	ttShortN = 60
	ttLongN  = 400
)

func TestTorture(t *testing.T) {
	n, first := ttShortN, uint64(0)
	if *ttLongFlag {
		n = ttLongN
		first = rand.Uint64N(1 << 40)
		t.Logf("-torture.long: first sequence %d per engine", first)
	}
	if *ttNFlag > 0 {
		n = *ttNFlag
	}
	engines := uint64(len(testEngines))
	forEachEngine(t, func(t *testing.T, e Engine) {
		ei := uint64(slices.Index(testEngines, e))
		var seeds []uint64
		if *ttSeedFlag >= 0 {
			seed := uint64(*ttSeedFlag)
			if seed%engines != ei {
				t.Skipf("seed %d is engine %v's", seed, testEngines[seed%engines])
			}
			seeds = []uint64{seed}
		} else {
			for i := range uint64(n) {
				seeds = append(seeds, (first+i)*engines+ei)
			}
		}
		start := time.Now()
		var sum ttSummary
		var failed []uint64
		ran := 0
		for k, seed := range seeds {
			ran++
			if ttRun(t, e, seed, &sum) {
				continue
			}
			// The short run stops at its first failure; the long one
			// goes on, up to 20.
			if failed = append(failed, seed); !*ttLongFlag || len(failed) == 20 {
				t.Logf("stopped after %d of %d sequences", k+1, len(seeds))
				break
			}
		}
		t.Logf("%d sequences in %v, %d failed %v: %v", ran, time.Since(start).Round(time.Millisecond), len(failed), failed, sum)
	})
}

// ttSeq is one sequence.
type ttSeq struct {
	t     *testing.T
	seed  uint64
	e     Engine
	rng   *rand.Rand
	style string // "accept", "handler" or "dial"
	opts  []Option
	desc  strings.Builder
	ln    *Listener
	stdLn net.Listener // "dial": the peers' listener
	srv   *Server
	serve chan error
	conns []*ttConn
	ends  sync.Map // "handler": peer's address → the ringpoll end
	wg    sync.WaitGroup

	// shutdown: Shutdown is part of the sequence; shutdownDone is closed
	// once it returned.
	shutdown     bool
	shutdownDone chan struct{}
	slicedKept   atomic.Int32 // Readers from Slice kept past their reader's end

	mu    sync.Mutex
	fails []string
}

// ttConn is one connection: ring is the ringpoll end under test, peer
// the other.
type ttConn struct {
	s          *ttSeq
	i          int
	ring, peer *ttEnd
	steps      []ttStep
	mu         sync.Mutex
	kept       []*ttReading // readers' state kept past their end
}

func (s *ttSeq) failf(format string, args ...any) {
	s.mu.Lock()
	s.fails = append(s.fails, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// errTTDone is what a torture handler returns: the Server closes the
// connection.
var errTTDone = errors.New("torture: the handler is done")

// ttRun runs the sequence seed on e and reports whether it passed.
func ttRun(t *testing.T, e Engine, seed uint64, sum *ttSummary) bool {
	if testing.Verbose() {
		t.Logf("seed %d", seed) // ties a race report to its sequence
	}
	s := &ttSeq{t: t, seed: seed, e: e, rng: rand.New(rand.NewPCG(seed, 0)), shutdownDone: make(chan struct{})}
	s.plan()
	if s.setup() {
		s.run()
		sum.add(s)
	} else {
		s.abort()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if *ttSeedFlag >= 0 {
		t.Logf("seed %d: the sequence: %s", seed, s.desc.String())
	}
	if len(s.fails) == 0 {
		return true
	}
	head := fmt.Sprintf("seed %d: replay: go test -run 'TestTorture' -torture.seed=%d .", seed, seed)
	if raceEnabled {
		head += " (with -race, as here)"
	}
	for i, f := range s.fails {
		if i == 10 {
			t.Errorf("%s: ... and %d more failures", head, len(s.fails)-10)
			break
		}
		t.Errorf("%s: %s", head, f)
	}
	t.Logf("seed %d: the sequence: %s", seed, s.desc.String())
	return false
}

// ttSummary counts what the sequences of a run did.
type ttSummary struct {
	conns, bytes, eofs, resets, closed, deadlines, heldChecks int64
}

func (m *ttSummary) add(s *ttSeq) {
	for _, cn := range s.conns {
		m.conns++
		for _, x := range []*ttEnd{cn.ring, cn.peer} {
			m.bytes += x.rOff.Load()
			if x.rEOF.Load() >= 0 {
				m.eofs++
			}
			if x.rReset.Load() {
				m.resets++
			}
			if x.closing.Load() {
				m.closed++
			}
			m.deadlines += x.nDeadline.Load()
			m.heldChecks += x.nHeld.Load()
		}
	}
}

func (m ttSummary) String() string {
	return fmt.Sprintf("%d connections, %d bytes checked, %d clean EOFs, %d resets read, %d ends closed, %d deadline errors, %d held-slice checks",
		m.conns, m.bytes, m.eofs, m.resets, m.closed, m.deadlines, m.heldChecks)
}

// ttLen is a direction's planned length.
func ttLen(rng *rand.Rand) int64 {
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1, 2:
		return 1 + rng.Int64N(4<<10)
	case 3, 4, 5, 6, 7:
		return 4<<10 + rng.Int64N(252<<10)
	}
	return 256<<10 + rng.Int64N(1<<20)
}

var ttEndActions = []string{"none", "none", "closewrite", "closewrite", "close"}

// plan draws the sequence's shape.
func (s *ttSeq) plan() {
	rng := s.rng
	s.style = []string{"accept", "handler", "dial"}[rng.IntN(3)]
	ring := ltRings[rng.IntN(len(ltRings))]
	s.opts = append([]Option{WithEngine(s.e), WithDrainTimeout(2 * tsTimeout)}, ring.opts(s.e)...)
	marks := ""
	if rng.IntN(2) == 0 {
		n := []int{16 << 10, 64 << 10}[rng.IntN(2)]
		s.opts = append(s.opts, WithInputHighWater(n))
		marks += fmt.Sprintf(", input mark %d", n)
	}
	if rng.IntN(2) == 0 {
		n := []int{4 << 10, 16 << 10, 64 << 10}[rng.IntN(3)]
		s.opts = append(s.opts, WithOutputHighWater(n))
		marks += fmt.Sprintf(", output mark %d", n)
	}
	s.shutdown = s.style == "handler" && rng.IntN(2) == 0
	fmt.Fprintf(&s.desc, "engine %v, style %s, ring %s%s, shutdown %v", s.e, s.style, ring.name, marks, s.shutdown)
	for i := range 1 + rng.IntN(4) {
		cn := &ttConn{s: s, i: i}
		peerName := "std"
		if s.style != "dial" && rng.IntN(3) == 0 {
			peerName = "ring/dialed"
		} else if s.style == "dial" && rng.IntN(3) == 0 {
			peerName = "ring/accepted"
		}
		cn.ring = newTTEnd(cn, map[string]string{"accept": "ring/accepted", "handler": "ring/handler", "dial": "ring/dialed"}[s.style])
		cn.ring.handler = s.style == "handler"
		cn.peer = newTTEnd(cn, peerName)
		cn.ring.peer, cn.peer.peer = cn.peer, cn.ring
		up, down := ttWord(s.seed, uint64(2*i+1)), ttWord(s.seed, uint64(2*i+2))
		cn.ring.out, cn.peer.in = down, down
		cn.peer.out, cn.ring.in = up, up
		cn.ring.outLen = ttLen(rng)
		cn.peer.outLen = max(ttLen(rng), 1) // its first byte starts a handler
		cn.ring.inLen, cn.peer.inLen = cn.peer.outLen, cn.ring.outLen
		cn.ring.endAction = ttEndActions[rng.IntN(len(ttEndActions))]
		cn.peer.endAction = ttEndActions[rng.IntN(len(ttEndActions))]
		cn.ring.rngBase, cn.peer.rngBase = ttWord(s.seed, uint64(100+2*i)), ttWord(s.seed, uint64(101+2*i))
		cn.steps = ttSteps(rng, cn)
		fmt.Fprintf(&s.desc, "\n  conn %d: %s end ↔ %s end; %d bytes out then %s ↔ %d bytes out then %s; steps: %v",
			i, cn.ring.name, peerName, cn.ring.outLen, cn.ring.endAction, cn.peer.outLen, cn.peer.endAction, cn.steps)
		s.conns = append(s.conns, cn)
	}
}

// setup opens the connections and starts their readers and writers.
func (s *ttSeq) setup() bool {
	ln, err := Listen("tcp", "127.0.0.1:0", s.opts...)
	if err != nil {
		s.failf("Listen: %v", err)
		return false
	}
	s.ln = ln // kept for every style: it keeps the engine and shows its loops
	switch s.style {
	case "handler":
		if s.srv, err = NewServer(s.handle, s.opts...); err != nil {
			s.failf("NewServer: %v", err)
			return false
		}
		s.serve = make(chan error, 1)
		go func() { s.serve <- s.srv.Serve(ln) }()
	case "dial":
		if s.stdLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			s.failf("net.Listen: %v", err)
			return false
		}
	}
	for _, cn := range s.conns {
		if err := cn.open(); err != nil {
			s.failf("conn %d: %v", cn.i, err)
			return false
		}
	}
	return true
}

// open connects cn's ends, writes the peer's first byte (which starts a
// handler), and starts the workers of the ends that no handler runs.
func (cn *ttConn) open() error {
	s := cn.s
	dialRing := func(addr string) (*Conn, error) {
		d := Dialer{Timeout: tsTimeout, Options: s.opts}
		return d.Dial("tcp", addr)
	}
	var err error
	switch {
	case s.style == "dial" && cn.peer.name == "std":
		if cn.ring.ring, err = dialRing(s.stdLn.Addr().String()); err == nil {
			cn.peer.std, err = ttWithin(s, "net's Accept", s.stdLn.Accept)
		}
	case s.style == "dial":
		// The ringpoll peer is accepted by s.ln.
		if cn.ring.ring, err = dialRing(s.ln.Addr().String()); err == nil {
			cn.peer.ring, err = ttWithin(s, "AcceptConn", s.ln.AcceptConn)
		}
	default:
		if cn.peer.name == "std" {
			cn.peer.std, err = net.DialTimeout("tcp", s.ln.Addr().String(), tsTimeout)
		} else {
			cn.peer.ring, err = dialRing(s.ln.Addr().String())
		}
		if err == nil && s.style == "accept" {
			cn.ring.ring, err = ttWithin(s, "AcceptConn", s.ln.AcceptConn)
		}
	}
	if err != nil {
		return err
	}
	if s.style == "handler" {
		s.ends.Store(cn.peer.nc().LocalAddr().String(), cn.ring)
	} else if got, want := cn.ring.nc().RemoteAddr().String(), cn.peer.nc().LocalAddr().String(); got != want {
		return fmt.Errorf("accepted the connection from %s, want %s", got, want)
	}
	first := make([]byte, 1)
	ttFill(first, cn.peer.out, 0)
	if _, err := cn.peer.nc().Write(first); err != nil {
		return fmt.Errorf("the first byte: %w", err)
	}
	cn.peer.sent0 = 1
	cn.peer.start()
	if s.style == "handler" {
		select {
		case <-cn.ring.started:
		case <-time.After(tsTimeout):
			return fmt.Errorf("hang: the handler did not start; state:\n%s\ngoroutines:\n%s", s.state(), ttStacks())
		}
		return nil
	}
	cn.ring.start()
	return nil
}

// ttWithin returns what f returns, or an error once f took tsTimeout (f
// then returns when abort closes the listeners).
func ttWithin[T any](s *ttSeq, what string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	c := make(chan result, 1)
	go func() {
		v, err := f()
		c <- result{v, err}
	}()
	select {
	case r := <-c:
		return r.v, r.err
	case <-time.After(tsTimeout):
		var zero T
		return zero, fmt.Errorf("hang: %s did not return; state:\n%s\ngoroutines:\n%s", what, s.state(), ttStacks())
	}
}

// start runs x's writer and reader on goroutines of their own.
func (x *ttEnd) start() {
	s := x.cn.s
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		x.write()
	}()
	go func() {
		defer s.wg.Done()
		rs := x.read()
		keep := x.ring != nil && rs.rng.IntN(3) == 0
		x.cn.keep(rs, keep)
		close(x.readerDone)
	}()
}

// keep finishes a reader: its held slices are checked again, and kept
// (keep set) or released; of its Readers from Slice, one in the whole
// sequence is kept past the connection's end, the others released (held
// ones pin receive buffers that the high-water mark does not count).
func (cn *ttConn) keep(rs *ttReading, keep bool) {
	rs.finish(keep)
	for _, sl := range slices.Clone(rs.sliced) {
		if sl.rem > 4<<10 || cn.s.slicedKept.Add(1) > 1 {
			rs.releaseSliced(sl)
		}
	}
	if len(rs.held) > 0 || len(rs.sliced) > 0 {
		cn.mu.Lock()
		cn.kept = append(cn.kept, rs)
		cn.mu.Unlock()
	}
}

// handle is the Server's handler: the first call for a connection runs
// its ringpoll end's reader (the writer on a goroutine of its own) to
// the end, then returns an error, which closes the connection.
func (s *ttSeq) handle(ctx context.Context, c *Conn) error {
	v, ok := s.ends.Load(c.RemoteAddr().String())
	if !ok {
		s.failf("the handler ran for a connection from %v, which the test did not open", c.RemoteAddr())
		return errTTDone
	}
	x := v.(*ttEnd)
	if x.handled.Swap(true) {
		x.failf("the handler was called again after it returned an error")
		return errTTDone
	}
	x.ring = c
	close(x.started)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		x.write()
	}()
	rs := x.read()
	if rs.rng.IntN(2) == 0 {
		select {
		case <-x.writerDone:
		case <-time.After(tsTimeout):
		}
	}
	x.cn.keep(rs, false) // the Server releases what the handler read
	x.markClose()
	close(x.readerDone)
	return errTTDone
}

// run drives the connections (and Shutdown) to their end, then checks
// what the model can only judge at the end, and that everything let go.
func (s *ttSeq) run() {
	if s.shutdown {
		go s.shutdownStep()
	} else {
		close(s.shutdownDone)
	}
	var drivers sync.WaitGroup
	ok := atomic.Bool{}
	ok.Store(true)
	for _, cn := range s.conns {
		drivers.Add(1)
		go func() {
			defer drivers.Done()
			if !cn.drive() {
				ok.Store(false)
			}
		}()
	}
	drivers.Wait()
	if !ok.Load() {
		s.abort()
		return
	}
	if !s.await(s.shutdownDone, "Shutdown to return") {
		s.abort()
		return
	}
	if s.srv != nil {
		if !s.shutdown {
			if _, err := tsShutdown(s.srv, tsTimeout); err != nil {
				s.failf("Shutdown at the end: %v", err)
			}
		}
		select {
		case err := <-s.serve:
			if !errors.Is(err, ErrServerClosed) {
				s.failf("Serve returned %v, want ErrServerClosed", err)
			}
		case <-time.After(tsTimeout):
			s.failf("hang: Serve did not return after Shutdown")
		}
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	if !s.await(done, "the sequence's goroutines") {
		s.abort()
		return
	}
	for _, cn := range s.conns {
		cn.release()
	}
	s.judge()
	s.letGo()
}

// judge checks what needs the whole sequence: a clean EOF came after
// every byte the peer's writes reported written, unless the peer's close
// could have reset the connection; and a reset came only from a close
// that could reset.
func (s *ttSeq) judge() {
	for _, cn := range s.conns {
		for _, r := range []*ttEnd{cn.ring, cn.peer} {
			w := r.peer
			if eof := r.rEOF.Load(); eof >= 0 && !w.dirty.Load() && eof < w.wAcked.Load() {
				r.failf("a clean io.EOF after %d bytes, but the peer's writes reported %d written (peer: %s; its writer done: %v)",
					eof, w.wAcked.Load(), w.flags(), w.wOK.Load())
			}
			if r.rReset.Load() && !w.dirty.Load() && !w.shutdown.Load() {
				r.failf("read a reset, but the peer was not closed with input unread (peer: %s)", w.flags())
			}
		}
	}
}

// letGo checks that the connections were destroyed and, on the engines
// with a buffer ring, that every buffer came back; then closes the
// listeners.
func (s *ttSeq) letGo() {
	defer s.closeListeners()
	bound := time.Now().Add(tsTimeout)
	for _, cn := range s.conns {
		for _, x := range []*ttEnd{cn.ring, cn.peer} {
			for x.ring != nil && !x.ring.fd.Finalized() && time.Now().Before(bound) {
				time.Sleep(time.Millisecond)
			}
			if x.ring != nil && !x.ring.fd.Finalized() {
				x.failf("the connection was not destroyed after Close")
			}
		}
	}
	if !isProactor(s.e) {
		return
	}
	for {
		out := int64(0)
		for _, st := range loopStatsOf(s.ln) {
			out += st.BuffersOut
		}
		if out == 0 {
			return
		}
		if time.Now().After(bound) {
			s.failf("%d provided buffers still out after every connection closed: %v", out, s.ln.Stats())
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// abort closes everything after a hang, so that the rest of the test can
// run, and waits for the sequence's goroutines once more.
func (s *ttSeq) abort() {
	for _, cn := range s.conns {
		for _, x := range []*ttEnd{cn.ring, cn.peer} {
			x.shutdown.Store(true)
			x.markClose() // whatever ends it now is the abort's doing
		}
	}
	for _, cn := range s.conns {
		for _, x := range []*ttEnd{cn.ring, cn.peer} {
			x.unstall()
			if x.opened() {
				x.nc().Close()
			}
		}
	}
	if s.srv != nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		s.srv.Shutdown(ctx)
	}
	s.closeListeners()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(tsTimeout):
		s.t.Fatalf("seed %d: goroutines still stuck after closing everything:\n%s", s.seed, ttStacks())
	}
}

func (s *ttSeq) closeListeners() {
	if s.ln != nil {
		s.ln.Close()
	}
	if s.stdLn != nil {
		s.stdLn.Close()
	}
}
