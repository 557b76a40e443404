//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// Alternating mode (-alt-addr): two servers, each with its own crowd of
// connections (echo or rpc, ping-pong or pipelined: -proto, -depth),
// loaded in turns of -alt-period, one turn each per
// pair, in the order A B, B A, A B, ... Only one crowd runs at a time; the
// other's connections wait, idle, for their turn. Each turn's requests and
// the server's CPU time over the turn (its threads' schedstat) give that
// server's requests per CPU-second in the turn, and each pair of turns one
// ratio, A over B. A machine whose pace changes from one second to the
// next (these 2-vCPU guests have regimes that last seconds) then moves
// both servers of a pair alike, where runs one after the other, seconds
// apart, each catch a different pace.
//
// With a rate (-rate), each turn runs a pacer (pace.go) over the side's
// connections, so that both servers get the same load, evenly spaced, and
// the ratio compares their CPU per request at that rate. A connection's
// batch that the pacer did not send before its turn ended waits for the
// next turn; one in flight is answered and counted before the turn's CPU
// time is read.

// altConfig is what -alt-addr runs.
type altConfig struct {
	addrs  [2]string
	pids   [2]int
	conns  int
	size   int
	proto  string        // "echo" or "rpc"
	depth  int           // messages in flight per connection (1: ping-pong)
	rate   float64       // requests a second offered to the side whose turn it is; 0: as fast as replies come
	period time.Duration // one turn
	warmup time.Duration // each server, once, before the first pair
	pairs  int
}

// altSide is one server and its connections.
type altSide struct {
	addr  string
	pid   int
	conns []net.Conn

	// active is set while the side's turn runs; a connection that finds
	// it unset waits on turnCond, counted in idle, until the turn comes,
	// and the last of them to stop wakes the turn (idleCond).
	active   atomic.Bool
	mu       sync.Mutex
	turnCond *sync.Cond
	idleCond *sync.Cond
	idle     int  // connections waiting for their turn, or gone
	failed   int  // connections gone for good
	stopped  bool // the run is over: waiting connections return
	// served is set by the first request a turn completes, and then
	// first is closed: a turn lasts until then, however slowly the
	// connections get going. dead is closed once every connection failed.
	served atomic.Bool
	first  chan struct{}
	dead   chan struct{}

	// With a rate: slots holds each connection's place under the turn's
	// pacer (pace), and over is closed when the pacer has stopped at the
	// turn's end. pace and over are set under mu before the turn starts.
	slots []*pacedSlot
	pace  *pacer
	over  chan struct{}

	reqs       atomic.Uint64
	verifyErrs atomic.Uint64
	firstErr   atomic.Pointer[string]
}

// checkAlt says what is wrong with an -alt-addr run's flags.
func checkAlt(c altConfig) error {
	switch {
	case c.proto != "echo" && c.proto != "rpc" || c.depth < 1:
		return fmt.Errorf("-alt-addr: only -proto echo or rpc, -depth 1 or more; got -proto %s -depth %d", c.proto, c.depth)
	case c.rate < 0 || c.rate > 0 && c.period > 0 && c.rate*c.period.Seconds() < float64(2*c.depth):
		return fmt.Errorf("-alt-addr: -rate %v: want 0 (as fast as replies come) or at least two batches of -depth %d a turn of %v", c.rate, c.depth, c.period)
	case c.addrs[1] == "" || c.addrs[0] == c.addrs[1]:
		return fmt.Errorf("-alt-addr %q: want a second server, not -addr %q again", c.addrs[1], c.addrs[0])
	case c.pids[0] <= 0 || c.pids[1] <= 0:
		return fmt.Errorf("-alt-addr: both servers' processes are measured: give -server-pid and -alt-pid (got %d and %d)", c.pids[0], c.pids[1])
	case c.conns < 1 || c.size < headerLen:
		return fmt.Errorf("-alt-addr: -conns %d, -size %d: want at least 1 connection and %d bytes", c.conns, c.size, headerLen)
	case c.period <= 0 || c.pairs < 2:
		return fmt.Errorf("-alt-addr: -alt-period %v gives %d pairs of turns in -duration: want a period above 0 and at least 2 pairs", c.period, c.pairs)
	}
	return nil
}

