//go:build linux

package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringpoll/ringpoll/internal/kvproto"
)

// The key-value load (-proto kv, internal/kvproto, served by cmd/ringkv):
// each connection sends one request at a time, a get of a random record,
// or with -kv-writes P a put of one P% of the time, and checks the reply
// (a get's record must be the record's bytes, a put's the PutOK byte).
// With -outstanding N at most N requests are in flight over all
// connections: a connection waits for a slot before it sends and frees it
// when the reply came, so 1,000 connections with 64 slots keep 64 reads in
// flight and 936 connections idle. Latency counts from the send, not the
// wait for a slot.

// loopKV is the worker's loop for -proto kv.
func (w *worker) loopKV(sh *shared) {
	rng := rand.New(rand.NewPCG(w.id, 0x6b76))
	records := uint64(w.cfg.kvRecords)
	var req, buf []byte
	// The connection's reads go through a buffer: a reply's header and
	// body then cost one read syscall, not two.
	br := bufio.NewReaderSize(w.conn, 8<<10)
	for seq := uint64(0); sh.phase.Load() != phaseStop; seq++ {
		i := rng.Uint64N(records)
		put := rng.IntN(100) < w.cfg.kvWrites
		if put {
			req = kvproto.AppendPut(req[:0], i)
		} else {
			req = kvproto.AppendGet(req[:0], i)
		}
		if sh.slots != nil {
			select {
			case sh.slots <- struct{}{}:
			case <-sh.stop:
				return
			}
		}
		t0 := time.Now()
		_, err := w.conn.Write(req)
		if err == nil {
			buf, err = kvproto.ReadReply(br, buf)
		}
		if sh.slots != nil {
			<-sh.slots
		}
		if err != nil {
			w.fail(sh, err)
			return
		}
		lat := time.Since(t0)
		if verr := checkKV(put, i, buf); verr != nil {
			w.verifyErrs++
			if w.firstVerify == "" {
				w.firstVerify = fmt.Sprintf("conn %d request %d: %v", w.id, seq, verr)
			}
		}
		if sh.phase.Load() == phaseMeasure {
			w.requests++
			w.hist.RecordN(lat, 1)
			sh.completed(1)
		}
	}
}

// checkKV checks the reply p to a get or a put of record i.
func checkKV(put bool, i uint64, p []byte) error {
	switch {
	case len(p) > 0 && p[0] == 'E' && len(p) != kvproto.RecordSize:
		return fmt.Errorf("server error: %s", p[1:])
	case put && (len(p) != 1 || p[0] != kvproto.PutOK):
		return fmt.Errorf("put of record %d: reply %q, want %q", i, p, kvproto.PutOK)
	case put:
		return nil
	}
	return kvproto.Check(i, p)
}

// threadWatch samples a process's thread count (/proc/PID/status
// Threads) every interval until stopped, keeping the largest.
type threadWatch struct {
	max  atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func watchThreads(pid int, interval time.Duration) *threadWatch {
	t := &threadWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			if n, err := procThreads(pid); err == nil && int64(n) > t.max.Load() {
				t.max.Store(int64(n))
			}
			select {
			case <-tick.C:
			case <-t.stop:
				return
			}
		}
	}()
	return t
}

// end stops the sampling and returns the largest count seen.
func (t *threadWatch) end() int {
	close(t.stop)
	<-t.done
	return int(t.max.Load())
}

// procThreads reads the Threads line of /proc/PID/status.
func procThreads(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no Threads line", pid)
}
