package ringpoll

import (
	"fmt"

	"github.com/ringpoll/ringpoll/internal/loopstats"
	"github.com/ringpoll/ringpoll/internal/poll"
)

// Stats is a snapshot of the counters a user acts on, summed over the
// event loops of an engine since it started. A listener's engine may also
// serve other listeners and dialed connections made with the same engine
// options; their traffic counts here too. Every field is safe to compare
// between two snapshots: all but BuffersOut only grow.
type Stats struct {
	// Engine is the engine that runs: with EngineAuto, EngineEpoll where
	// io_uring is missing or forbidden (the fallback). Loops is the number
	// of its event loops.
	Engine Engine
	Loops  int
	// BytesIn and BytesOut count the bytes the loops received and sent.
	// On epoll, uring-hybrid and uring-reactor a writer that finds its
	// socket ready sends itself, and those bytes are not in BytesOut.
	BytesIn, BytesOut uint64
	// DrainsExpired counts connections closed with output queued that did
	// not reach the peer within the drain timeout (WithDrainTimeout): the
	// rest was dropped and the connection reset, so the peer sees
	// ECONNRESET rather than a short stream. A peer that stops reading
	// causes it.
	DrainsExpired uint64
	// HandlerPanics counts the handler calls of a Server that panicked:
	// each was recovered, logged with its stack through WithLogger, and
	// closed its connection. Zero from a Listener.
	HandlerPanics uint64
	// BuffersOut is the number of the io_uring engines' provided receive
	// buffers holding input that readers have not released: 0 when every
	// connection has released its input or closed.
	BuffersOut int64
	// BufferShortages counts receives that found every provided buffer
	// in use (ENOBUFS); the data waited in the socket. Raise
	// WithBufferRing's count, or release input sooner.
	BufferShortages uint64
	// BuffersCopied counts receives copied out of their provided buffer
	// because their connection already held its share of the ring with
	// input it had not released: that reader pays a copy, the others are
	// not stalled. BuffersRetired counts buffers taken out of the ring for
	// good because their connection closed while a reader still held
	// slices of them (Release before Close avoids it).
	BuffersCopied, BuffersRetired uint64
	// ZeroCopyBytes counts the bytes ReadFrom, io.Copy and SendFile moved
	// into connections with sendfile(2) or splice(2); CopiedBytes those
	// they copied through user space instead (no zero-copy path, or a
	// handler inline on the loop, which may not wait for a full socket).
	ZeroCopyBytes, CopiedBytes uint64
}

// String formats the counters on one line, for logs.
func (s Stats) String() string {
	return fmt.Sprintf("engine=%s loops=%d bytes_in=%d bytes_out=%d drains_expired=%d handler_panics=%d buffers_out=%d buffer_shortages=%d buffers_copied=%d buffers_retired=%d zero_copy_bytes=%d copied_bytes=%d",
		s.Engine, s.Loops, s.BytesIn, s.BytesOut, s.DrainsExpired, s.HandlerPanics, s.BuffersOut, s.BufferShortages, s.BuffersCopied, s.BuffersRetired, s.ZeroCopyBytes, s.CopiedBytes)
}

// Stats returns the counters of the engine serving the listener. They
// stay readable after the listener and its connections are closed.
func (l *Listener) Stats() Stats { return l.eng.stats() }

// Stats returns the Server's counters: its handler panics, and the
// counters of the engines of every listener it has served. Safe for
// concurrent use.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	engs := make([]*engineRef, 0, len(s.engines))
	for e := range s.engines {
		engs = append(engs, e)
	}
	s.mu.Unlock()
	var st Stats
	for i, e := range engs {
		es := e.stats()
		if i == 0 {
			st.Engine = es.Engine
		} else if es.Engine != st.Engine {
			st.Engine = EngineAuto // several engines
		}
		st.add(es)
	}
	st.HandlerPanics = s.panics.Load()
	return st
}

