package ringpoll

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// Engine names an I/O engine. The zero value is EngineAuto.
type Engine uint8

// The engines. Each is chosen at run time, never by build tags.
const (
	// EngineAuto picks EngineUring when io_uring works here (see
	// UringStatus), and EngineEpoll otherwise, logging the reason once.
	// The environment variable RINGPOLL_ENGINE, if set to an engine name,
	// overrides it.
	EngineAuto Engine = iota
	// EngineEpoll is the classic epoll reactor.
	EngineEpoll
	// EngineUring is the io_uring proactor: multishot recv into a ring of
	// provided buffers that readers get without a copy, and sends
	// submitted by the loop, one in flight per connection.
	EngineUring
	// EngineUringHybrid receives as EngineUring does; writers send with a
	// syscall in their own goroutine and leave only what the socket did not
	// take to the loop.
	EngineUringHybrid
	// EngineUringReactor polls readiness through io_uring (multishot
	// POLL_ADD), then reads and writes with plain syscalls.
	EngineUringReactor
	// EngineUringSQPoll is EngineUring on SQPOLL rings: a kernel thread
	// takes submissions, and writers submit sends on mutex-guarded send
	// rings. It needs spare cores: its kernel thread
	// spins for 10 ms after each submission.
	EngineUringSQPoll
)

var engineNames = [...]string{
	EngineAuto:         "auto",
	EngineEpoll:        "epoll",
	EngineUring:        "uring",
	EngineUringHybrid:  "uring-hybrid",
	EngineUringReactor: "uring-reactor",
	EngineUringSQPoll:  "uring-sqpoll",
}

// ParseEngine returns the engine called name: one of auto, epoll, uring,
// uring-hybrid, uring-reactor, uring-sqpoll. For another name it returns
// an error that wraps ErrInvalidOption and lists the valid names.
func ParseEngine(name string) (Engine, error) {
	for e, n := range engineNames {
		if n == name {
			return Engine(e), nil
		}
	}
	return 0, optionError(fmt.Sprintf("ringpoll: unknown engine %q (valid: %s)", name, strings.Join(engineNames[:], ", ")))
}

// String returns the engine's name as ParseEngine accepts it.
func (e Engine) String() string {
	if int(e) < len(engineNames) {
		return engineNames[e]
	}
	return fmt.Sprintf("Engine(%d)", uint8(e))
}

// UringStatus reports why the io_uring engines cannot run here, or nil if
// they can: io_uring is set up, probed for the opcodes the engines use, and
// a multishot recv into a provided-buffer ring is tried on a socketpair.
// The error names the cause: ENOSYS (no io_uring), EPERM (a seccomp profile
// such as Docker's default, or a security policy), the sysctl
// kernel.io_uring_disabled, or a missing opcode or feature. The check runs
// once per process. Setting RINGPOLL_URING_SETUP_ERRNO to EPERM, ENOSYS or
// EINVAL makes it fail that way, to try the fallback where io_uring works.
func UringStatus() error { return uringStatus() }

var fallbackOnce sync.Once

// resolve turns EngineAuto into a concrete engine, honouring
// RINGPOLL_ENGINE, and rejects engines that cannot run. A fallback from
// io_uring to epoll is logged once per process.
func (e Engine) resolve(log *slog.Logger) (Engine, error) {
	if e == EngineAuto {
		if env := os.Getenv("RINGPOLL_ENGINE"); env != "" {
			var err error
			if e, err = ParseEngine(env); err != nil {
				return 0, fmt.Errorf("RINGPOLL_ENGINE: %w", err)
			}
		}
	}
	switch e {
	case EngineEpoll:
		return e, nil
	case EngineAuto:
		if err := uringStatus(); err != nil {
			fallbackOnce.Do(func() {
				log.Warn("ringpoll: io_uring unavailable, using epoll", "reason", err)
			})
			return EngineEpoll, nil
		}
		return EngineUring, nil
	case EngineUring, EngineUringHybrid, EngineUringReactor, EngineUringSQPoll:
		if err := uringStatus(); err != nil {
			return 0, fmt.Errorf("%w: %s: %w; use epoll or auto", ErrEngineUnavailable, e, err)
		}
		return e, nil
	}
	return 0, fmt.Errorf("%w: %s", ErrEngineUnavailable, e)
}

