package ringpoll

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ringpoll/ringpoll/internal/gopool"
	"github.com/ringpoll/ringpoll/internal/poll"
	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

// PacketServer reads one or more PacketConns, each with a goroutine of its
// own, and hands the batches read to a PacketHandler: on a pooled
// goroutine while the reader reads on (up to four batches per socket at
// once), or on the reader itself with WithInlineHandler, which costs no
// goroutine switch but reads nothing while the handler runs.
//
// How a reader reads depends on the engine. On uring (the default where
// io_uring works), uring-hybrid and uring-sqpoll, it keeps one multishot
// RECVMSG armed on a ring of its own, the kernel filling a provided
// buffer per datagram, and sleeps in Go's poller until completions are
// ready (on a thread of its own, in io_uring_enter, if WithLoopCPUs pins
// it); the handler's Packets view those buffers, which go back to the
// kernel when it returns. On epoll and uring-reactor it reads with
// recvmmsg(2) through ReadBatch, sleeping in Go's poller too. An inline
// handler's replies on the ring engines leave through the ring, submitted
// before the reader's next wait or next batch; otherwise with sendmmsg(2).
type PacketServer struct {
	h      PacketHandler
	cfg    *config
	engine Engine // resolved
	pool   *gopool.Pool

	mu      sync.Mutex
	conns   map[*PacketConn]struct{}
	addr    net.Addr             // the first socket's served (Addr)
	rings   []*uringp.PacketRing // readers to stop with the sockets
	closed  bool
	readers sync.WaitGroup
	busy    sync.WaitGroup // batches being handled
	done    chan struct{}
}

// Batches a pooled-handler socket has out at once.
const psDepth = 4

// NewPacketServer makes a server for h. Options: WithInlineHandler,
// WithLoopCPUs (pins the reader of socket i to CPU i mod n),
// WithPacketBatch, and for the sockets ListenAndServe opens WithReusePort,
// WithCPUSteering, WithGRO and WithoutGSO; also WithEngine, WithLogger.
func NewPacketServer(h PacketHandler, opts ...Option) (*PacketServer, error) {
	if h == nil {
		return nil, errors.New("ringpoll: NewPacketServer: nil PacketHandler")
	}
	cfg, err := configFor(inNewPacketServer, opts)
	if err != nil {
		return nil, err
	}
	e, err := cfg.engine.resolve(cfg.logger)
	if err != nil {
		return nil, err
	}
	if cfg.batch[0] == 0 {
		cfg.batch = [2]int{defaultBatchPackets, defaultPacketSize}
	}
	s := &PacketServer{h: h, cfg: cfg, engine: e, conns: map[*PacketConn]struct{}{}, done: make(chan struct{})}
	if !cfg.inline {
		s.pool = gopool.New(time.Second)
	}
	return s, nil
}

// ListenAndServe opens the sockets (one, or a group with WithReusePort
// or WithCPUSteering) on the address and serves them until Shutdown or
// Close, returning ErrServerClosed then.
func (s *PacketServer) ListenAndServe(network, address string) error {
	var conns []*PacketConn
	var err error
	if s.cfg.reusePort > 0 || s.cfg.steerCPU {
		conns, err = listenPacketGroup(network, address, s.cfg)
	} else {
		var c *PacketConn
		c, err = listenPacket(network, address, s.cfg)
		conns = []*PacketConn{c}
	}
	if err != nil {
		return err
	}
	return s.Serve(conns...)
}

// Addr returns the local address of the first socket the server served:
// the one ListenAndServe opened (a WithReusePort group's sockets share
// it), so that a server listening on port 0 tells which port it got, or
// the first PacketConn given to Serve. It is nil until then, and stays
// set after Shutdown and Close. It is safe for concurrent use.
func (s *PacketServer) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

var errNilPacketConn = errors.New("ringpoll: PacketServer.Serve: nil PacketConn")

