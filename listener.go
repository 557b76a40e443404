package ringpoll

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Listener is a stream listener whose accepted connections are served by a
// ringpoll engine. It is a net.Listener: http.Serve, tls.NewListener and
// grpc's Serve accept it unmodified. Its methods are safe for concurrent use.
type Listener struct {
	ln        net.Listener // owns the address (and the Unix socket file)
	file      *os.File     // a duplicate of ln's socket, to wait in accept
	rc        syscall.RawConn
	network   string
	cfg       *config
	eng       *engineRef
	closeOnce sync.Once
	closed    atomic.Bool
}

// Listen announces on the local address, as net.Listen does, for the
// networks "tcp", "tcp4", "tcp6" and "unix".
func Listen(network, address string, opts ...Option) (*Listener, error) {
	if err := checkNetwork(network); err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	cfg, err := configFor(inListen, opts)
	if err != nil {
		return nil, err
	}
	eng, err := acquireEngine(cfg)
	if err != nil {
		return nil, err
	}
	// net.Listen does the address work (resolution, SO_REUSEADDR, dual
	// stack, unlinking the Unix socket file on Close); accepting goes around
	// it, straight to accept4, so accepted sockets never enter Go's poller.
	// MPTCP, which Go turns on for listeners by default, is turned off:
	// plain TCP is what the engines are built and measured for.
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), network, address)
	if err != nil {
		eng.release()
		return nil, err
	}
	if tl, ok := ln.(*net.TCPListener); ok {
		// Keep-alive probes as net.Listen's connections have them. net
		// sets them on each accepted socket; accepted sockets inherit
		// them from the listening one, so here it costs no call an
		// accept.
		if err := keepAliveByDefault(tl); err != nil {
			ln.Close()
			eng.release()
			return nil, &net.OpError{Op: "listen", Net: network, Addr: ln.Addr(), Err: err}
		}
	}
	// Accepts wait in Go's poller, on every engine: an io_uring multishot
	// accept completes in the task work of the thread that armed it,
	// which under connection churn is mostly an idle one, woken for each.
	//
	// A listener's own RawConn cannot wait (its Read is EINVAL), but an
	// os.File's can: Go's poller wakes Accept, and closing the file wakes it
	// with an error.
	file, err := ln.(interface{ File() (*os.File, error) }).File()
	if err != nil {
		ln.Close()
		eng.release()
		return nil, err
	}
	rc, err := file.SyscallConn()
	if err != nil {
		file.Close()
		ln.Close()
		eng.release()
		return nil, err
	}
	return &Listener{ln: ln, file: file, rc: rc, network: network, cfg: cfg, eng: eng}, nil
}

// keepAliveByDefault turns on net's default keep-alive probes on the
// listening socket of ln, for the sockets it accepts.
func keepAliveByDefault(ln *net.TCPListener) error {
	rc, err := ln.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = setKeepAliveConfig(int(fd), net.KeepAliveConfig{Enable: true}) }); err != nil {
		return err
	}
	return serr
}

func checkNetwork(network string) error {
	switch network {
	case "tcp", "tcp4", "tcp6", "unix":
		return nil
	case "udp", "udp4", "udp6":
		return net.UnknownNetworkError(network + " (ringpoll's streams are tcp, tcp4, tcp6 and unix; for UDP use ListenPacket or DialPacket)")
	}
	return net.UnknownNetworkError(network + " (ringpoll supports tcp, tcp4, tcp6 and unix)")
}

// Accept waits for the next connection and returns it as a *Conn.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.accept(nil, nil)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptConn is Accept returning the *Conn type.
func (l *Listener) AcceptConn() (*Conn, error) { return l.accept(nil, nil) }

// Close stops listening. A blocked Accept returns an error wrapping
// net.ErrClosed. Accepted connections stay open.
func (l *Listener) Close() error {
	err := net.ErrClosed
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		l.file.Close()
		err = l.ln.Close()
		l.eng.release()
	})
	if err != nil {
		return &net.OpError{Op: "close", Net: l.network, Addr: l.Addr(), Err: err}
	}
	return nil
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// accept takes the next connection. A Server's connections come with its
// configuration, cfg; others (cfg nil) with the listener's.
func (l *Listener) accept(srv *Server, cfg *config) (*Conn, error) {
	if cfg == nil {
		cfg = l.cfg
	}
	var sysfd int
	var raddr remote
	var aerr error
	err := l.rc.Read(func(fd uintptr) bool {
		sysfd, raddr, aerr = acceptSocket(int(fd), l.network)
		return aerr != errAcceptAgain
	})
	if err == nil {
		err = aerr
	} else if l.closed.Load() {
		err = net.ErrClosed // os reports "use of closed file"
	}
	if err != nil {
		return nil, l.opError(err)
	}
	c, err := l.newConn(sysfd, raddr, srv, cfg)
	if err != nil {
		return nil, l.opError(err)
	}
	c.fd.Loop.Stats().Accepts.Add(1)
	return c, nil
}

func (l *Listener) newConn(sysfd int, raddr remote, srv *Server, cfg *config) (*Conn, error) {
	if l.network != "unix" {
		// As in net: Nagle off for request/response traffic.
		setNoDelay(sysfd, true)
	}
	// A listener on one address accepts every connection on it: they
	// share its address, which saves a getsockname and an address per
	// connection. One on a wildcard address asks the socket.
	laddr := l.Addr()
	if a, ok := laddr.(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		if a := localAddr(sysfd, l.network); a != nil {
			laddr = a
		}
	}
	return newConn(sysfd, l.network, laddr, raddr, cfg, l.eng, srv)
}

func (l *Listener) opError(err error) error {
	return &net.OpError{Op: "accept", Net: l.network, Addr: l.Addr(), Err: err}
}
