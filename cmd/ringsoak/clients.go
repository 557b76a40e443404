//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// clientKind names one behaviour of the client mix.
type clientKind string

// The client kinds.
const (
	kindEcho        clientKind = "echo"         // stream messages while reading the echo
	kindPingPong    clientKind = "ping-pong"    // one message, its echo, the next
	kindRandomClose clientKind = "random-close" // Close mid-stream
	kindRST         clientKind = "rst"          // SO_LINGER 0 and Close mid-stream
	kindHalfClose   clientKind = "half-close"   // CloseWrite, then all the echo and EOF
	kindSlowReader  clientKind = "slow-reader"  // read a few KiB every 50 ms for a while
	kindNeverRead   clientKind = "never-read"   // write until it blocks, then Close
	kindSlowloris   clientKind = "slowloris"    // a byte every 100-500 ms
	kindBurst       clientKind = "burst"        // one of hundreds of quick connections
)

// allKinds lists the kinds in the order the verdict prints them.
var allKinds = []clientKind{kindEcho, kindPingPong, kindRandomClose, kindRST, kindHalfClose,
	kindSlowReader, kindNeverRead, kindSlowloris, kindBurst}

// laneMix is the weighted choice of the client lanes (slowloris and bursts
// run on their own).
var laneMix = []struct {
	kind   clientKind
	weight int
}{
	{kindEcho, 25}, {kindPingPong, 15}, {kindRandomClose, 12}, {kindRST, 12},
	{kindHalfClose, 16}, {kindSlowReader, 8}, {kindNeverRead, 6},
}

// Client timing and sizes.
const (
	maxMessages     = 16       // messages per echo connection, at most
	readChunk       = 64 << 10 // bytes per Read
	slowReadChunk   = 4 << 10  // bytes per slow Read
	slowReadEvery   = 50 * time.Millisecond
	neverReadChunk  = 64 << 10 // bytes per never-read Write
	neverReadBlock  = 300 * time.Millisecond
	burstWorkers    = 64 // connections of a burst open at once
	slowlorisStart  = 200 * time.Millisecond
	minSlowPhase    = 200 * time.Millisecond
	maxSlowPhase    = 2 * time.Second
	slowReaderTotal = 4 << 20 // bytes a slow reader's writer sends, at most
	// closeWriteOnlyMax bounds what a closing client writes without
	// reading: little enough for the socket buffers to take at once.
	closeWriteOnlyMax = 256 << 10
)

// clientEnv is what every client of one run shares.
type clientEnv struct {
	addr   string
	cfg    *config
	ctx    context.Context // done when the run's traffic time is over
	tally  *tally
	dialer net.Dialer
	// nrCap bounds what a never-reading client writes: more than the
	// server's limits and every socket buffer on the way could hold.
	nrCap int64
	// ports records each client's local port, to trace server sockets.
	ports *portBook
}

// result is what one client connection did.
type result struct {
	kind     clientKind
	sent     int64
	verified int64
	errs     []clientErr
}

// clientErr is one classified error of a client.
type clientErr struct {
	kind     errKind
	expected bool
	msg      string
}

// fail records an error the client did not provoke.
func (r *result) fail(err error) { r.add(err, false) }

// expect records an error the client provoked (a RST client's own, a
// never-reader's write timeout). Errors from the client's own Close are
// always expected.
func (r *result) expect(err error) { r.add(err, true) }

func (r *result) add(err error, expected bool) {
	if err == nil {
		return
	}
	k := classify(err)
	if k == errClosedSelf {
		expected = true
	}
	r.errs = append(r.errs, clientErr{kind: k, expected: expected, msg: err.Error()})
}

// logSize returns a size from 1 to limit, log-distributed: as many 1-10 B
// messages as 10-100 KiB ones.
func logSize(rng *rand.Rand, limit int) int {
	n := int(math.Exp(rng.Float64() * math.Log(float64(limit)+1)))
	return max(1, min(limit, n))
}

// messageSizes returns 1 to maxMessages log-distributed sizes and their sum.
func (e *clientEnv) messageSizes(rng *rand.Rand) ([]int, int64) {
	sizes := make([]int, 1+rng.IntN(maxMessages))
	var total int64
	for i := range sizes {
		sizes[i] = logSize(rng, e.cfg.maxMsg)
		total += int64(sizes[i])
	}
	return sizes, total
}