// Serve reads each PacketConn on a goroutine of its own and hands what
// arrives to the handler, until Shutdown or Close (which close them), and
// then returns ErrServerClosed; or until every PacketConn it got was
// closed otherwise (PacketConn.Close stops their readers), and then
// returns the error that ended the last read, which matches
// net.ErrClosed. It takes ownership of the PacketConns.
func (s *PacketServer) Serve(conns ...*PacketConn) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		return ErrServerClosed
	}
	if slices.Contains(conns, nil) {
		s.mu.Unlock()
		return errNilPacketConn
	}
	if s.addr == nil && len(conns) > 0 {
		s.addr = conns[0].LocalAddr()
	}
	ended := make(chan error, len(conns))
	for i, c := range conns {
		s.conns[c] = struct{}{}
		s.readers.Add(1)
		go func() { ended <- s.read(c, i) }()
	}
	s.mu.Unlock()
	poll.Hook(poll.HookPacketServing, nil)
	var err error
	for range conns {
		select {
		case <-s.done:
			return ErrServerClosed
		case err = <-ended:
		}
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrServerClosed
	}
	return err
}

// serveBatch is one batch's memory and the writer of its replies: a
// Batch, or on a PacketRing the datagrams it handed out.
type serveBatch struct {
	s     *PacketServer
	b     *Batch
	ring  *uringp.PacketRing
	ds    []uringp.Datagram // ring: received, their buffers held
	bids  []uint16          // ring: the buffers to give back
	got   int
	w     PacketWriter
	in    []Packet
	free  chan *serveBatch
	runFn func()
}

func (sb *serveBatch) run() {
	sb.s.h.ServePackets(&sb.w, sb.in)
	if err := sb.w.Flush(); err != nil {
		sb.w.log(err)
	}
	sb.release()
	sb.free <- sb
	sb.s.busy.Done()
}

// release ends the use of the batch's datagrams.
func (sb *serveBatch) release() {
	if sb.ring == nil {
		sb.in = nil
		sb.b.Release()
		return
	}
	clear(sb.in)
	sb.in = sb.in[:0]
	for i, d := range sb.ds[:sb.got] {
		sb.bids[i] = d.Bid
	}
	sb.ring.GiveAll(sb.bids[:sb.got])
	clear(sb.ds[:sb.got])
	sb.got = 0
}

// read is the loop of socket i of those Serve got; with WithLoopCPUs its
// thread is pinned. On the uring engines it reads through a PacketRing
// (multishot RECVMSG); where one cannot be set up, and on the others, with
// recvmmsg(2) through ReadBatch. It returns the error that ended it, once
// the socket is closed.
func (s *PacketServer) read(c *PacketConn, i int) (err error) {
	defer s.readers.Done()
	defer func() {
		if c.closing() { // by its owner, not the server's to close
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}
	}()
	closed := c.opError("read", netip.AddrPort{}, net.ErrClosed)
	if cpus := s.cfg.loopCPUs(); len(cpus) > 0 {
		if err := pinThread(cpus[i%len(cpus)]); err != nil {
			s.cfg.logger.Warn("ringpoll: reading unpinned", "local", c.LocalAddr(), "err", err)
		}
	}
	depth := psDepth
	if s.cfg.inline {
		depth = 1
	}
	count, size := s.cfg.batch[0], s.cfg.batch[1]
	if c.gro && size < maxPacketSize {
		// Each slot takes up to 64 KiB of coalesced datagrams.
		count, size = min(count, 8), maxPacketSize
	}
	var ring *uringp.PacketRing
	var rr *ringReader
	if s.engine.ringsPackets() {
		var open bool
		if rr, ring, open = s.openRing(c, count*(depth+1), size); !open {
			return closed
		}
		if ring != nil {
			defer closeRing(c, rr, ring)
		}
	}
	free := make(chan *serveBatch, depth)
	logErr := func(err error) { s.cfg.logger.Warn("ringpoll: sending replies", "local", c.LocalAddr(), "err", err) }
	for range depth {
		sb := &serveBatch{s: s, ring: ring, w: PacketWriter{conn: c, log: logErr}, free: free}
		if ring != nil && s.pool == nil {
			sb.w.rs = &ringSends{ring: ring, op: newSendOp()}
			defer func() {
				// An inline handler's last flight of replies left with
				// the ring's last submissions: a run the kernel refused
				// to cut goes again, and all are counted.
				if err := sb.w.rs.settle(c); err != nil {
					logErr(err)
				}
			}()
		}
		if ring != nil {
			sb.ds = make([]uringp.Datagram, count)
			sb.bids = make([]uint16, count)
			sb.in = make([]Packet, 0, count)
		} else {
			var err error
			if sb.b, err = NewBatch(count, size); err != nil {
				panic(err) // WithPacketBatch checked the shape
			}
		}
		sb.runFn = sb.run
		free <- sb
	}
	var backoff time.Duration
	var awake poll.Awake
	for {
		var sb *serveBatch
		select {
		case sb = <-free:
		default:
			awake.Slept() // every batch is out: wait for one back
			select {
			case sb = <-free:
			case <-c.done:
				return closed
			}
		}
		if ring != nil {
			sb.in, err = c.readRing(ring, sb)
			if ring.Slept() {
				awake.Slept()
			}
		} else {
			sb.b.parked = false
			sb.in, err = c.ReadBatch(sb.b)
			if sb.b.parked {
				awake.Slept()
			}
			if err == nil && s.stopping() {
				// Shutdown stopped reading while this read ran: a read
				// deadline ends the wait, not a recvmmsg already under
				// way, and what it got arrived after reading stopped.
				sb.release()
				return closed
			}
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.stopping() {
				return err
			}
			// An unconnected socket reports little (ICMP errors need
			// IP_RECVERR); what it does, such as ENOMEM, passes: log, wait
			// a little longer each time, and read on.
			backoff = min(max(2*backoff, time.Millisecond), 100*time.Millisecond)
			s.cfg.logger.Warn("ringpoll: reading datagrams", "local", c.LocalAddr(), "err", err, "retry_in", backoff)
			free <- sb
			time.Sleep(backoff)
			awake.Slept()
			continue
		}
		backoff = 0
		if s.pool == nil {
			if !rr.enter() {
				// Close stopped the ring while this batch was read:
				// dropped, as the datagrams after it are.
				sb.release()
				return closed
			}
			s.busy.Add(1)
			sb.run()
			rr.leave()
		} else {
			s.busy.Add(1)
			s.pool.Go(sb.runFn)
		}
		awake.Turn()
	}
}

