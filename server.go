package ringpoll

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringpoll/ringpoll/internal/gopool"
	"github.com/ringpoll/ringpoll/internal/poll"
)

// Handler serves a connection's input, netpoll style: a Server calls it on a
// pooled goroutine (or, with WithInlineHandler, on the event loop) whenever
// the connection has unread input, never twice at once for one
// connection. It reads through c.Reader() and writes through c.Writer()
// (or Read and Write). Input the handler consumed is released when it
// returns. It is called again while input remains and it keeps consuming;
// once it leaves input unconsumed, it is next called when more arrives.
// When the peer has closed and the input is used up, the Server closes the
// connection. Returning an error closes the connection.
//
// ctx is the Server's: Shutdown cancels it as it starts, with the cause
// ErrServerClosed (context.Cause). From then on the handler is called only
// for input that arrived before (see Server.Shutdown), and a read that
// needs more input than has arrived fails with an error matching
// ErrServerClosed instead of waiting; a read waiting then is woken with
// it. So a peer that stalls in the middle of a request holds up neither
// the handler nor Shutdown (TestShutdownHalfLine).
//
// A panic in the handler ends its connection, not the process: the Server
// recovers it, as net/http does, logs it at Error level with its value and
// stack through its logger (WithLogger), counts it
// (Stats.HandlerPanics) and closes the connection; other connections
// are served on, and an inline handler's loop runs on (TestHandlerPanic).
type Handler func(ctx context.Context, c *Conn) error

// Server runs a Handler for the connections of ringpoll listeners. Its
// methods are safe for concurrent use.
type Server struct {
	handler Handler
	opts    []Option
	cfg     *config
	pool    *gopool.Pool
	panics  atomic.Uint64 // handler calls that panicked (Stats)
	ctx     context.Context
	cancel  context.CancelCauseFunc

	mu        sync.Mutex
	listeners map[*Listener]struct{}
	engines   map[*engineRef]struct{} // of every listener served, for Stats
	conns     connSet
	settingUp int  // connections admitted and not yet adopted
	closed    bool // Shutdown began
	forced    bool // Shutdown's context ended: it closed what it had
}

// NewServer returns a Server that runs h. The options set the limits of the
// connections it serves, over those of the listener. The engine options
// (WithEngine, WithLoops, WithBufferRing...), which the listener's engine
// was made with, are requirements: Serve refuses a listener whose engine
// was made otherwise.
func NewServer(h Handler, opts ...Option) (*Server, error) {
	if h == nil {
		return nil, errNilHandler
	}
	cfg, err := configFor(inNewServer, opts)
	if err != nil {
		return nil, err
	}
	if cfg.engineSet {
		if _, err := cfg.engine.resolve(cfg.logger); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Server{
		handler:   h,
		opts:      opts,
		cfg:       cfg,
		pool:      gopool.New(time.Second),
		ctx:       ctx,
		cancel:    cancel,
		listeners: map[*Listener]struct{}{},
		engines:   map[*engineRef]struct{}{},
	}, nil
}

// Serve accepts connections on ln and runs the handler for them until ln
// fails or the Server shuts down, when it returns ErrServerClosed. ln must
// come from Listen, on the Server's engine and with the engine options the
// Server was given (WithLoops, WithBufferRing...); Serve fails at once,
// naming the difference, for any other.
func (s *Server) Serve(ln net.Listener) error {
	l, ok := ln.(*Listener)
	if !ok {
		return fmt.Errorf("%w: Serve needs a listener from ringpoll.Listen, not %T", errListenerMismatch, ln)
	}
	if s.cfg.engineSet {
		want, _ := s.cfg.engine.resolve(s.cfg.logger)
		if got := l.eng.key.engine; want != got {
			return fmt.Errorf("%w: the Server wants engine %s but the listener runs %s", errListenerMismatch, want, got)
		}
	}
	if name := engineMismatch(s.cfg, l.cfg); name != "" {
		return fmt.Errorf("%w: the Server's %s differs from the listener's", errListenerMismatch, name)
	}
	if !s.track(l) {
		return ErrServerClosed
	}
	defer s.untrack(l)
	cfg := s.connConfig(l.cfg)
	var backoff time.Duration
	for {
		_, err := l.accept(s, cfg)
		if err == nil {
			backoff = 0
			continue
		}
		if s.isClosed() {
			return ErrServerClosed
		}
		if !temporary(err) {
			return err
		}
		// Out of descriptors or memory: wait for connections to close, as
		// net/http does, instead of spinning.
		backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
		s.cfg.logger.Warn("ringpoll: accept failed; retrying", "err", err, "delay", backoff)
		time.Sleep(backoff)
	}
}

// connConfig is the listener's configuration with the Server's options over
// it.
func (s *Server) connConfig(base *config) *config {
	c := *base
	c.apply(s.opts)
	c.seal()
	return &c
}

func (s *Server) track(l *Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.listeners[l] = struct{}{}
	s.engines[l.eng] = struct{}{}
	return true
}

func (s *Server) untrack(l *Listener) {
	s.mu.Lock()
	delete(s.listeners, l)
	s.mu.Unlock()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// adopt records a new connection, unless Shutdown began.
// admit lets a new connection be set up for s, unless s is shut down.
// Shutdown waits for every admitted connection: its handler may run as
// soon as it is registered, before adopt.
func (s *Server) admit() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.settingUp++
	return true
}

// adopt ends an admitted connection's setup: with c registered, s tracks
// it; with c nil (setup failed), s forgets the admission. It reports false
// if a Shutdown gave up waiting meanwhile: the caller must close c.
func (s *Server) adopt(c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settingUp--
	if c == nil || s.forced {
		return false
	}
	s.conns.add(c)
	return true
}

func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	s.conns.remove(c)
	s.mu.Unlock()
}

