package ringpoll

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// Option configures the calls that take options: Listen, Dial (and a
// Dialer), NewServer, ListenPacket, DialPacket, ListenPacketGroup,
// NewPacketServer, OpenFile and NewFile. Each option's doc says which of
// them take it. Options are checked when used: a malformed one makes the
// call fail with an error that names it and wraps ErrInvalidOption, and
// one the call does not take (WithGRO given to Listen), or that the
// engine named by WithEngine does not use (WithBusyPoll on EngineEpoll),
// with an error that names both and wraps ErrInvalidOption too. Under
// EngineAuto (the default) such engine options are accepted, and have no
// effect on an engine that does not use them: which engine auto picks
// depends on the machine. Of two options of one kind, the later wins.
type Option func(*config)

// Defaults for the options, which their docs state.
const (
	defaultInputHighWater  = 4 << 20 // WithInputHighWater: 4 MiB
	defaultOutputHighWater = 4 << 20 // WithOutputHighWater: 4 MiB
	defaultDrainTimeout    = 5 * time.Second
)

type config struct {
	engine    Engine
	engineSet bool
	loops     int
	inHigh    int
	outHigh   int
	idle      time.Duration
	drain     time.Duration
	logger    *slog.Logger
	inline    bool
	ring      ringTuning
	reusePort int    // WithReusePort; 0: off
	steerCPU  bool   // WithCPUSteering
	batch     [2]int // WithPacketBatch: count, size; 0: defaults
	gro       bool   // WithGRO
	noGSO     bool   // WithoutGSO
	given     uint32 // the exported options given, bit optionID (options_take.go)
	err       error

	// pc is pollConfig's result, made once when the options are applied
	// (seal): every connection's FD shares it.
	pc *poll.Config
}

// ringTuning is what the io_uring engines are built with; engines with
// different tunings run separately.
type ringTuning struct {
	sqEntries, cqEntries uint32
	buffers, bufferSize  int
	noRecvLimit          bool
	busyPoll             time.Duration // WithBusyPoll; 0: off
	cpus                 string        // WithLoopCPUs, as "0,2" (comparable, for the engine key)
	moveEvery            int           // movingLoops
}

