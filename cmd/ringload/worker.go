//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringpoll/ringpoll/internal/hdr"
	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

// Phases of a run, as the workers see them.
const (
	phaseWarmup  int32 = iota
	phaseMeasure       // requests completing now count
	phaseTail          // load goes on, uncounted, until perf is done
	phaseStop
)

// worker is one connection doing ping-pong, or pipelined batches. Its
// fields belong to its goroutine until that goroutine ends.
type worker struct {
	id          uint64
	conn        net.Conn
	cfg         *config
	pacer       *pacer     // with -rate: sends the batches; nil: no pacing
	slot        *pacedSlot // the connection's slot under pacer
	wbuf        []byte     // the batch being sent
	requests    uint64     // completed in the window
	verifyErrs  uint64
	firstVerify string
	err         error // the I/O error that ended it early, if any
	hist        hdr.Histogram
}

// shared is what the workers of one run share.
type shared struct {
	phase    atomic.Int32
	stop     chan struct{} // closed when the phase becomes phaseStop
	slots    chan struct{} // -outstanding: a token per request in flight; nil: no cap
	counted  atomic.Uint64 // requests completed in the window
	budget   uint64        // -requests; 0: none
	spent    chan struct{} // closed when counted reaches budget
	spentOne sync.Once
	// some is closed by the window's first completed request (runPhase
	// waits for it past -duration).
	some    chan struct{}
	someOne sync.Once
}

// completed counts n requests completed in the window.
func (sh *shared) completed(n uint64) {
	sh.someOne.Do(func() { close(sh.some) })
	if sh.budget > 0 && sh.counted.Add(n) >= sh.budget {
		sh.spentOne.Do(func() { close(sh.spent) })
	}
}

// fill lays out the messages of a batch in buf.
func (w *worker) fill(buf []byte) {
	n := w.cfg.wireLen()
	for k := 0; k < w.cfg.depth; k++ {
		w.message(buf[k*n : (k+1)*n])
	}
}

// message lays out one message in m (wireLen bytes): the rpc length
// prefix, if any, then the payload: connection id, sequence number (left
// zero), and a pattern that differs per connection and per byte.
func (w *worker) message(m []byte) {
	if w.cfg.proto == "rpc" {
		rpcframe.PutHeader(m, w.cfg.size)
		m = m[rpcframe.HeaderLen:]
	}
	binary.LittleEndian.PutUint64(m[0:8], w.id)
	for i := headerLen; i < len(m); i++ {
		m[i] = byte(w.id*131 + uint64(i)*7 + 1)
	}
}

// primeSeq is the sequence number of the message -prime sends, one the
// load's own messages never reach.
const primeSeq = ^uint64(0)

// errPrimeMismatch marks a first echo that came back other than sent.
var errPrimeMismatch = errors.New("the first echo differs from the message sent")

// prime sends one message and checks its echo, by deadline: with -prime,
// the server's setup of the connection (its accept, first buffers, a
// goroutine) is over before the warm-up starts, whatever the number of
// connections. Its deadline stays on the connection until the load sets
// its own.
func (w *worker) prime(deadline time.Time) error {
	wbuf := make([]byte, w.cfg.wireLen())
	w.message(wbuf)
	binary.LittleEndian.PutUint64(w.payload(wbuf, 0)[8:16], primeSeq)
	rbuf := make([]byte, len(wbuf))
	w.conn.SetDeadline(deadline)
	if _, err := w.conn.Write(wbuf); err != nil {
		return err
	}
	if _, err := io.ReadFull(w.conn, rbuf); err != nil {
		return err
	}
	if !bytes.Equal(wbuf, rbuf) {
		return fmt.Errorf("conn %d: %w", w.id, errPrimeMismatch)
	}
	return nil
}

