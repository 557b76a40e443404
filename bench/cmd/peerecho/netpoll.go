package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/netpoll"
)

// netpollServer serves echo or rpc with github.com/cloudwego/netpoll.
//
// netpoll runs OnRequest on a goroutine of its own pool (gopool), never on a
// poller, and at most one OnRequest at a time per connection, so both
// handlers do their work right there. netpoll turns TCP_NODELAY on for every
// TCP connection it initialises (connection.init), so nothing is set here.
//
// netpoll's pollers are global to the process and are never stopped; Stop
// ends this server's listener, connections and handlers, not the pollers.
type netpollServer struct {
	ln   netpoll.Listener
	evl  netpoll.EventLoop
	done chan struct{} // closed when EventLoop.Serve returns
	err  error         // Serve's result; written before done is closed

	active atomic.Int64 // handler calls in progress

	mu    sync.Mutex
	conns map[netpoll.Connection]struct{} // open connections, for Stop

	stopOnce sync.Once
	stopErr  error
}

// startNetpoll listens on cfg.addr and serves cfg.proto with netpoll. With
// cfg.loops > 0 it first sets the process-wide poller count.
func startNetpoll(cfg config) (*netpollServer, error) {
	if cfg.loops > 0 {
		// Deprecated in favour of netpoll.Configure, which must run in an
		// init function; SetNumLoops works as long as no connection exists.
		//lint:ignore SA1019 Configure must run in an init function; this runs before any connection exists.
		if err := netpoll.SetNumLoops(cfg.loops); err != nil {
			return nil, fmt.Errorf("netpoll.SetNumLoops(%d): %w", cfg.loops, err)
		}
	}
	ln, err := netpoll.CreateListener("tcp", cfg.addr)
	if err != nil {
		return nil, err
	}
	s := &netpollServer{
		ln:    ln,
		done:  make(chan struct{}),
		conns: make(map[netpoll.Connection]struct{}),
	}
	handler := s.echo
	if cfg.proto == protoRPC {
		handler = s.rpc
	}
	evl, err := netpoll.NewEventLoop(s.counted(handler), netpoll.WithOnPrepare(s.track))
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	s.evl = evl
	go func() {
		s.err = evl.Serve(ln)
		close(s.done)
	}()
	return s, nil
}

// Addr implements server.
func (s *netpollServer) Addr() net.Addr { return s.ln.Addr() }

// Done implements server.
func (s *netpollServer) Done() <-chan struct{} { return s.done }

// Err implements server.
func (s *netpollServer) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// counted wraps a handler so that Stop can wait for running calls to return.
func (s *netpollServer) counted(h netpoll.OnRequest) netpoll.OnRequest {
	return func(ctx context.Context, conn netpoll.Connection) error {
		s.active.Add(1)
		defer s.active.Add(-1)
		return h(ctx, conn)
	}
}

// track is the OnPrepare hook: it records each accepted connection until it
// closes, so that Stop can close the ones netpoll's graceful shutdown leaves
// open.
func (s *netpollServer) track(conn netpoll.Connection) context.Context {
	s.mu.Lock()
	s.conns[conn] = struct{}{}
	s.mu.Unlock()
	_ = conn.AddCloseCallback(func(c netpoll.Connection) error {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		return nil
	})
	return context.Background()
}

// echo is the raw echo handler, shaped like netpoll's echo example: take
// every buffered byte, queue it for writing (WriteBinary may reference the
// input buffer without copying), flush, and only then release the input.
func (s *netpollServer) echo(_ context.Context, conn netpoll.Connection) error {
	r, w := conn.Reader(), conn.Writer()
	defer r.Release()
	msg, err := r.Next(r.Len())
	if err != nil {
		return err
	}
	if _, err := w.WriteBinary(msg); err != nil {
		return err
	}
	return w.Flush()
}

// rpc is the rpc handler. It answers the frames in the input buffer,
// building each reply in memory from the writer (Malloc) rather than the
// request's, and flushes the replies as one batch.
//
// netpoll calls OnRequest again and again, without waiting for new input,
// for as long as input is buffered (connection.onProcess), so a handler
// that returned with half a frame left would spin. Each call therefore
// answers at least one frame, reading the rest of a partial frame with
// Reader.Next, which blocks until it arrives or the connection closes, as
// netpoll-benchmark's server does. Before it may block it flushes the
// replies already built, so a peer that waits for them is never stuck.
//
// A call returns once the input is empty or rpcBatchBytes of replies are
// pending: a peer that never stops sending must still get its replies, and
// netpoll's loop only notices a Close between calls (Next does not fail on
// a closed connection while input is buffered).
//
// A frame announcing more than maxFramePayload bytes closes the connection;
// replies built but not yet flushed are dropped with it.
func (s *netpollServer) rpc(_ context.Context, conn netpoll.Connection) error {
	r, w := conn.Reader(), conn.Writer()
	pending := false // replies built and not flushed
	flushBefore := func(need int) error {
		if !pending || r.Len() >= need {
			return nil
		}
		pending = false
		return w.Flush()
	}
	for r.Len() > 0 && conn.IsActive() && w.MallocLen() < rpcBatchBytes {
		if err := flushBefore(frameHeaderLen); err != nil {
			return err
		}
		hdr, err := r.Next(frameHeaderLen)
		if err != nil {
			return err
		}
		n, err := payloadLen(hdr)
		if err != nil {
			_ = conn.Close()
			return err
		}
		var payload []byte
		if n > 0 {
			if err := flushBefore(n); err != nil {
				return err
			}
			if payload, err = r.Next(n); err != nil {
				return err
			}
		}
		reply, err := w.Malloc(frameHeaderLen + n)
		if err != nil {
			return err
		}
		putFrame(reply, payload)
		pending = true
		// The request is copied out; give its input buffer back now rather
		// than after a long pipelined batch.
		if err := r.Release(); err != nil {
			return err
		}
	}
	if pending {
		return w.Flush()
	}
	return nil
}

// rpcBatchBytes is how many bytes of replies the netpoll rpc handler builds
// before it flushes them and returns.
const rpcBatchBytes = 64 << 10

// Stop implements server. netpoll's own EventLoop.Shutdown closes the
// listener, closes idle connections and waits for busy ones (a handler
// running, or unread input, or unsent output); it gets half of ctx's time.
// Connections still open after that are closed here, which wakes handlers
// blocked on a partial frame, and Stop then waits for handlers to return.
func (s *netpollServer) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

// stop does Stop's work once.
func (s *netpollServer) stop(ctx context.Context) error {
	grace, cancel := graceContext(ctx)
	defer cancel()
	// Shutdown does nothing (and returns nil) if Serve has not yet
	// registered the listener, so keep asking until Serve has returned.
shutdown:
	for {
		_ = s.evl.Shutdown(grace)
		select {
		case <-s.done:
			break shutdown
		case <-grace.Done():
			// Serve never got going: close the listener ourselves.
			_ = s.ln.Close()
			break shutdown
		case <-time.After(time.Millisecond):
		}
	}

	s.mu.Lock()
	left := make([]netpoll.Connection, 0, len(s.conns))
	for c := range s.conns {
		left = append(left, c)
	}
	s.mu.Unlock()
	for _, c := range left {
		_ = c.Close()
	}

	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		open := len(s.conns)
		s.mu.Unlock()
		select {
		case <-s.done:
			if s.active.Load() == 0 && open == 0 {
				return nil
			}
		default:
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("netpoll server: %d handlers still running, %d connections open: %w",
				s.active.Load(), open, ctx.Err())
		case <-tick.C:
		}
	}
}
