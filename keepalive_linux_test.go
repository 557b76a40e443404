//go:build linux

package ringpoll

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// keepAliveState reads a socket's keep-alive settings: whether probes are
// on, the idle time and interval in seconds, and the probe count.
func keepAliveState(t *testing.T, c syscall.Conn) string {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var on, idle, intvl, cnt int
	var errs []error
	err = rc.Control(func(fd uintptr) {
		get := func(level, opt int, v *int) {
			var err error
			*v, err = unix.GetsockoptInt(int(fd), level, opt)
			errs = append(errs, err)
		}
		get(unix.SOL_SOCKET, unix.SO_KEEPALIVE, &on)
		get(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, &idle)
		get(unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, &intvl)
		get(unix.IPPROTO_TCP, unix.TCP_KEEPCNT, &cnt)
	})
	if err = errors.Join(append(errs, err)...); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("on=%d idle=%ds interval=%ds count=%d", on, idle, intvl, cnt)
}

// TestKeepAliveAsNet: TCP connections, accepted and dialed, start with
// the keep-alive probes net's have (so a peer that vanished without a FIN
// or a reset is found out, not held for ever), and SetKeepAlive,
// SetKeepAlivePeriod and SetKeepAliveConfig leave a connection as the
// same calls leave a *net.TCPConn. Each step is made on the ringpoll end
// and on its std peer, and the sockets are compared.
func TestKeepAliveAsNet(t *testing.T) {
	type keepAliver interface {
		syscall.Conn
		SetKeepAlive(bool) error
		SetKeepAlivePeriod(time.Duration) error
		SetKeepAliveConfig(net.KeepAliveConfig) error
	}
	steps := []struct {
		name string
		do   func(c keepAliver) error
	}{
		{"as opened", func(keepAliver) error { return nil }},
		{"SetKeepAlive(false)", func(c keepAliver) error { return c.SetKeepAlive(false) }},
		{"SetKeepAlivePeriod(40s)", func(c keepAliver) error { return c.SetKeepAlivePeriod(40 * time.Second) }},
		{"SetKeepAlive(true)", func(c keepAliver) error { return c.SetKeepAlive(true) }},
		{"SetKeepAlivePeriod(1500ms)", func(c keepAliver) error { return c.SetKeepAlivePeriod(1500 * time.Millisecond) }},
		{"SetKeepAlivePeriod(-1)", func(c keepAliver) error { return c.SetKeepAlivePeriod(-1) }},
		{"SetKeepAlivePeriod(0)", func(c keepAliver) error { return c.SetKeepAlivePeriod(0) }},
		{"SetKeepAliveConfig(5s, 7s, 3)", func(c keepAliver) error {
			return c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 7 * time.Second, Count: 3})
		}},
		{"SetKeepAliveConfig(all negative)", func(c keepAliver) error {
			return c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: -1, Interval: -1, Count: -1})
		}},
		{"SetKeepAliveConfig(zero)", func(c keepAliver) error { return c.SetKeepAliveConfig(net.KeepAliveConfig{}) }},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			t.Run(string(side), func(t *testing.T) {
				c, peer := tsPair(t, e, "tcp", side)
				std := peer.(*net.TCPConn)
				for _, st := range steps {
					errRing, errStd := st.do(c), st.do(std)
					if (errRing == nil) != (errStd == nil) {
						t.Fatalf("%s: ringpoll %v, net %v", st.name, errRing, errStd)
					}
					if got, want := keepAliveState(t, c), keepAliveState(t, std); got != want {
						t.Errorf("%s: ringpoll's socket %s, net's %s", st.name, got, want)
					}
				}
				c.Close()
				for _, st := range steps[1:] {
					if err := st.do(c); !errors.Is(err, net.ErrClosed) {
						t.Errorf("%s after Close: %v, want net.ErrClosed", st.name, err)
					}
				}
			})
		}
	})
}