// altLoad runs an -alt-addr measurement.
func altLoad(ctx context.Context, c altConfig) (*benchfmt.TurnsResult, error) {
	var sides [2]*altSide
	for i := range sides {
		s := &altSide{addr: c.addrs[i], pid: c.pids[i]}
		s.turnCond, s.idleCond = sync.NewCond(&s.mu), sync.NewCond(&s.mu)
		s.dead = make(chan struct{})
		if c.rate > 0 {
			s.slots = make([]*pacedSlot, c.conns)
			for i := range s.slots {
				s.slots[i] = new(pacedSlot) // its connection sets send
			}
		}
		d := net.Dialer{Timeout: 5 * time.Second}
		for range c.conns {
			conn, err := d.DialContext(ctx, "tcp", s.addr)
			if err != nil {
				s.closeAll()
				for _, done := range sides[:i] {
					done.closeAll()
				}
				return nil, fmt.Errorf("dial %s: %w", s.addr, err)
			}
			s.conns = append(s.conns, conn)
		}
		sides[i] = s
	}
	total := c.warmup*2 + time.Duration(2*c.pairs)*c.period
	hard := time.Now().Add(total + 10*time.Second)
	var wg sync.WaitGroup
	for _, s := range sides {
		for id, conn := range s.conns {
			conn.SetDeadline(hard) // no connection outlives the run
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.run(conn, uint64(id), &c)
			}()
		}
	}
	defer func() {
		for _, s := range sides {
			s.stop()
			s.closeAll()
		}
		wg.Wait()
	}()
	res := &benchfmt.TurnsResult{Addrs: c.addrs, PIDs: c.pids, Conns: c.conns, Size: c.size, Proto: c.proto, Depth: c.depth, Rate: c.rate, PeriodS: c.period.Seconds()}
	for _, s := range sides {
		if _, _, err := s.turn(ctx, c.warmup, c); err != nil {
			return nil, err
		}
	}
	for p := range c.pairs {
		order := [2]int{0, 1}
		if p%2 == 1 {
			order = [2]int{1, 0}
		}
		var perCPUs [2]float64
		for _, i := range order {
			n, cpu, err := sides[i].turn(ctx, c.period, c)
			if err != nil {
				return nil, err
			}
			res.Requests[i] += n
			res.ServerCPUNS[i] += cpu
			if n == 0 || cpu <= 0 {
				return nil, fmt.Errorf("%s: %d requests for %d ns of server CPU in a turn of %v (first error: %s)", sides[i].addr, n, cpu, c.period, orNone(sides[i].firstError()))
			}
			perCPUs[i] = float64(n) / float64(cpu)
		}
		res.Ratios = append(res.Ratios, perCPUs[0]/perCPUs[1])
	}
	res.Pairs = len(res.Ratios)
	res.RatioMedian = benchfmt.Median(res.Ratios)
	res.RatioLo, res.RatioHi = benchfmt.Bootstrap(res.Ratios)
	for i, s := range sides {
		res.CPUusPerReq[i] = float64(res.ServerCPUNS[i]) / 1e3 / float64(res.Requests[i])
		res.VerifyErrors += s.verifyErrs.Load()
		if e := s.firstError(); e != "" && res.FirstError == "" {
			res.FirstError = e
		}
	}
	return res, nil
}