// lingerTimeout bounds how long Shutdown waits, after a connection's last
// reply reached the peer, for the peer to close before closing the
// connection itself (as net/http waits before closing a connection it shut
// down for writing).
const lingerTimeout = 500 * time.Millisecond

// Shutdown stops the Server gracefully. It closes the listeners, cancels
// the handlers' context (with the cause ErrServerClosed) and makes their
// reads fail rather than wait for input (see Handler). The input each
// connection had received by then is still handed to the handler, whether
// it was waiting to be read or just arriving on the event loop; the rest of
// a request the handler saw the start of and left for more is not waited
// for, and input received after is dropped. Once a connection's handler is
// done with that input and its output is sent, Shutdown shuts down the
// writing side (the peer reads every reply, then EOF) and closes the
// connection once the peer closes, or half a second after the peer
// acknowledged the last reply or reset the connection. So every request
// that had arrived whole gets its whole reply
// (TestShutdownServesArrivedInput), and a peer that stalls in the middle of
// one holds nothing up (TestShutdownHalfLine). Nor does a peer that does
// not read its replies: a connection still waiting on its peer (output it
// does not take, replies it does not acknowledge) a drain timeout after
// Shutdown began on it (WithDrainTimeout, at least half a second) is reset,
// its remaining output dropped, so that the peer knows it did not get it
// all (TestShutdownPeerNeverReads). Shutdown returns when all connections
// are closed; if ctx ends first, it closes the rest at once and returns
// ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	for l := range s.listeners {
		l.Close()
	}
	s.mu.Unlock()
	s.cancel(ErrServerClosed)
	defer s.pool.Close()

	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.drain() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			s.mu.Lock()
			s.forced = true
			s.mu.Unlock()
			s.closeAll()
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// drain moves each connection along its graceful close and returns how
// many were open. Closing a connection at once would lose replies: with
// input unread in the socket, close(2) resets the connection, and the
// kernel drops the replies it has not delivered yet.
func (s *Server) drain() int {
	s.mu.Lock()
	conns := s.conns.appendTo(make([]*Conn, 0, s.conns.len()))
	settingUp := s.settingUp
	s.mu.Unlock()
	now := time.Now().UnixNano()
	for _, c := range conns {
		c.drainStep(now)
		poll.Hook(poll.HookShutdownLooked, c.fd)
	}
	return len(conns) + settingUp
}

func (s *Server) closeAll() {
	s.closeIf(func(*Conn) bool { return true })
}

// closeIf closes the connections for which pick holds (outside the lock:
// Close calls back into forget) and returns how many were open.
func (s *Server) closeIf(pick func(*Conn) bool) int {
	s.mu.Lock()
	picked := s.conns.appendTo(nil)
	n := len(picked)
	picked = slices.DeleteFunc(picked, func(c *Conn) bool { return !pick(c) })
	s.mu.Unlock()
	for _, c := range picked {
		c.Close()
	}
	return n
}

// temporary reports whether an accept error may pass (EMFILE, ENFILE,
// ENOBUFS, ENOMEM).
func temporary(err error) bool {
	var te interface{ Temporary() bool }
	return errors.As(err, &te) && te.Temporary()
}
