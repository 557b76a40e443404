package quicbench

import (
	"context"
	"errors"
	"net"

	"github.com/quic-go/quic-go"
)

// Serving is the protocol served on a socket, from Start to Stop.
type Serving struct {
	conn net.PacketConn
	tr   *quic.Transport
	ln   *quic.Listener
	srv  Server
	done chan struct{} // closed once Serve has returned
	err  error         // Serve's, once done is closed
}

// Start serves the protocol with quic-go's Transport on conn, with a
// certificate made now (ServerTLS) and ServerConfig. If it fails, it
// closes conn.
func Start(conn net.PacketConn) (*Serving, error) {
	tlsConf, err := ServerTLS()
	if err != nil {
		conn.Close()
		return nil, err
	}
	tr := &quic.Transport{Conn: conn}
	ln, err := tr.Listen(tlsConf, ServerConfig())
	if err != nil {
		tr.Close()
		conn.Close()
		return nil, err
	}
	s := &Serving{conn: conn, tr: tr, ln: ln, done: make(chan struct{})}
	go func() {
		s.err = s.srv.Serve(ln)
		close(s.done)
	}()
	return s, nil
}

// Done is closed once serving has ended: the listener failed, or Stop
// closed it. Err says why.
func (s *Serving) Done() <-chan struct{} { return s.done }

// Err is the listener's error once Done is closed.
func (s *Serving) Err() error {
	<-s.done
	return s.err
}

// Stop closes the listener, the transport and the socket, then waits,
// bounded by ctx, until every connection and stream is done. The
// transport ends the connections without a word to the peers (quic-go:
// Transport.Close), as a stopping server may.
func (s *Serving) Stop(ctx context.Context) error {
	err := errors.Join(s.ln.Close(), s.tr.Close(), s.conn.Close())
	<-s.done
	return errors.Join(err, s.srv.Wait(ctx))
}
