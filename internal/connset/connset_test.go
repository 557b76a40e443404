package connset

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestWait: a connection served in time is closed once served; one that
// outstays the grace period is closed by Wait, which ends its serve.
func TestWait(t *testing.T) {
	var s Set
	quick, quickPeer := net.Pipe()
	slow, slowPeer := net.Pipe()
	s.Serve(quick, func(net.Conn) {})
	s.Serve(slow, func(c net.Conn) {
		c.Read(make([]byte, 1)) // until Wait closes c
	})
	start := time.Now()
	s.Wait(50 * time.Millisecond)
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("Wait returned after %v, within the grace period, with a connection still served", d)
	}
	for name, peer := range map[string]net.Conn{"served": quickPeer, "cut off": slowPeer} {
		peer.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := peer.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("the %s connection's peer read %v, want io.EOF: the connection closed", name, err)
		}
		peer.Close()
	}
}
