//go:build linux

package ringpoll

import (
	"fmt"
	"net"
	"testing"
)

// TestAcceptedAddrs: an accepted connection's LocalAddr is the address the
// peer dialled and its RemoteAddr the peer's, as in net, whether the
// listener is bound to one address (the connections share its address) or
// to the wildcard address (each connection asks its socket).
func TestAcceptedAddrs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, bind := range []string{"127.0.0.1:0", ":0"} {
			t.Run(bind, func(t *testing.T) {
				ln, err := Listen("tcp", bind, WithEngine(e))
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				port := ln.Addr().(*net.TCPAddr).Port
				want := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
				peer := tsDialStd(t, "tcp", want.String())
				c, err := ln.AcceptConn()
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				la, ok := c.LocalAddr().(*net.TCPAddr)
				if !ok || !la.IP.Equal(want.IP) || la.Port != port {
					t.Errorf("LocalAddr = %v, want %v", c.LocalAddr(), want)
				}
				if got, want := c.RemoteAddr().String(), peer.LocalAddr().String(); got != want {
					t.Errorf("RemoteAddr = %s, want the peer's %s", got, want)
				}
			})
		}
	})
}

// TestRemoteAddrs: RemoteAddr answers as net does for every network a Conn
// can be on, accepted or dialled, though a TCP connection keeps its peer as
// a value and makes the *net.TCPAddr only when asked: the type, the
// network, the text, and the same address on every call. On a dual-stack
// listener an IPv4 peer reads as IPv4, as in net.
func TestRemoteAddrs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		cases := []struct{ network, bind, dial string }{
			{"tcp4", "127.0.0.1:0", "127.0.0.1"},
			{"tcp6", "[::1]:0", "::1"},
			{"tcp", "[::]:0", "127.0.0.1"}, // dual stack: a v4-mapped peer
			{"unix", "", ""},
		}
		for _, tc := range cases {
			t.Run(tc.network+"/"+tc.dial, func(t *testing.T) {
				var ln *Listener
				if tc.network == "unix" {
					ln = listen(t, e, "unix")
				} else {
					var err error
					if ln, err = Listen(tc.network, tc.bind, WithEngine(e)); err != nil {
						t.Skipf("Listen(%s, %s): %v", tc.network, tc.bind, err)
					}
					t.Cleanup(func() { ln.Close() })
				}
				target := ln.Addr().String()
				dialNet := tc.network
				if tc.network != "unix" {
					dialNet = "tcp"
					target = net.JoinHostPort(tc.dial, fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
				}
				if tc.bind == "[::]:0" {
					// Dual stack only where the system maps IPv4 onto
					// IPv6 sockets (net.ipv6.bindv6only=0, the default).
					probe, err := net.DialTimeout(dialNet, target, tsTimeout)
					if err != nil {
						t.Skipf("no dual-stack listener here: %v", err)
					}
					probe.Close()
					pc, err := ln.AcceptConn()
					if err != nil {
						t.Fatal(err)
					}
					pc.Close()
				}
				peer := tsDialStd(t, dialNet, target)
				c, err := ln.AcceptConn()
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				ra := c.RemoteAddr()
				want := peer.LocalAddr()
				if fmt.Sprintf("%T", ra) != fmt.Sprintf("%T", want) || ra.String() != want.String() {
					t.Errorf("accepted RemoteAddr = %T %v, want %T %v", ra, ra, want, want)
				}
				if ra.Network() != want.Network() {
					t.Errorf("accepted RemoteAddr().Network() = %q, want %q", ra.Network(), want.Network())
				}
				if again := c.RemoteAddr(); again != ra {
					t.Errorf("a second RemoteAddr returned %p, the first %p", again, ra)
				}

				d := tsDialRing(t, e, dialNet, target)
				if got, want := d.RemoteAddr().String(), peer.RemoteAddr().String(); got != want {
					t.Errorf("dialled RemoteAddr = %s, want %s", got, want)
				}
				if _, isTCP := d.RemoteAddr().(*net.TCPAddr); isTCP != (tc.network != "unix") {
					t.Errorf("dialled RemoteAddr is a %T", d.RemoteAddr())
				}
			})
		}
	})
}
