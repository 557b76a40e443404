//go:build linux

package ringpoll

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestIdleTimeoutError: a connection its idle timer closed, dialed or
// accepted, fails its calls with ErrIdleTimeout, in a *net.OpError, which
// also matches net.ErrClosed: a Read blocked when the timer fires, a
// Write and a Close after it. The peer reads EOF. A connection closed by
// Close fails with net.ErrClosed alone.
func TestIdleTimeoutError(t *testing.T) {
	idle := WithIdleTimeout(time.Hour) // fired by ExpireIdle, not by the clock
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range []string{"dial", "accept"} {
			t.Run(side, func(t *testing.T) {
				var c *Conn
				var peer net.Conn
				if side == "dial" {
					ln := listen(t, e, "tcp")
					c = tsDialRing(t, e, "tcp", ln.Addr().String(), idle)
					p, err := ln.AcceptConn()
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { p.Close() })
					peer = p
				} else {
					ln := listen(t, e, "tcp", idle)
					peer = tsDialStd(t, "tcp", ln.Addr().String())
					var err error
					if c, err = ln.AcceptConn(); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { c.Close() })
				}
				readErr := make(chan error, 1)
				go func() {
					_, err := c.Read(make([]byte, 1))
					readErr <- err
				}()
				tsEventually(t, "the Read to block", c.fd.ReaderWaited)
				c.fd.ExpireIdle()
				tsIdleErr(t, "a blocked Read", tsRecv(t, readErr, "the blocked Read to return"))
				_, err := c.Write([]byte("late"))
				tsIdleErr(t, "a Write after", err)
				tsIdleErr(t, "Close after", c.Close())
				if got := tsReadEOF(t, peer, false); len(got) != 0 {
					t.Errorf("the peer read %q, want EOF", got)
				}
			})
		}
		t.Run("close", func(t *testing.T) {
			ln := listen(t, e, "tcp")
			c := tsDialRing(t, e, "tcp", ln.Addr().String(), idle)
			c.Close()
			_, err := c.Read(make([]byte, 1))
			if !errors.Is(err, net.ErrClosed) || errors.Is(err, ErrIdleTimeout) {
				t.Errorf("Read after Close returned %v, want net.ErrClosed, not ErrIdleTimeout", err)
			}
		})
	})
}

// tsIdleErr checks that err, from what, is ErrIdleTimeout in a
// *net.OpError, matching net.ErrClosed too.
func tsIdleErr(t *testing.T, what string, err error) {
	t.Helper()
	var op *net.OpError
	if !errors.As(err, &op) || !errors.Is(err, ErrIdleTimeout) || !errors.Is(err, net.ErrClosed) {
		t.Errorf("%s on a connection closed by its idle timer returned %v (%T), want ErrIdleTimeout in a *net.OpError, matching net.ErrClosed", what, err, err)
	}
}
