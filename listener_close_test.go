//go:build linux

package ringpoll

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestCloseListenerFreesAddress: once Listener.Close returns, dials to
// its address are refused and a new listener can take the address at
// once, as with net.Listen, with and without an Accept blocked in the
// listener, which returns net.ErrClosed.
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
	if blocked {
		if err := tsRecv(t, accepted, "Accept to return after Close"); !errors.Is(err, net.ErrClosed) {
			t.Errorf("blocked Accept returned %v, want net.ErrClosed", err)
		}
	}
}
