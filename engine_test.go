//go:build linux

package ringpoll

import (
	"testing"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// TestEngineReleaseWhileStarting: dropping a reference to one engine, as
// happens when a connection is finalized (on a loop, maybe), never waits
// for another engine that is starting: ring setup may take long, and
// release must not share a lock with it.
func TestEngineReleaseWhileStarting(t *testing.T) {
	running, err := acquireEngine(engConfig(t, WithEngine(EngineEpoll), WithLoops(3)))
	if err != nil {
		t.Fatal(err)
	}
	starting, proceed := make(chan struct{}), make(chan struct{})
	defer func(f func(engineKey) (poll.Engine, error)) { startEngineFunc = f }(startEngineFunc)
	startEngineFunc = func(k engineKey) (poll.Engine, error) {
		close(starting)
		<-proceed
		return startEngine(k)
	}
	started := make(chan *engineRef, 1)
	go func() {
		r, err := acquireEngine(engConfig(t, WithEngine(EngineEpoll), WithLoops(5)))
		if err != nil {
			t.Error(err)
		}
		started <- r
	}()
	tsRecv(t, starting, "the second engine to start")
	released := make(chan struct{})
	go func() {
		running.release()
		close(released)
	}()
	tsRecv(t, released, "release to return while another engine starts")
	close(proceed)
	if r := tsRecv(t, started, "the second engine"); r != nil {
		r.release()
	}
}

// engConfig returns the configuration of opts.
func engConfig(t *testing.T, opts ...Option) *config {
	t.Helper()
	cfg, err := newConfig(opts)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