// lane runs clients of the weighted mix one after another until the run's
// traffic time is over. Lane i starts with the mix's i-th kind, so that
// with as many lanes as kinds every kind runs however few clients the
// machine's pace lets through.
func (e *clientEnv) lane(i int, rng *rand.Rand) {
	total := 0
	for _, m := range laneMix {
		total += m.weight
	}
	for first := true; e.ctx.Err() == nil; first = false {
		pick := rng.IntN(total)
		var kind clientKind
		if first && i < len(laneMix) {
			pick = -1
			kind = laneMix[i].kind
		}
		for _, m := range laneMix {
			if pick < 0 {
				break
			}
			if pick < m.weight {
				kind = m.kind
				break
			}
			pick -= m.weight
		}
		seed := rng.Uint64()
		var r result
		switch kind {
		case kindEcho:
			r = e.echo(rng, seed, kindEcho)
		case kindPingPong:
			r = e.echo(rng, seed, kindPingPong)
		case kindHalfClose:
			r = e.echo(rng, seed, kindHalfClose)
		case kindRandomClose, kindRST:
			r = e.closer(rng, seed, kind)
		case kindSlowReader:
			r = e.slowReader(rng, seed)
		case kindNeverRead:
			r = e.neverRead(seed)
		}
		e.tally.add(r)
	}
}

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