// turn runs the side's connections for d and returns the requests they
// completed and the server's CPU time from the start of the turn until
// every connection stopped.
func (s *altSide) turn(ctx context.Context, d time.Duration, c altConfig) (n uint64, cpuNS int64, err error) {
	before, err := sampleProc(s.pid)
	if err != nil {
		return 0, 0, fmt.Errorf("server %d (%s): %w", s.pid, s.addr, err)
	}
	n0 := s.reqs.Load()
	s.mu.Lock()
	if s.slots != nil {
		// Every connection waits for the turn, none in the pacer's
		// hands; a turn the last pacer marked due is forgotten.
		for _, sl := range s.slots {
			sl.mu.Lock()
			sl.due = false
			sl.mu.Unlock()
		}
		s.over = make(chan struct{})
		s.pace = startPacer(s.slots, c.rate/float64(c.depth))
	}
	s.first = make(chan struct{})
	s.served.Store(false)
	s.active.Store(true)
	s.turnCond.Broadcast()
	s.mu.Unlock()
	t := time.NewTimer(d)
	select {
	case <-t.C:
		// At least one request, or every connection gone.
		select {
		case <-s.first:
		case <-s.dead:
		case <-ctx.Done():
		}
	case <-ctx.Done():
		t.Stop()
	}
	s.active.Store(false)
	if s.pace != nil {
		s.pace.end() // it sends nothing more
		close(s.over)
	}
	s.mu.Lock()
	for s.idle < len(s.conns) {
		s.idleCond.Wait()
	}
	s.mu.Unlock()
	after, err := sampleProc(s.pid)
	if err != nil {
		return 0, 0, fmt.Errorf("server %d (%s): %w", s.pid, s.addr, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	cpuNS, _, _ = after.since(before)
	return s.reqs.Load() - n0, cpuNS, nil
}

// run is one connection during the side's turns: a batch of c.depth
// messages laid out as the main mode's (worker.fill), then their replies,
// each checked, until the run stops or the connection fails. A turn ends
// between batches, so every request counted was answered within turns.
func (s *altSide) run(conn net.Conn, id uint64, c *altConfig) {
	w := &worker{id: id, cfg: &config{size: c.size, proto: c.proto, depth: c.depth}}
	wbuf := make([]byte, c.depth*w.cfg.wireLen())
	rbuf := make([]byte, len(wbuf))
	w.fill(wbuf)
	var slot *pacedSlot
	fired := make(chan struct{}, 1)
	if s.slots != nil {
		slot = s.slots[id]
		slot.mu.Lock()
		slot.send = func() error {
			_, err := conn.Write(wbuf)
			select {
			case fired <- struct{}{}: // paced waits for it
			default:
			}
			return err
		}
		slot.mu.Unlock()
	}
	for seq := uint64(0); ; seq += uint64(c.depth) {
		if !s.active.Load() && !s.wait() {
			return
		}
		for k := range c.depth {
			binary.LittleEndian.PutUint64(w.payload(wbuf, k)[8:16], seq+uint64(k))
		}
		if slot == nil {
			if _, err := conn.Write(wbuf); err != nil {
				s.fail(err)
				return
			}
		} else {
			sent, err := s.paced(slot, fired)
			if err != nil {
				s.fail(err)
				return
			}
			if !sent {
				seq -= uint64(c.depth) // the same batch, next turn
				continue
			}
		}
		if _, err := io.ReadFull(conn, rbuf); err != nil {
			s.fail(err)
			return
		}
		if !bytes.Equal(wbuf, rbuf) && s.verifyErrs.Add(1) == 1 {
			s.note(errors.New(w.describeMismatch(seq, wbuf, rbuf)))
		}
		s.reqs.Add(uint64(c.depth))
		if !s.served.Load() {
			s.firstServed()
		}
	}
}

// paced hands the connection's prepared batch to the turn's pacer and
// waits until the pacer sent it (true) or the turn ended first (false:
// the batch was not sent, and the slot is out of the pacer's hands).
func (s *altSide) paced(slot *pacedSlot, fired chan struct{}) (bool, error) {
	s.mu.Lock()
	p, over := s.pace, s.over
	s.mu.Unlock()
	slot.ready(p)
	select {
	case <-fired:
	case <-over:
		// The pacer has stopped: the slot's state says whether it sent
		// the batch before that.
		slot.mu.Lock()
		st := slot.state
		slot.state, slot.due = slotWaiting, false
		slot.mu.Unlock()
		if st != slotInFlight {
			return false, slot.sendErr()
		}
		<-fired
	}
	return true, slot.sendErr()
}

// firstServed closes the turn's first, once.
func (s *altSide) firstServed() {
	s.mu.Lock()
	if !s.served.Load() {
		s.served.Store(true)
		close(s.first)
	}
	s.mu.Unlock()
}

// wait blocks until the side's next turn; false: the run is over.
func (s *altSide) wait() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping()
	for !s.active.Load() && !s.stopped {
		s.turnCond.Wait()
	}
	s.idle--
	return !s.stopped
}

// fail notes a connection's error, unless the run stopped, and counts the
// connection as idle for good, so that turns do not wait for it.
func (s *altSide) fail(err error) {
	s.mu.Lock()
	if !s.stopped {
		s.note(err)
	}
	s.stopping()
	s.failed++
	if s.failed == len(s.conns) {
		close(s.dead)
	}
	s.mu.Unlock()
}

// stopping, with mu held, counts a connection that stopped for the turn
// (or for good) and wakes the turn once none runs.
func (s *altSide) stopping() {
	s.idle++
	if s.idle == len(s.conns) {
		s.idleCond.Signal()
	}
}

func (s *altSide) note(err error) {
	msg := fmt.Sprintf("%s: %v", s.addr, err)
	s.firstErr.CompareAndSwap(nil, &msg)
}

func (s *altSide) firstError() string {
	if p := s.firstErr.Load(); p != nil {
		return *p
	}
	return ""
}

// stop ends the run: waiting connections return.
func (s *altSide) stop() {
	s.mu.Lock()
	s.stopped = true
	s.turnCond.Broadcast()
	s.mu.Unlock()
}

func (s *altSide) closeAll() {
	for _, c := range s.conns {
		c.Close()
	}
}

// writeAlt prints r as text, or as one JSON object.
func writeAlt(w io.Writer, r *benchfmt.TurnsResult, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	load := "as fast as replies come"
	if r.Rate > 0 {
		load = fmt.Sprintf("%.0f req/s a turn", r.Rate)
	}
	fmt.Fprintf(w, "ringload -alt: %d conns each, %d B %s, %d in flight per connection, %s, %d pairs of %v turns (A B, then B A, ...)\n", r.Conns, r.Size, r.Proto, r.Depth, load, r.Pairs, time.Duration(r.PeriodS*float64(time.Second)))
	for i, name := range []string{"A", "B"} {
		fmt.Fprintf(w, "%s %-21s pid %-7d %10d requests  %.3f µs server CPU per request\n", name, r.Addrs[i], r.PIDs[i], r.Requests[i], r.CPUusPerReq[i])
	}
	fmt.Fprintf(w, "A's requests per server CPU-second over B's: median %.3f of %d pairs, 95%% interval %.3f-%.3f\n", r.RatioMedian, r.Pairs, r.RatioLo, r.RatioHi)
	fmt.Fprintf(w, "verify errors %d\n", r.VerifyErrors)
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
	return nil
}
