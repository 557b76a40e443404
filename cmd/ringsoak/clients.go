//go:build linux

package main

import (
	"context"
	"math"
	"math/rand/v2"
	"net"
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
