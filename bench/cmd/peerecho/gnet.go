package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/panjf2000/gnet/v2"
	bspool "github.com/panjf2000/gnet/v2/pkg/pool/byteslice"
	"github.com/panjf2000/gnet/v2/pkg/pool/goroutine"
)

// gnetServer serves echo or rpc with github.com/panjf2000/gnet/v2. It is the
// gnet.EventHandler of one gnet.Run, which runs in its own goroutine.
//
// echo runs entirely on the event loop, as in gnet's echo example. rpc cuts
// frames on the event loop and hands the replies to an ants goroutine pool
// (gnet's pkg/pool/goroutine); see rpcConn for how reply order is kept.
type gnetServer struct {
	gnet.BuiltinEventEngine

	proto    string
	pool     *goroutine.Pool // rpc only: where replies are built and sent
	stopping atomic.Bool     // Stop has begun: rpc takes no new requests

	booted  chan struct{} // closed by OnBoot; eng, addr and bootErr are set
	eng     gnet.Engine
	addr    net.Addr
	bootErr error

	done chan struct{} // closed when gnet.Run returns
	err  error         // Run's result; written before done is closed

	stopOnce sync.Once
	stopErr  error
}

// startGnet starts gnet.Run on cfg.addr in multicore mode with TCP_NODELAY
// and returns once the engine has booted, which is after gnet has bound and
// is listening on the socket.
func startGnet(cfg config) (*gnetServer, error) {
	s := &gnetServer{
		proto:  cfg.proto,
		booted: make(chan struct{}),
		done:   make(chan struct{}),
	}
	if cfg.proto == protoRPC {
		// Created here rather than in the Run goroutine: Default reads gnet's
		// global logger, which Run replaces.
		s.pool = goroutine.Default()
	}
	opts := []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithLogger(gnetLogger{}),
	}
	if cfg.loops > 0 {
		opts = append(opts, gnet.WithNumEventLoop(cfg.loops))
	}
	go func() {
		s.err = gnet.Run(s, "tcp://"+cfg.addr, opts...)
		close(s.done)
	}()
	select {
	case <-s.booted:
		if s.bootErr == nil {
			return s, nil
		}
		<-s.done
		s.releasePool()
		return nil, s.bootErr
	case <-s.done:
		s.releasePool()
		if s.err == nil {
			s.err = errors.New("gnet.Run returned before booting")
		}
		return nil, s.err
	}
}

// Addr implements server.
func (s *gnetServer) Addr() net.Addr { return s.addr }

// Done implements server.
func (s *gnetServer) Done() <-chan struct{} { return s.done }

// Err implements server.
func (s *gnetServer) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// OnBoot keeps the engine for Stop and learns the bound address, which gnet
// does not expose, from a duplicate of the listening socket.
func (s *gnetServer) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	s.addr, s.bootErr = boundAddr(eng)
	close(s.booted)
	if s.bootErr != nil {
		return gnet.Shutdown
	}
	return gnet.None
}

// boundAddr returns the local address of eng's only listener.
func boundAddr(eng gnet.Engine) (net.Addr, error) {
	fd, err := eng.Dup()
	if err != nil {
		return nil, fmt.Errorf("dup gnet listener: %w", err)
	}
	defer syscall.Close(fd)
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return nil, os.NewSyscallError("getsockname", err)
	}
	switch sa := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(sa.Addr[:]).To16(), Port: sa.Port}, nil
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(sa.Addr[:]), Port: sa.Port}, nil
	default:
		return nil, fmt.Errorf("gnet listener has unexpected address type %T", sa)
	}
}

// OnOpen gives each rpc connection its state.
func (s *gnetServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if s.proto == protoRPC {
		c.SetContext(new(rpcConn))
	}
	return nil, gnet.None
}

// OnClose tells an rpc connection's pending work that the connection is gone.
func (s *gnetServer) OnClose(c gnet.Conn, _ error) gnet.Action {
	if st, ok := c.Context().(*rpcConn); ok {
		st.mu.Lock()
		st.closed = true
		st.mu.Unlock()
	}
	return gnet.None
}

// OnTraffic runs on the connection's event loop whenever bytes arrive.
func (s *gnetServer) OnTraffic(c gnet.Conn) gnet.Action {
	if s.proto == protoRPC {
		return s.rpcTraffic(c)
	}
	// Raw echo, as in gnet's echo example: everything buffered goes straight
	// back; Write sends what the socket takes and keeps (copies) the rest.
	buf, _ := c.Next(-1)
	_, _ = c.Write(buf)
	return gnet.None
}

// rpcConn is the state of one rpc connection, shared by its event loop and
// the pool task that answers it.
//
// Reply order: OnTraffic calls for a connection run one after another on its
// event loop, and each appends the requests it cut, in arrival order, to
// queue. At most one drain task per connection exists at a time (running is
// set, under mu, by whoever submits it and cleared, under mu, by the task
// when it finds queue empty), and that task takes requests from the front
// of queue and answers them with AsyncWrite calls made one after another
// from that one goroutine. A later task is submitted only after the earlier
// one cleared running, so its AsyncWrites happen after all of the earlier
// task's. AsyncWrite puts a write task on the event loop's task queue, a
// FIFO queue the loop runs in order, and the loop writes to the socket or
// appends to the connection's outbound buffer in that order. Nothing else
// writes to an rpc connection, so replies leave in request order.
type rpcConn struct {
	mu      sync.Mutex
	queue   [][]byte // request payloads (pool buffers) not yet answered, oldest first
	running bool     // a drain task for this connection is submitted or running
	closed  bool     // the connection is closed: drop the work
}