// A running engine is shared by every listener and connection with the same
// engine, loop count and tuning, and stopped engineLinger after the last of
// them is closed: an idle process keeps no loop goroutines, and a program
// that closes its last connection and opens a new one does not pay for
// setting up rings again.
type engineKey struct {
	engine Engine
	loops  int
	ring   ringTuning
}

// engineLinger is how long an engine with no listener or connection left
// keeps running. Tests set it to 0 to stop engines at once.
var engineLinger atomic.Int64 // a time.Duration

func init() { engineLinger.Store(int64(200 * time.Millisecond)) }

type engineRef struct {
	key engineKey
	// ready is closed once the engine started (eng set) or failed to
	// (err set); neither changes after.
	ready chan struct{}
	eng   poll.Engine
	err   error

	mu      sync.Mutex  // guards the fields below, never held for long
	refs    int         // listeners and connections using the engine
	stopped bool        // Stop was called: no new reference
	linger  *time.Timer // set while refs == 0
}

// enginesMu guards engines, the running engines by key. It is never held
// while an engine starts (ring setup takes a while) or by release, which
// a loop calls.
var (
	enginesMu sync.Mutex
	engines   = map[engineKey]*engineRef{}
)

// startEngineFunc starts an engine; tests replace it to hold a start up.
var startEngineFunc = startEngine

// acquireEngine returns a reference to the running engine for cfg, starting
// it if needed. The caller must call release once.
func acquireEngine(cfg *config) (*engineRef, error) {
	e, err := cfg.engine.resolve(cfg.logger)
	if err != nil {
		return nil, err
	}
	key := engineKey{e, cfg.loops, ringTuning{}}
	if e != EngineEpoll {
		key.ring = cfg.ring
	}
	for {
		enginesMu.Lock()
		r := engines[key]
		if r == nil {
			r = &engineRef{key: key, ready: make(chan struct{})}
			engines[key] = r
			enginesMu.Unlock()
			r.eng, r.err = startEngineFunc(key)
			if r.err != nil {
				enginesMu.Lock()
				delete(engines, key)
				enginesMu.Unlock()
				close(r.ready)
				return nil, r.err
			}
			close(r.ready)
			cfg.logger.Info("ringpoll: engine started", "engine", r.eng.Name(), "loops", key.loops)
		} else {
			enginesMu.Unlock()
			<-r.ready
			if r.err != nil {
				continue // its starter removed it; try for ourselves
			}
		}
		if r.retain() {
			return r, nil
		}
		// It stopped since we found it: start a new one.
	}
}

// retain adds a reference to a running engine. It reports false, adding
// none, if the engine was stopped (a Listener closed while its Accept was
// registering a connection, and the engine's linger ran out).
func (r *engineRef) retain() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	if r.refs++; r.refs == 1 && r.linger != nil {
		r.linger.Stop()
		r.linger = nil
	}
	return true
}

// release drops a reference; the engine stops engineLinger after the last
// one, unless a new reference comes first. It takes only the engine's own
// short lock, never enginesMu, so a loop may call it while another engine
// starts.
func (r *engineRef) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refs--; r.refs == 0 {
		r.linger = time.AfterFunc(time.Duration(engineLinger.Load()), r.stopIdle)
	}
}

// stopIdle stops the engine if it is still unreferenced.
func (r *engineRef) stopIdle() {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refs != 0 || r.stopped || r.linger == nil {
		return
	}
	r.linger = nil
	r.stopped = true
	if engines[r.key] == r {
		delete(engines, r.key)
	}
	r.eng.Stop()
}
