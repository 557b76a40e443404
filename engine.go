package ringpoll

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// Engine names an I/O engine. The zero value is EngineAuto.
type Engine uint8

// The engines. Each is chosen at run time, never by build tags.
const (
	// EngineAuto picks the best engine the kernel offers. Until the
	// io_uring engines land it means EngineEpoll. The environment variable
	// RINGPOLL_ENGINE, if set to an engine name, overrides it.
	EngineAuto Engine = iota
	// EngineEpoll is the classic epoll reactor.
	EngineEpoll
	// EngineUring is the io_uring proactor (not available yet).
	EngineUring
	// EngineUringHybrid receives through io_uring and sends with sendmsg
	// (not available yet).
	EngineUringHybrid
	// EngineUringReactor polls through io_uring, then reads and writes with
	// plain syscalls (not available yet).
	EngineUringReactor
	// EngineUringSQPoll is the io_uring proactor on SQPOLL rings (not
	// available yet).
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

// ErrEngineUnavailable is returned (wrapped) by Listen, Dial and NewServer
// when the requested engine cannot run here.
var ErrEngineUnavailable = errors.New("ringpoll: engine not available")

// ParseEngine returns the engine called name: one of auto, epoll, uring,
// uring-hybrid, uring-reactor, uring-sqpoll.
func ParseEngine(name string) (Engine, error) {
	for e, n := range engineNames {
		if n == name {
			return Engine(e), nil
		}
	}
	return 0, fmt.Errorf("ringpoll: unknown engine %q (valid: %s)", name, strings.Join(engineNames[:], ", "))
}

// String returns the engine's name as ParseEngine accepts it.
func (e Engine) String() string {
	if int(e) < len(engineNames) {
		return engineNames[e]
	}
	return fmt.Sprintf("Engine(%d)", uint8(e))
}

// resolve turns EngineAuto into a concrete engine, honouring
// RINGPOLL_ENGINE, and rejects engines that cannot run.
func (e Engine) resolve() (Engine, error) {
	if e == EngineAuto {
		if env := os.Getenv("RINGPOLL_ENGINE"); env != "" {
			var err error
			if e, err = ParseEngine(env); err != nil {
				return 0, fmt.Errorf("RINGPOLL_ENGINE: %w", err)
			}
		}
	}
	switch e {
	case EngineAuto, EngineEpoll:
		return EngineEpoll, nil
	case EngineUring, EngineUringHybrid, EngineUringReactor, EngineUringSQPoll:
		return 0, fmt.Errorf("%w: %s is not available yet in this version; use epoll or auto", ErrEngineUnavailable, e)
	}
	return 0, fmt.Errorf("%w: %s", ErrEngineUnavailable, e)
}

// A running engine is shared by every listener and connection with the same
// engine and loop count, and stopped when the last of them is closed, so an
// idle process keeps no loop goroutines.
type engineKey struct {
	engine Engine
	loops  int
}

type engineRef struct {
	key  engineKey
	eng  poll.Engine
	refs int // under enginesMu
}

var (
	enginesMu sync.Mutex
	engines   = map[engineKey]*engineRef{}
)

// acquireEngine returns a reference to the running engine for cfg, starting
// it if needed. The caller must call release once.
func acquireEngine(cfg *config) (*engineRef, error) {
	e, err := cfg.engine.resolve()
	if err != nil {
		return nil, err
	}
	key := engineKey{e, cfg.loops}
	enginesMu.Lock()
	defer enginesMu.Unlock()
	r := engines[key]
	if r == nil {
		eng, err := startEngine(key)
		if err != nil {
			return nil, err
		}
		r = &engineRef{key: key, eng: eng}
		engines[key] = r
		cfg.logger.Info("ringpoll: engine started", "engine", eng.Name(), "loops", key.loops)
	}
	r.refs++
	return r, nil
}

// retain adds a reference to a running engine. It reports false, adding
// none, if the engine was stopped: its last reference was released (a
// Listener closed while its Accept was registering a connection).
func (r *engineRef) retain() bool {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if r.refs == 0 {
		return false
	}
	r.refs++
	return true
}

// release drops a reference; the last one stops the engine. It does not
// block, so a loop may call it.
func (r *engineRef) release() {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if r.refs--; r.refs == 0 {
		if engines[r.key] == r { // a newer engine may run under the key
			delete(engines, r.key)
		}
		r.eng.Stop()
	}
}