// Shutdown stops reading the sockets, waits until every batch already
// read has been handled and the replies its handler queued have gone
// out, and then closes the sockets. If ctx ends first, it closes them
// then (handlers still running finish on their own, their replies
// failing with net.ErrClosed) and returns ctx's error. Serve returns
// ErrServerClosed as Shutdown starts; datagrams that arrive after that
// are not read. Calling it again waits again.
func (s *PacketServer) Shutdown(ctx context.Context) error {
	s.stopReading()
	poll.Hook(poll.HookPacketShutdownWaits, nil)
	finished := make(chan struct{})
	go func() {
		s.readers.Wait()
		s.busy.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		s.closeConns()
		return ctx.Err()
	}
	s.closeConns()
	if s.pool != nil {
		s.pool.Close()
	}
	return nil
}

// Close stops reading at once, closing the sockets; handlers running
// finish on their own, their replies failing with net.ErrClosed. Serve
// returns ErrServerClosed.
func (s *PacketServer) Close() error {
	s.stopReading()
	s.closeConns()
	if s.pool != nil {
		s.pool.Close()
	}
	return nil
}

// aLongTimeAgo is a read deadline that has passed, as net's own.
var aLongTimeAgo = time.Unix(1, 0)

// stopReading ends Serve and stops the readers, once, without closing
// the sockets: a ring reader's ring stops (a batch it read still goes to
// the handler, whose replies it sends before it tears the ring down), and
// a reader on ReadBatch is woken by a read deadline that has passed.
func (s *PacketServer) stopReading() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	rings := s.rings
	conns := make([]*PacketConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, r := range rings {
		r.Stop()
	}
	for _, c := range conns {
		// A reader that is yet to set up a ring sees s.closed and ends.
		if c.ring.Load() == nil {
			c.SetReadDeadline(aLongTimeAgo)
		}
	}
}

// stopping reports whether Shutdown or Close was called.
func (s *PacketServer) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// closeConns closes the sockets. Outside the lock: Close waits for the
// readers' rings to let go, and a reader may take the lock as it ends.
func (s *PacketServer) closeConns() {
	s.mu.Lock()
	conns := make([]*PacketConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	clear(s.conns)
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