// add adds o's counters to s.
func (s *Stats) add(o Stats) {
	s.Loops += o.Loops
	s.BytesIn += o.BytesIn
	s.BytesOut += o.BytesOut
	s.DrainsExpired += o.DrainsExpired
	s.HandlerPanics += o.HandlerPanics
	s.BuffersOut += o.BuffersOut
	s.BufferShortages += o.BufferShortages
	s.BuffersCopied += o.BuffersCopied
	s.BuffersRetired += o.BuffersRetired
	s.ZeroCopyBytes += o.ZeroCopyBytes
	s.CopiedBytes += o.CopiedBytes
}

func (r *engineRef) stats() Stats {
	s := Stats{Engine: r.key.engine}
	for _, p := range r.eng.Stats() {
		s.Loops++
		s.BytesIn += p.BytesIn.Load()
		s.BytesOut += p.BytesOut.Load()
		s.DrainsExpired += p.DrainsExpired.Load()
		s.BuffersOut += p.BuffersOut.Load()
		s.BufferShortages += p.ENOBUFS.Load()
		s.BuffersCopied += p.BuffersCopied.Load()
		s.BuffersRetired += p.BuffersRetired.Load()
		s.ZeroCopyBytes += p.SendfileBytes.Load() + p.SpliceBytes.Load()
		s.CopiedBytes += p.SendCopied.Load() + p.ReadFromCopied.Load()
	}
	return s
}

func init() { loopstats.Of = loopStatsOf }

// loopStatsOf is loopstats.Of: the inner counters of each loop of the
// engine serving x.
func loopStatsOf(x any) []loopstats.LoopStats {
	var engs []*engineRef
	switch v := x.(type) {
	case *Listener:
		engs = []*engineRef{v.eng}
	case *Conn:
		engs = []*engineRef{v.eng}
	case *Server:
		v.mu.Lock()
		for e := range v.engines {
			engs = append(engs, e)
		}
		v.mu.Unlock()
	}
	var out []loopstats.LoopStats
	for _, r := range engs {
		for i, p := range r.eng.Stats() {
			out = append(out, snapshot(r.key.engine, i, p))
		}
	}
	return out
}

func snapshot(e Engine, i int, p *poll.Stats) loopstats.LoopStats {
	return loopstats.LoopStats{
		Engine:         e.String(),
		Loop:           i,
		EnterSubmit:    p.EnterSubmit.Load(),
		EnterWait:      p.EnterWait.Load(),
		EnterGetEvents: p.EnterGetEvents.Load(),
		EnterWakeSQ:    p.EnterWakeSQ.Load(),
		Parks:          p.Parks.Load(),
		SendsNow:       p.SendsNow.Load(),
		Naps:           p.Naps.Load(),
		BusyPolls:      p.BusyPolls.Load(),
		BusyPollHits:   p.BusyPollHits.Load(),
		ThreadMoves:    p.ThreadMoves.Load(),
		EpollWaits:     p.PollWaits.Load(),
		SQEs:           p.SQEs.Load(),
		CQEs:           p.CQEs.Load(),
		Wakeups:        p.Wakeups.Load(),
		ENOBUFS:        p.ENOBUFS.Load(),
		CQOverflows:    p.CQOverflows.Load(),
		Rearms:         p.Rearms.Load(),
		InputCancels:   p.InputCancels.Load(),
		InputMoves:     p.InputMoves.Load(),
		CancelRetries:  p.CancelRetries.Load(),
		Accepts:        p.Accepts.Load(),
		DrainsExpired:  p.DrainsExpired.Load(),
		BytesIn:        p.BytesIn.Load(),
		BytesOut:       p.BytesOut.Load(),
		BuffersOut:     p.BuffersOut.Load(),
		BuffersRetired: p.BuffersRetired.Load(),
		BuffersShared:  p.BuffersShared.Load(),
		BuffersCopied:  p.BuffersCopied.Load(),
		Sendfiles:      p.Sendfiles.Load(),
		SendfileBytes:  p.SendfileBytes.Load(),
		Splices:        p.Splices.Load(),
		SpliceBytes:    p.SpliceBytes.Load(),
		SendStalls:     p.SendStalls.Load(),
		SendCopied:     p.SendCopied.Load(),
		ReadFromCopied: p.ReadFromCopied.Load(),
	}
}
