//go:build linux

package ringpoll

import (
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
