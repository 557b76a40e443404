//go:build linux

package main

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

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