// echo runs an echo client: 1 to 16 log-distributed messages, written on
// their own goroutine while this one reads and verifies the echo. As
// kindPingPong each message waits for the previous one's echo; as
// kindHalfClose the client shuts its writing side after the last message
// and wants all of the echo, then EOF.
func (e *clientEnv) echo(rng *rand.Rand, seed uint64, kind clientKind) (r result) {
	r.kind = kind
	sizes, total := e.messageSizes(rng)
	cc, err := e.dial(kind, seed, e.cfg.maxMsg, readChunk)
	if err != nil {
		r.fail(err)
		return r
	}
	defer cc.finish(&r)
	var gate chan struct{}
	if kind == kindPingPong {
		gate = make(chan struct{}, len(sizes))
	}
	done := make(chan struct{})
	werrc := make(chan error, 1)
	go func() {
		werrc <- cc.writeMessages(sizes, gate, done, kind == kindHalfClose)
	}()
	var rerr error
	if gate != nil {
		for _, s := range sizes {
			if rerr = cc.readVerify(int64(s), readChunk); rerr != nil {
				break
			}
			gate <- struct{}{}
		}
	} else {
		rerr = cc.readVerify(total, readChunk)
	}
	if rerr == nil && kind == kindHalfClose {
		rerr = cc.expectEOF()
	}
	close(done)
	if rerr != nil {
		cc.c.Close() // unblock the writer
	}
	r.fail(rerr)
	r.fail(<-werrc)
	return r
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

// closer runs a client that closes mid-stream: after verifying a random
// part of the echo while its writer still sends, or right after writing a
// random amount without reading any. As kindRST it sets SO_LINGER 0 first,
// so the close sends a RST.
func (e *clientEnv) closer(rng *rand.Rand, seed uint64, kind clientKind) (r result) {
	r.kind = kind
	sizes, total := e.messageSizes(rng)
	readFirst := rng.IntN(3) > 0
	readLimit := rng.Int64N(total + 1)
	writeOnly := min(closeWriteOnlyMax, total) // what fits in the socket buffers
	writeOnly = rng.Int64N(writeOnly + 1)
	cc, err := e.dial(kind, seed, e.cfg.maxMsg, readChunk)
	if err != nil {
		r.fail(err)
		return r
	}
	defer cc.finish(&r)
	closeNow := func() {
		if kind == kindRST {
			if err := cc.c.SetLinger(0); err != nil {
				r.fail(err)
			}
		}
		cc.c.Close()
	}
	if !readFirst {
		r.fail(cc.write(int(writeOnly)))
		closeNow()
		return r
	}
	done := make(chan struct{})
	werrc := make(chan error, 1)
	go func() { werrc <- cc.writeMessages(sizes, nil, done, false) }()
	rerr := cc.readVerify(readLimit, readChunk)
	close(done)
	closeNow()
	r.fail(rerr)
	// The writer may be cut off by the close: that error is the client's
	// own (closed-self).
	r.expect(<-werrc)
	return r
}

// slowReader runs a client whose writer sends up to 4 MiB while it reads
// at most 4 KiB every 50 ms for up to 2 s (the server's output backs up),
// then reads and verifies the rest at full speed.
func (e *clientEnv) slowReader(rng *rand.Rand, seed uint64) (r result) {
	r.kind = kindSlowReader
	total := int64(512<<10) + rng.Int64N(slowReaderTotal-512<<10+1)
	var sizes []int
	for left := total; left > 0; {
		s := int64(logSize(rng, e.cfg.maxMsg))
		s = min(s, left)
		sizes = append(sizes, int(s))
		left -= s
	}
	phase := minSlowPhase + randDur(rng, maxSlowPhase-minSlowPhase)
	if dl, ok := e.ctx.Deadline(); ok {
		phase = max(minSlowPhase, min(phase, time.Until(dl)))
	}
	cc, err := e.dial(kindSlowReader, seed, e.cfg.maxMsg, readChunk)
	if err != nil {
		r.fail(err)
		return r
	}
	defer cc.finish(&r)
	done := make(chan struct{})
	werrc := make(chan error, 1)
	go func() { werrc <- cc.writeMessages(sizes, nil, done, false) }()
	var rerr error
	slowUntil := time.Now().Add(phase)
	tick := time.NewTicker(slowReadEvery)
	for rerr == nil && cc.ver.off < total && time.Now().Before(slowUntil) {
		n := min(int64(slowReadChunk), total-cc.ver.off)
		rerr = cc.readVerify(n, slowReadChunk)
		<-tick.C
	}
	tick.Stop()
	if rerr == nil {
		rerr = cc.readVerify(total-cc.ver.off, readChunk)
	}
	close(done)
	if rerr != nil {
		cc.c.Close()
	}
	r.fail(rerr)
	r.fail(<-werrc)
	return r
}

// neverRead runs a client that writes without ever reading until a Write
// blocks for 300 ms (the server's backpressure and the socket buffers are
// full), then closes. Writing more than nrCap without blocking fails with
// errNoBackpressure.
func (e *clientEnv) neverRead(seed uint64) (r result) {
	r.kind = kindNeverRead
	cc, err := e.dial(kindNeverRead, seed, neverReadChunk, 1)
	if err != nil {
		r.fail(err)
		return r
	}
	defer cc.finish(&r)
	for {
		if cc.sent.Load() >= e.nrCap {
			r.fail(errWritesNeverBlocked)
			return r
		}
		b := cc.wbuf
		cc.wgen.Read(b)
		cc.c.SetWriteDeadline(time.Now().Add(neverReadBlock))
		m, err := cc.c.Write(b)
		cc.sent.Add(int64(m))
		if err != nil {
			if classify(err) == errTimeout {
				r.expect(err) // blocked: what this client waits for
			} else {
				r.fail(err)
			}
			return r
		}
	}
}

// slowloris runs a client that sends one byte every 100-500 ms and reads
// each byte's echo, until the traffic time is over; then it shuts its
// writing side and wants EOF. It reports false if the traffic time was
// over before it started (staggered by up to 200 ms).
func (e *clientEnv) slowloris(rng *rand.Rand, seed uint64) (result, bool) {
	r := result{kind: kindSlowloris}
	if !sleepCtx(e.ctx, randDur(rng, slowlorisStart)) {
		return r, false
	}
	return e.slowlorisConn(rng, seed), true
}

// slowlorisConn is the connection of a slowloris client.
func (e *clientEnv) slowlorisConn(rng *rand.Rand, seed uint64) (r result) {
	r.kind = kindSlowloris
	cc, err := e.dial(kindSlowloris, seed, 1, 1)
	if err != nil {
		r.fail(err)
		return r
	}
	defer cc.finish(&r)
	for sleepCtx(e.ctx, 100*time.Millisecond+randDur(rng, 400*time.Millisecond)) {
		if err := cc.write(1); err != nil {
			r.fail(err)
			return r
		}
		if err := cc.readVerify(1, 1); err != nil {
			r.fail(err)
			return r
		}
	}
	if err := cc.c.CloseWrite(); err != nil {
		r.fail(err)
		return r
	}
	r.fail(cc.expectEOF())
	return r
}

// burst opens n connections, burstWorkers at a time, each of which echoes
// 1 to 64 bytes and closes, and records each.
func (e *clientEnv) burst(rng *rand.Rand, n int) {
	seeds := make(chan [2]uint64, n)
	for range n {
		seeds <- [2]uint64{rng.Uint64(), uint64(1 + rng.IntN(64))}
	}
	close(seeds)
	var wg sync.WaitGroup
	for range min(n, burstWorkers) {
		wg.Go(func() {
			for s := range seeds {
				e.tally.add(e.burstConn(s[0], int(s[1])))
			}
		})
	}
	wg.Wait()
}

// burstConn is one connection of a burst: size bytes echoed, then Close.
func (e *clientEnv) burstConn(seed uint64, size int) (r result) {
	r.kind = kindBurst
	cc, err := e.dial(kindBurst, seed, size, size)
	if err != nil {
		r.fail(err)
		return r
	}
	defer cc.finish(&r)
	if err := cc.write(size); err != nil {
		r.fail(err)
		return r
	}
	r.fail(cc.readVerify(int64(size), size))
	return r
}

// burstLane runs bursts of burstMax/5 to burstMax connections, 250-750 ms
// apart, until the traffic time is over.
func (e *clientEnv) burstLane(rng *rand.Rand) {
	lo := max(1, e.cfg.burst/5)
	for e.ctx.Err() == nil {
		e.burst(rng, lo+rng.IntN(e.cfg.burst-lo+1))
		sleepCtx(e.ctx, 250*time.Millisecond+randDur(rng, 500*time.Millisecond))
	}
}

// sleepCtx sleeps for d and reports true, or reports false at once if ctx
// ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// randDur returns a duration in [0, d) drawn from rng.
func randDur(rng *rand.Rand, d time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(d)))
}
