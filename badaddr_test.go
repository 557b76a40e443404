//go:build linux

package ringpoll

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestBadAddress: addresses that cannot resolve or parse make Dial and
// Listen fail at once with the very error package net gives for them (a
// *net.OpError saying what was wrong), not a panic or a hang. (No DNS
// lookups: ports and syntax fail before any query.)
func TestBadAddress(t *testing.T) {
	addrs := []string{"127.0.0.1:notaport", "127.0.0.1", "[::1:80", "127.0.0.1:99999"}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, addr := range addrs {
			t0 := time.Now()
			c, err := Dial("tcp", addr, WithEngine(e))
			if err == nil {
				c.Close()
				t.Fatalf("Dial(%q) succeeded", addr)
			}
			var op *net.OpError
			if !errors.As(err, &op) || op.Op != "dial" {
				t.Errorf("Dial(%q): %v (%T), want a *net.OpError for dial", addr, err, err)
			}
			ln, lerr := Listen("tcp", addr, WithEngine(e))
			if lerr == nil {
				ln.Close()
				t.Fatalf("Listen(%q) succeeded", addr)
			}
			_, stdErr := net.Dial("tcp", addr)
			_, stdLerr := net.Listen("tcp", addr)
			if stdErr == nil || err.Error() != stdErr.Error() {
				t.Errorf("Dial(%q): %q, package net says %v", addr, err, stdErr)
			}
			if stdLerr == nil || lerr.Error() != stdLerr.Error() {
				t.Errorf("Listen(%q): %q, package net says %v", addr, lerr, stdLerr)
			}
			// Failing at once means without a lookup or a wait: only a
			// hang takes anywhere near tsTimeout.
			if d := time.Since(t0); d > tsTimeout {
				t.Errorf("%q took %v to fail", addr, d)
			}
		}
	})
}
