//go:build linux

package ringpoll

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// TestCloseListenerFreesAddress: once Listener.Close returns, dials to
// its address are refused and a new listener can take the address at
// once, as with net.Listen. On the io_uring engines the socket the loop
// accepts on is closed by the loop after Close returns: the test holds
// the loop where it would (HookUnlisten) while it dials and listens
// again, with and without an Accept blocked in the listener.
func TestCloseListenerFreesAddress(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, network := range []string{"tcp", "tcp6"} {
			for _, blocked := range []bool{false, true} {
				name := network + "/idle"
				if blocked {
					name = network + "/accept-blocked"
				}
				t.Run(name, func(t *testing.T) {
					if network == "tcp6" {
						tsNeedIPv6(t)
					}
					testCloseListenerFreesAddress(t, e, network, blocked)
				})
			}
		}
	})
}

func testCloseListenerFreesAddress(t *testing.T, e Engine, network string, blocked bool) {
	ln := listen(t, e, network)
	addr := ln.Addr().String()
	accepted := make(chan error, 1)
	if blocked {
		go func() {
			c, err := ln.Accept()
			if c != nil {
				c.Close()
			}
			accepted <- err
		}()
		tsWaitBlocked(t, tsFrameAccept, "ringpoll.testCloseListenerFreesAddress.")
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	restore := poll.SetTestHook(func(p poll.HookPoint, _ *poll.FD) {
		if p == poll.HookUnlisten {
			once.Do(func() { close(held); <-release })
		}
	})
	defer restore()
	if err := ln.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if c, err := net.Dial(network, addr); err == nil {
		c.Close()
		t.Errorf("Dial %s after Close connected, want refused", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Dial %s after Close: %v, want ECONNREFUSED", addr, err)
	}
	if again, err := net.Listen(network, addr); err != nil {
		t.Errorf("net.Listen(%s) after Close: %v", addr, err)
	} else {
		again.Close()
	}
	close(release)
	if e != EngineEpoll {
		tsRecv(t, held, "the loop to reach HookUnlisten")
	}
	if blocked {
		if err := tsRecv(t, accepted, "Accept to return after Close"); !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked Accept returned %v, want net.ErrClosed", err)
		}
	}
}