// rpcTraffic cuts every complete frame out of the connection's inbound
// buffer, copying each payload out (the buffer is reused once OnTraffic
// returns), queues the copies and makes sure a drain task will answer them.
// A partial frame stays in gnet's inbound buffer until more bytes come.
func (s *gnetServer) rpcTraffic(c gnet.Conn) gnet.Action {
	if s.stopping.Load() {
		return gnet.Close
	}
	st := c.Context().(*rpcConn)
	var reqs [][]byte
	for c.InboundBuffered() >= frameHeaderLen {
		hdr, err := c.Peek(frameHeaderLen)
		if err != nil {
			return gnet.Close
		}
		n, err := payloadLen(hdr)
		if err != nil {
			// Requests cut above are dropped with the connection.
			recycle(reqs)
			return gnet.Close
		}
		if c.InboundBuffered() < frameHeaderLen+n {
			break
		}
		_, _ = c.Discard(frameHeaderLen)
		var req []byte // nil for an empty payload
		if n > 0 {
			payload, err := c.Peek(n)
			if err != nil {
				recycle(reqs)
				return gnet.Close
			}
			req = bspool.Get(n)
			copy(req, payload)
			// n > 0 here: Discard(0) would empty the whole buffer.
			_, _ = c.Discard(n)
		}
		reqs = append(reqs, req)
	}
	if len(reqs) == 0 {
		return gnet.None
	}

	st.mu.Lock()
	st.queue = append(st.queue, reqs...)
	submit := !st.running
	st.running = true
	st.mu.Unlock()
	if submit {
		if err := s.pool.Submit(func() { s.drain(c, st) }); err != nil {
			// The pool is closed (Stop) or full: this connection cannot be
			// served any more.
			st.mu.Lock()
			st.running = false
			recycle(st.queue)
			st.queue = nil
			st.mu.Unlock()
			return gnet.Close
		}
	}
	return gnet.None
}

// drain is a connection's pool task: it answers queued requests, oldest
// first, until the queue is empty. Each round takes the whole queue, builds
// one buffer holding a reply frame per request, and hands it to AsyncWrite;
// the buffer goes back to the pool when the event loop has written or
// copied it.
func (s *gnetServer) drain(c gnet.Conn, st *rpcConn) {
	for {
		st.mu.Lock()
		reqs := st.queue
		st.queue = nil
		if len(reqs) == 0 || st.closed {
			st.running = false
			st.mu.Unlock()
			recycle(reqs)
			return
		}
		st.mu.Unlock()

		reply := buildReplies(reqs)
		err := c.AsyncWrite(reply, func(gnet.Conn, error) error {
			bspool.Put(reply)
			return nil
		})
		if err != nil {
			// The event loop could not take the write; nothing more can be
			// sent on this connection.
			st.mu.Lock()
			st.closed = true
			st.mu.Unlock()
		}
	}
}

// buildReplies is the rpc handler for a batch: a new buffer with, for each
// request in order, a frame of the same length carrying a copy of its
// payload. The requests' buffers go back to the pool.
func buildReplies(reqs [][]byte) []byte {
	total := 0
	for _, req := range reqs {
		total += frameHeaderLen + len(req)
	}
	out := bspool.Get(total)
	off := 0
	for _, req := range reqs {
		off += putFrame(out[off:], req)
	}
	recycle(reqs)
	return out
}

// recycle puts request buffers back into gnet's byte-slice pool.
func recycle(bufs [][]byte) {
	for _, b := range bufs {
		if b != nil {
			bspool.Put(b)
		}
	}
}

// Stop implements server. For rpc it first stops taking requests and gives
// the pool half of ctx's time to finish the drains in flight, while the
// event loops can still run their writes (a write handed over after the
// loops have closed would be lost). Then it stops the engine, which closes
// every connection, and waits for gnet.Run to return.
func (s *gnetServer) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

// stop does Stop's work once.
func (s *gnetServer) stop(ctx context.Context) error {
	s.stopping.Store(true)
	if s.pool != nil {
		_ = s.pool.ReleaseTimeout(graceDuration(ctx))
	}
	// Engine.Stop triggers the shutdown at once but then only polls for its
	// end every 500 ms; wait for Run to return instead and cancel the poll.
	pollCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- s.eng.Stop(pollCtx) }()
	var err error
	select {
	case <-s.done:
	case <-ctx.Done():
		err = fmt.Errorf("gnet engine still stopping: %w", ctx.Err())
	}
	cancel()
	<-stopped
	return err
}

// releasePool frees the rpc goroutine pool, if any, when start fails.
func (s *gnetServer) releasePool() {
	if s.pool != nil {
		s.pool.Release()
	}
}

// gnetLogger is the logger given to gnet: it drops gnet's debug and info
// messages (gnet announces every start at info level, and peerecho must
// print a single line) and prints warnings and errors to stderr.
type gnetLogger struct{}

// Debugf drops the message.
func (gnetLogger) Debugf(string, ...any) {}

// Infof drops the message.
func (gnetLogger) Infof(string, ...any) {}

// Warnf prints the message to stderr.
func (gnetLogger) Warnf(format string, args ...any) { gnetLog("warning", format, args) }

// Errorf prints the message to stderr.
func (gnetLogger) Errorf(format string, args ...any) { gnetLog("error", format, args) }

// Fatalf prints the message to stderr. Unlike gnet's default logger it does
// not exit: gnet returns an error after a fatal condition anyway.
func (gnetLogger) Fatalf(format string, args ...any) { gnetLog("fatal", format, args) }

// gnetLog prints one gnet log message to stderr.
func gnetLog(level, format string, args []any) {
	fmt.Fprintf(os.Stderr, "peerecho: gnet %s: %s\n", level, fmt.Sprintf(format, args...))
}
