package ringpoll

import (
	"context"
	"net"
	"syscall"
	"time"
)

// Dialer holds options for connecting. The zero value dials with the
// defaults. Its methods are safe for concurrent use.
type Dialer struct {
	// Timeout bounds the whole dial, name resolution included. Zero means
	// no timeout other than the context's and the operating system's.
	Timeout time.Duration
	// LocalAddr is the local address to dial from; nil picks one.
	LocalAddr net.Addr
	// Options configure the connection (engine, limits, timeouts): those
	// Dial takes.
	Options []Option
}

// Dial connects to address on the named network ("tcp", "tcp4", "tcp6" or
// "unix") with the given options.
func Dial(network, address string, opts ...Option) (*Conn, error) {
	d := Dialer{Options: opts}
	return d.DialContext(context.Background(), network, address)
}

// Dial connects to address on the named network.
func (d *Dialer) Dial(network, address string) (*Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialContext connects to address on the named network. ctx bounds the
// connect; once connected, ctx no longer matters.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (*Conn, error) {
	if err := checkNetwork(network); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	cfg, err := configFor(inDial, d.Options)
	if err != nil {
		return nil, err
	}
	eng, err := acquireEngine(cfg)
	if err != nil {
		return nil, err
	}
	defer eng.release() // the connection holds its own reference
	// net.Dialer does resolution, Happy Eyeballs, timeouts and
	// cancellation; the connected socket is then duplicated off Go's poller
	// and the original closed (the dup keeps the connection alive).
	nd := net.Dialer{Timeout: d.Timeout, LocalAddr: d.LocalAddr}
	nd.SetMultipathTCP(false)
	nc, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	laddr, raddr := nc.LocalAddr(), nc.RemoteAddr()
	sysfd, err := detach(nc)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Source: laddr, Addr: raddr, Err: err}
	}
	return newConn(sysfd, network, laddr, remoteOf(raddr), cfg, eng, nil)
}

// detach returns a non-blocking duplicate of nc's socket and closes nc.
func detach(nc net.Conn) (int, error) {
	defer nc.Close()
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return -1, err
	}
	sysfd := -1
	var derr error
	if err := rc.Control(func(fd uintptr) { sysfd, derr = dupSocket(fd) }); err != nil {
		return -1, err
	}
	return sysfd, derr
}