func newConfig(opts []Option) (*config, error) {
	c := &config{
		loops:   runtime.GOMAXPROCS(0),
		inHigh:  defaultInputHighWater,
		outHigh: defaultOutputHighWater,
		drain:   defaultDrainTimeout,
		logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	c.apply(opts)
	c.seal()
	return c, c.err
}

// seal makes the FD configuration that c's connections share. Call it
// after the last apply.
func (c *config) seal() {
	pc := c.pollConfig()
	c.pc = &pc
}

func (c *config) apply(opts []Option) {
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
}

func (c *config) fail(format string, args ...any) {
	if c.err == nil {
		c.err = optionError(fmt.Sprintf("ringpoll: "+format, args...))
	}
}

// optionError is a malformed option's error: it names the option and
// wraps ErrInvalidOption.
type optionError string

func (e optionError) Error() string { return string(e) }
func (e optionError) Unwrap() error { return ErrInvalidOption }

func (c *config) pollConfig() poll.Config {
	return poll.Config{
		InputHighWater:  c.inHigh,
		InputLowWater:   c.inHigh / 2,
		OutputHighWater: c.outHigh,
		OutputLowWater:  c.outHigh / 2,
		DrainTimeout:    c.drain,
		IdleTimeout:     c.idle,
	}
}

// WithEngine selects the I/O engine. Default: EngineAuto. Every call that
// takes options takes it; NewServer's must match the engine of the
// listeners it serves, and the packet calls other than NewPacketServer
// only check that the engine can run here (a PacketConn moves datagrams
// with system calls of its own).
func WithEngine(e Engine) Option {
	return func(c *config) {
		c.give(optEngine)
		if int(e) >= len(engineNames) {
			c.fail("WithEngine(%d): unknown engine", uint8(e))
			return
		}
		c.engine, c.engineSet = e, true
	}
}

// WithLoops sets the number of event loops that connections are spread
// over, round robin. Default: GOMAXPROCS at the call, a loop per CPU the
// program may use: on the io_uring engines a loop's thread does the kernel
// work of its connections (their receives complete in its task work, their
// sends go in its io_uring_enter), so with fewer loops than CPUs that
// thread bounds the server. Engines with different loop counts run
// separately. Taken by Listen, Dial,
// OpenFile and NewFile (a File opened with the engine options of a
// listener runs on its loops), and by NewServer, whose Serve then refuses
// a listener made with another count: its connections live on the
// listener's engine.
func WithLoops(n int) Option {
	return func(c *config) {
		c.give(optLoops)
		if n < 1 || n > 1024 {
			c.fail("WithLoops(%d): the loop count must be between 1 and 1024", n)
			return
		}
		c.loops = n
	}
}

// WithInputHighWater sets, in bytes, how much input one connection may hold
// (buffered, or consumed but not released) before its loop stops reading the
// socket; reading resumes under half of it. TCP flow control then slows the
// peer. The default is 4 MiB (4194304 bytes). Minimum 4096. Taken by
// Listen, Dial and NewServer (over the listener's).
func WithInputHighWater(n int) Option {
	return func(c *config) {
		c.give(optInputHighWater)
		c.setMark(&c.inHigh, "WithInputHighWater", n)
	}
}

// WithOutputHighWater sets, in bytes, how much output one connection may
// hold (unsent, or a reply queued by reference whose last byte is not sent
// yet: its memory is held whole until then); a Write or Flush beyond it
// blocks (bounded by the write deadline) until the output held falls under
// half of it. The default is 4 MiB (4194304 bytes). Minimum 4096.
// Taken by Listen, Dial and NewServer (over the listener's).
func WithOutputHighWater(n int) Option {
	return func(c *config) {
		c.give(optOutputHighWater)
		c.setMark(&c.outHigh, "WithOutputHighWater", n)
	}
}

// setMark sets a high-water mark of at least one 4 KiB buffer: a smaller one
// would pause a connection before its first read completes.
func (c *config) setMark(dst *int, option string, n int) {
	if n < 4096 {
		c.fail("%s(%d): must be at least 4096 bytes", option, n)
		return
	}
	*dst = n
}

// WithIdleTimeout closes a connection that neither received nor sent a byte
// for d, whichever way it was made: accepted from a Listener, served by a
// Server, or dialed (Dial, Dialer). The close is Close's, and the
// connection's calls then fail with ErrIdleTimeout, which also matches
// net.ErrClosed. Default: 0, never. Taken by Listen, Dial and NewServer
// (over the listener's).
func WithIdleTimeout(d time.Duration) Option {
	return func(c *config) {
		c.give(optIdleTimeout)
		c.setDuration(&c.idle, "WithIdleTimeout", d)
	}
}

// WithDrainTimeout bounds how long a closed connection keeps sending the
// output it had queued. If the peer has not taken it all by then, the rest
// is dropped and the TCP connection is reset (SO_LINGER 0), not closed
// with a FIN, so that the peer reads ECONNRESET instead of a short stream
// that looks complete (a Unix socket has no reset: its peer reads EOF).
// Stats.DrainsExpired counts those connections. The default is 5 seconds.
// Taken by Listen, Dial and NewServer (over the listener's).
func WithDrainTimeout(d time.Duration) Option {
	return func(c *config) {
		c.give(optDrainTimeout)
		c.setDuration(&c.drain, "WithDrainTimeout", d)
	}
}

// setDuration sets a duration option that must not be negative.
func (c *config) setDuration(dst *time.Duration, option string, d time.Duration) {
	if d < 0 {
		c.fail("%s(%v): must not be negative", option, d)
		return
	}
	*dst = d
}

// WithInlineHandler makes a Server call its handler on the connection's
// event loop goroutine, as gnet and a C event loop do, instead of handing
// each batch of input to a pooled goroutine. That saves the hand-off (on
// the io_uring engines, two thread switches, since a loop keeps its OS
// thread), at a price: every connection of that loop waits while the
// handler runs, so it must be quick and must never block. Its connections
// never wait:
//
//   - a read that needs more input than has arrived (Reader.Next, Peek,
//     Skip, Until, or Conn.Read with nothing buffered) fails at once with
//     an error matching ErrWouldBlock. A handler that returns that error is
//     called again when more input arrives; input it consumed before stays
//     consumed, so Peek a frame's header and Next it only once it is whole;
//   - Flush and Write queue their output whatever its size. While the queue
//     is above the output high-water mark the Server calls the handler no
//     more for that connection (its input waits, and the loop stops
//     reading at the input high-water mark), and resumes under half of it;
//   - CloseWrite with output still queued fails with ErrWouldBlock.
//
// Deadlines do not apply. Work that may block (a database call, a big
// computation) belongs on a goroutine of its own, which writes through the
// Writer when done. Taken by NewServer and NewPacketServer (whose readers
// then call the handler themselves; see PacketServer).
func WithInlineHandler() Option {
	return func(c *config) {
		c.give(optInlineHandler)
		c.inline = true
	}
}

// WithLogger sets the logger for rare events (an engine starting, a fallback,
// accept errors a Server retries, a handler's panic). Default: none.
// Every call that takes options takes it.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		c.give(optLogger)
		if l == nil {
			c.fail("WithLogger(nil): pass a logger")
			return
		}
		c.logger = l
	}
}

