package hertz

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/cloudwego/hertz/pkg/network"
	"github.com/cloudwego/hertz/pkg/network/standard"
	"github.com/ringpoll/ringpoll"
)

// Dialer is Hertz's client dialer on ringpoll: a network.Dialer whose
// connections are ringpoll connections in a Conn. NewDialer makes one for
// client.WithDialer. Its methods are safe for concurrent use.
//
// TLS runs on crypto/tls over the ringpoll connection, in the buffered
// connection of Hertz's standard network package (nothing nocopy
// remains in it).
type Dialer struct {
	opts []ringpoll.Option
}

var _ network.Dialer = (*Dialer)(nil)

// NewDialer returns a dialer whose connections use the given ringpoll
// options (WithEngine, the high-water marks...): pass it to
// client.WithDialer.
func NewDialer(opts ...ringpoll.Option) *Dialer {
	return &Dialer{opts: append([]ringpoll.Option(nil), opts...)}
}

// DialConnection connects to address on network ("tcp", "tcp4", "tcp6" or
// "unix") within timeout (0: none) and returns the connection as a *Conn,
// or, with tlsConfig set, as a TLS connection whose handshake is done.
func (d *Dialer) DialConnection(network, address string, timeout time.Duration, tlsConfig *tls.Config) (network.Conn, error) {
	rc, err := d.dial(network, address, timeout)
	if err != nil {
		return nil, err
	}
	c := newConn(rc, nil)
	if tlsConfig == nil {
		return c, nil
	}
	return d.handshake(c, withServerName(tlsConfig, address), timeout)
}

// DialTimeout connects as DialConnection does, and returns the
// *ringpoll.Conn itself, or a *tls.Conn over it with its handshake done.
func (d *Dialer) DialTimeout(network, address string, timeout time.Duration, tlsConfig *tls.Config) (net.Conn, error) {
	rc, err := d.dial(network, address, timeout)
	if err != nil {
		return nil, err
	}
	if tlsConfig == nil {
		return rc, nil
	}
	tc := tls.Client(rc, withServerName(tlsConfig, address))
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		rc.Close()
		return nil, err
	}
	return tc, nil
}

// AddTLS runs a TLS client handshake over conn (a proxy's tunnel, say)
// and returns the TLS connection.
func (d *Dialer) AddTLS(conn network.Conn, tlsConfig *tls.Config) (network.Conn, error) {
	return standard.NewDialer().AddTLS(conn, tlsConfig)
}

// withServerName returns cfg, or, if it names no server and verifies
// certificates, a copy naming address's host, as tls.Dial does.
func withServerName(cfg *tls.Config, address string) *tls.Config {
	if cfg.ServerName != "" || cfg.InsecureSkipVerify {
		return cfg
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	cfg = cfg.Clone()
	cfg.ServerName = host
	return cfg
}

func (d *Dialer) dial(network, address string, timeout time.Duration) (*ringpoll.Conn, error) {
	rd := ringpoll.Dialer{Timeout: timeout, Options: d.opts}
	return rd.Dial(network, address)
}

// handshake runs AddTLS on c within timeout, closing c if it fails.
func (d *Dialer) handshake(c *Conn, tlsConfig *tls.Config, timeout time.Duration) (network.Conn, error) {
	if timeout > 0 {
		c.SetDeadline(time.Now().Add(timeout))
	}
	tc, err := d.AddTLS(c, tlsConfig)
	if err != nil {
		c.Close()
		return nil, err
	}
	if timeout > 0 {
		c.SetDeadline(time.Time{})
	}
	return tc, nil
}
