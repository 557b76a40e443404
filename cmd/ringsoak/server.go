//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/ringpoll/ringpoll"
)

// The server APIs.
const (
	apiHandler = "handler" // a Server running a Handler on the nocopy Reader/Writer
	apiConn    = "conn"    // Listener.Accept and a goroutine per net.Conn
)

// echoServer is the ringpoll echo server under test, in this process.
type echoServer struct {
	api string
	ln  *ringpoll.Listener
	// corrupt, if set, alters every echoed chunk (tests only).
	corrupt func([]byte)

	// The handler API.
	srv       *ringpoll.Server
	serveDone chan error

	// The conn API.
	acceptDone chan struct{}
	acceptErr  error // set before acceptDone closes
	wg         sync.WaitGroup
	mu         sync.Mutex
	conns      map[*ringpoll.Conn]*connState

	// seen records the handler API's connections, from their first
	// handler call (the Server does not tell of accepts), by weak pointer
	// so it keeps no closed connection alive.
	seen sync.Map // weak.Pointer[ringpoll.Conn] -> *connState

	accepted atomic.Int64 // connections accepted (conn API)
	echoed   atomic.Int64 // bytes echoed
	errMu    sync.Mutex
	errs     map[errKind]int64 // the server side's errors, for information
}

// serverOptions are the options of a run's listener: the engine and the
// limits under test. The buffer ring only for the engines that receive
// into one: the others refuse WithBufferRing.
func serverOptions(e ringpoll.Engine, cfg *config) []ringpoll.Option {
	opts := []ringpoll.Option{
		ringpoll.WithEngine(e),
		ringpoll.WithInputHighWater(cfg.inputHW),
		ringpoll.WithOutputHighWater(cfg.outputHW),
	}
	switch e {
	case ringpoll.EngineAuto, ringpoll.EngineUring, ringpoll.EngineUringHybrid, ringpoll.EngineUringSQPoll:
		opts = append(opts, ringpoll.WithBufferRing(cfg.ringCount, cfg.ringSize))
	}
	if cfg.loops > 0 {
		opts = append(opts, ringpoll.WithLoops(cfg.loops))
	}
	if cfg.idleTimeout > 0 {
		opts = append(opts, ringpoll.WithIdleTimeout(cfg.idleTimeout))
	}
	return opts
}

// startServer listens on 127.0.0.1:0 with engine e and serves echo through
// api.
func startServer(e ringpoll.Engine, api string, cfg *config) (*echoServer, error) {
	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0", serverOptions(e, cfg)...)
	if err != nil {
		return nil, err
	}
	s := &echoServer{api: api, ln: ln, corrupt: cfg.corrupt, errs: map[errKind]int64{}}
	switch api {
	case apiHandler:
		s.srv, err = ringpoll.NewServer(s.handle)
		if err != nil {
			ln.Close()
			return nil, err
		}
		s.serveDone = make(chan error, 1)
		go func() { s.serveDone <- s.srv.Serve(ln) }()
	case apiConn:
		s.conns = map[*ringpoll.Conn]*connState{}
		s.acceptDone = make(chan struct{})
		go s.acceptLoop()
	default:
		ln.Close()
		return nil, fmt.Errorf("unknown api %q", api)
	}
	return s, nil
}

// addr returns the address clients dial.
func (s *echoServer) addr() string { return s.ln.Addr().String() }

// countErr counts a server-side error by kind (information only: a peer's
// RST legitimately fails the server's writes).
func (s *echoServer) countErr(err error) {
	s.errMu.Lock()
	s.errs[classify(err)]++
	s.errMu.Unlock()
}

// errorCounts returns a copy of the server-side error counts.
func (s *echoServer) errorCounts() map[errKind]int64 {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	m := make(map[errKind]int64, len(s.errs))
	for k, v := range s.errs {
		m[k] = v
	}
	return m
}

// handle is the netpoll-style echo: the input goes back out without a copy
// (linked from 4 KiB) and is released once Flush has sent or copied it.
func (s *echoServer) handle(ctx context.Context, c *ringpoll.Conn) error {
	key := weak.Make(c)
	v, ok := s.seen.Load(key)
	if !ok {
		v, _ = s.seen.LoadOrStore(key, newConnState(c))
	}
	st := v.(*connState)
	r, w := c.Reader(), c.Writer()
	b, err := r.Next(r.Len())
	if err != nil {
		s.countErr(err)
		return err
	}
	st.in.Add(int64(len(b)))
	if s.corrupt != nil {
		b = append([]byte(nil), b...)
		s.corrupt(b)
	}
	if _, err := w.WriteBinary(b); err != nil {
		s.countErr(err)
		return err
	}
	if err := w.Flush(); err != nil {
		s.countErr(err)
		return err
	}
	st.out.Add(int64(len(b)))
	s.echoed.Add(int64(len(b)))
	return r.Release()
}

// connBufSizes are the Read buffer sizes of conn-API connections, taken in
// turn, so reads of many sizes meet the engine's input.
var connBufSizes = []int{512, 4 << 10, 32 << 10, 64 << 10}