// WithBufferRing sets the provided buffers each io_uring loop receives
// into: count buffers (a power of two, 1 to 32768) of size bytes (512 to
// 1 MiB). Buffers of 16 KiB or more are consumed incrementally where the
// kernel can (Linux 6.12): each receive takes only the bytes it filled, so
// one buffer holds many messages, of any connections, and a message up to
// the buffer's size usually lands in one piece that the Reader hands out
// without a copy; the buffer goes back to the kernel once every reader of
// a piece of it released it. Smaller buffers are taken whole by each
// receive. Default: 256 buffers of 64 KiB where the kernel consumes
// incrementally, else 4096 of 4 KiB; 16 MiB per loop either way. The
// loop lends the kernel only as many as a few of its turns fill (from
// 1 MiB of them, more as load needs), the last released first, so that
// receives land in memory still in the CPU's caches; count bounds what
// it may lend under load. One
// connection may hold at most a quarter of the ring's bytes (its input
// high-water mark is lowered to fit), and pins at most a quarter of its
// buffers (two, once three quarters are out) with input it has not read
// or not released: past that, what it receives is copied out of the ring
// (Stats.BuffersCopied), so that a reader that holds its input, or
// reads slowly, never leaves the loop's other connections without
// buffers. Taken where WithLoops is, on the engines that receive into
// it: uring, uring-hybrid and uring-sqpoll (epoll and uring-reactor read
// into memory of their own).
func WithBufferRing(count, size int) Option {
	return func(c *config) {
		c.give(optBufferRing)
		if count < 1 || count > 1<<15 || count&(count-1) != 0 {
			c.fail("WithBufferRing(%d, %d): the count must be a power of two from 1 to 32768", count, size)
			return
		}
		if size < 512 || size > 1<<20 {
			c.fail("WithBufferRing(%d, %d): the size must be from 512 bytes to 1 MiB", count, size)
			return
		}
		c.ring.buffers, c.ring.bufferSize = count, size
	}
}