// payload returns message k's payload in a batch buffer.
func (w *worker) payload(buf []byte, k int) []byte {
	n := w.cfg.wireLen()
	m := buf[k*n : (k+1)*n]
	if w.cfg.proto == "rpc" {
		return m[rpcframe.HeaderLen:]
	}
	return m
}

func (w *worker) loop(sh *shared) {
	depth := w.cfg.depth
	w.wbuf = make([]byte, depth*w.cfg.wireLen())
	wbuf := w.wbuf
	rbuf := make([]byte, len(wbuf))
	w.fill(wbuf)
	for seq, batch := uint64(0), uint64(1); sh.phase.Load() != phaseStop; seq, batch = seq+uint64(depth), batch+1 {
		for k := 0; k < depth; k++ {
			binary.LittleEndian.PutUint64(w.payload(wbuf, k)[8:16], seq+uint64(k))
		}
		var t0 time.Time
		if w.pacer != nil {
			w.slot.ready(w.pacer) // the pacer sends it at the connection's turn
		} else {
			t0 = time.Now()
			if _, err := w.conn.Write(wbuf); err != nil {
				w.fail(sh, err)
				return
			}
		}
		if _, err := io.ReadFull(w.conn, rbuf); err != nil {
			if w.pacer != nil {
				if serr := w.slot.sendErr(); serr != nil {
					err = serr
				}
			}
			w.fail(sh, err)
			return
		}
		var lat time.Duration
		if w.pacer != nil {
			took, ok := w.slot.answered(w.pacer, batch, false)
			if !ok {
				w.fail(sh, fmt.Errorf("conn %d: a reply to batch %d, which the pacer did not send", w.id, batch))
				return
			}
			lat = took
		} else {
			lat = time.Since(t0)
		}
		// A pipelined message's latency is its batch's round trip.
		if !bytes.Equal(wbuf, rbuf) {
			w.verifyErrs++
			if w.firstVerify == "" {
				w.firstVerify = w.describeMismatch(seq, wbuf, rbuf)
			}
		}
		if sh.phase.Load() == phaseMeasure {
			w.requests += uint64(depth)
			w.hist.RecordN(lat, uint64(depth))
			sh.completed(uint64(depth))
		}
	}
}

// fail records err unless the run is over (then the error is the deadline
// or close that ended it) or the run's own deadline ended the tail.
func (w *worker) fail(sh *shared, err error) {
	switch sh.phase.Load() {
	case phaseStop:
	case phaseTail:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			w.err = err
		}
	default:
		w.err = err
	}
}

// describeMismatch says what is wrong with the first message of a batch
// that differs from what was sent.
func (w *worker) describeMismatch(seq uint64, want, got []byte) string {
	n := w.cfg.wireLen()
	for k := 0; k < w.cfg.depth; k++ {
		wm, gm := want[k*n:(k+1)*n], got[k*n:(k+1)*n]
		if bytes.Equal(wm, gm) {
			continue
		}
		s := seq + uint64(k)
		if w.cfg.proto == "rpc" && !bytes.Equal(wm[:rpcframe.HeaderLen], gm[:rpcframe.HeaderLen]) {
			return fmt.Sprintf("conn %d seq %d: reply frame announces %d bytes, sent %d",
				w.id, s, binary.BigEndian.Uint32(gm), w.cfg.size)
		}
		wp, gp := w.payload(want, k), w.payload(got, k)
		gid := binary.LittleEndian.Uint64(gp[0:8])
		gseq := binary.LittleEndian.Uint64(gp[8:16])
		if gid != w.id || gseq != s {
			return fmt.Sprintf("conn %d seq %d: header says conn %d seq %d (misrouted or reordered)", w.id, s, gid, gseq)
		}
		for i := range wp {
			if wp[i] != gp[i] {
				return fmt.Sprintf("conn %d seq %d: byte %d is %#02x, sent %#02x", w.id, s, i, gp[i], wp[i])
			}
		}
	}
	return fmt.Sprintf("conn %d seq %d: mismatch", w.id, seq)
}