// acceptLoop accepts connections for the conn API until the listener is
// closed.
func (s *echoServer) acceptLoop() {
	defer close(s.acceptDone)
	var backoff time.Duration
	for {
		c, err := s.ln.AcceptConn()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() && backoff < time.Second {
				backoff = max(5*time.Millisecond, 2*backoff)
				time.Sleep(backoff)
				continue
			}
			s.acceptErr = err
			return
		}
		backoff = 0
		n := s.accepted.Add(1)
		st := newConnState(c)
		s.mu.Lock()
		s.conns[c] = st
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(c, st, connBufSizes[int(n)%len(connBufSizes)])
	}
}

// connState is what the server knows of a connection (and, on the conn
// API, what its goroutine is doing), for the report of connections that
// outlive their clients.
type connState struct {
	remote  string
	fd      int // the socket's descriptor (-1 if unknown)
	start   time.Time
	writing atomic.Bool  // in Write, not Read
	in, out atomic.Int64 // bytes read and written
}

// newConnState starts the record of c.
func newConnState(c *ringpoll.Conn) *connState {
	st := &connState{remote: c.RemoteAddr().String(), fd: -1, start: time.Now()}
	if rc, err := c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { st.fd = int(fd) })
	}
	return st
}

// serveConn echoes with plain Read and Write until the peer is done or an
// error, then closes (queued output is still sent).
func (s *echoServer) serveConn(c *ringpoll.Conn, st *connState, size int) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	buf := make([]byte, size)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			st.in.Add(int64(n))
			if s.corrupt != nil {
				s.corrupt(buf[:n])
			}
			st.writing.Store(true)
			m, werr := c.Write(buf[:n])
			st.writing.Store(false)
			st.out.Add(int64(m))
			if werr != nil {
				s.countErr(werr)
				return
			}
			s.echoed.Add(int64(n))
		}
		if err != nil {
			if classify(err) != errEOF {
				s.countErr(err)
			}
			return
		}
	}
}

// describeFD tells what the server knows of the connection on descriptor
// fd: the client that had the other end, what the connection's goroutine
// is blocked in (conn API), and the bytes it moved.
func (s *echoServer) describeFD(fd int, ports *portBook) string {
	var found *connState
	if s.conns != nil {
		s.mu.Lock()
		for _, st := range s.conns {
			if st.fd == fd {
				found = st
			}
		}
		s.mu.Unlock()
	} else {
		// Descriptor numbers are reused: the latest connection seen on fd.
		s.seen.Range(func(_, v any) bool {
			if st := v.(*connState); st.fd == fd && (found == nil || st.start.After(found.start)) {
				found = st
			}
			return true
		})
	}
	if found == nil {
		return ""
	}
	d := fmt.Sprintf("server connection from %s, open %s", found.remote, roundDur(time.Since(found.start)))
	if s.conns != nil {
		in := "Read"
		if found.writing.Load() {
			in = "Write"
		}
		d += ", its goroutine blocked in " + in
	} else {
		d += ", no handler running"
	}
	d += fmt.Sprintf(", read %d, wrote %d", found.in.Load(), found.out.Load())
	if a, err := net.ResolveTCPAddr("tcp", found.remote); err == nil {
		if who, ok := ports.lookup(a.Port); ok {
			d += "; the client was " + who
		}
	}
	return d
}

// shutdownResult is how the server's shutdown went.
type shutdownResult struct {
	Took time.Duration
	Err  error // nil if every connection closed in time
}

// shutdown stops the server: Server.Shutdown bounded by timeout (handler
// API), or closing the listener and waiting up to timeout for the
// connection goroutines, then closing what is left (conn API). The
// listener is closed either way.
func (s *echoServer) shutdown(timeout time.Duration) shutdownResult {
	start := time.Now()
	var errs []error
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		if err := s.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("Server.Shutdown: %w", err))
		}
		cancel()
		select {
		case err := <-s.serveDone:
			if !errors.Is(err, ringpoll.ErrServerClosed) {
				errs = append(errs, fmt.Errorf("serve returned %v, want ErrServerClosed", err))
			}
		case <-time.After(timeout):
			errs = append(errs, errors.New("serve did not return after Shutdown"))
		}
	} else {
		s.ln.Close()
		select {
		case <-s.acceptDone:
			if s.acceptErr != nil {
				errs = append(errs, fmt.Errorf("accept: %w", s.acceptErr))
			}
		case <-time.After(timeout):
			errs = append(errs, errors.New("accept did not return after Close"))
		}
		if !waitGroupTimeout(&s.wg, time.Until(start.Add(timeout))) {
			s.mu.Lock()
			n := len(s.conns)
			for c := range s.conns {
				c.Close()
			}
			s.mu.Unlock()
			errs = append(errs, fmt.Errorf("%d connections still open %v after the listener closed", n, timeout))
			if !waitGroupTimeout(&s.wg, timeout) {
				errs = append(errs, errors.New("connection goroutines did not end after Close"))
			}
		}
	}
	s.ln.Close()
	return shutdownResult{Took: time.Since(start), Err: errors.Join(errs...)}
}

// waitGroupTimeout waits for wg up to d and reports whether it finished.
func waitGroupTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