// WithLoopCPUs pins the event loops' threads to cpus, loop i to
// cpus[i mod len(cpus)], so that they run beside (or away from) the CPUs
// taking the network's interrupts and softirqs: `ringtune plan` says which.
// An io_uring loop then locks its thread and pins it; a PacketServer pins
// the reader of socket i the same way (with WithCPUSteering, socket i gets
// the datagrams CPU i received). A uring-sqpoll loop's kernel SQ thread
// goes to its loop's CPU. Each CPU must be one this process may run on. Taken where
// WithLoops is, on the io_uring engines (epoll loops wait in Go's poller,
// on no thread of their own to pin), and by NewPacketServer on any engine.
func WithLoopCPUs(cpus ...int) Option {
	return func(c *config) {
		c.give(optLoopCPUs)
		if len(cpus) == 0 || len(cpus) > 1024 {
			c.fail("WithLoopCPUs(%v): want 1 to 1024 CPUs", cpus)
			return
		}
		allowed := allowedCPUs()
		parts := make([]string, len(cpus))
		for i, cpu := range cpus {
			if cpu < 0 || (allowed != nil && !allowed(cpu)) {
				c.fail("WithLoopCPUs(%v): CPU %d is not one this process may run on", cpus, cpu)
				return
			}
			parts[i] = strconv.Itoa(cpu)
		}
		c.ring.cpus = strings.Join(parts, ",")
	}
}

// loopCPUs returns WithLoopCPUs' list, or nil.
func (c *config) loopCPUs() []int { return parseCPUList(c.ring.cpus) }

func parseCPUList(s string) []int {
	if s == "" {
		return nil
	}
	var cpus []int
	for _, f := range strings.Split(s, ",") {
		n, _ := strconv.Atoi(f)
		cpus = append(cpus, n)
	}
	return cpus
}

// WithBusyPoll makes an io_uring loop that has run out of work poll for
// up to d before it sleeps: it looks, without a system call, at its
// ring's completion queue, at the ring's flag for completions waiting
// to be run, and at its inbox of output from handlers, and carries on at
// once when any of them has work. A loop that finds work while it polls
// pays no sleep and no wake-up: no wait in Go's poller or in
// io_uring_enter, and no interrupt to wake its CPU. This is seed 000's
// polling mode without SQPOLL's kernel thread, for latency-bound servers
// with cores to spare: a loop polls on its own CPU, so an idle server
// still spends up to d of CPU after each burst of work, and at a steady
// partial load close to a whole core per loop. A default (not locked) loop lets other
// goroutines run between looks; a locked one (WithLoopCPUs) does not, so
// goroutines waiting for its P wait up to d. d is from 1µs to 10ms.
// Default: off, the loop sleeps as soon as it has nothing to do. Taken
// where WithLoops is, on engines uring, uring-hybrid and uring-reactor
// (epoll's loops wait in Go's poller; an sqpoll loop always polls 50µs
// before it sleeps). PacketConns and a PacketServer's readers have no
// such loop, and their calls do not take it.
func WithBusyPoll(d time.Duration) Option {
	return func(c *config) {
		c.give(optBusyPoll)
		if d < time.Microsecond || d > 10*time.Millisecond {
			c.fail("WithBusyPoll(%v): must be from 1µs to 10ms", d)
			return
		}
		c.ring.busyPoll = d
	}
}

// withoutRecvLimit makes io_uring loops pause input by cancelling the
// multishot recv, as on kernels without a recv byte limit (tests).
func withoutRecvLimit() Option {
	return func(c *config) { c.ring.noRecvLimit = true }
}

// movingLoops makes parked io_uring loops act as if they moved to another
// thread every n turns, so that they arm their input requests anew while
// traffic flows (tests).
func movingLoops(n int) Option {
	return func(c *config) { c.ring.moveEvery = n }
}

// withRingEntries sizes the io_uring submission and completion queues
// (tests shrink them to force CQ overflow).
func withRingEntries(sq, cq uint32) Option {
	return func(c *config) { c.ring.sqEntries, c.ring.cqEntries = sq, cq }
}
